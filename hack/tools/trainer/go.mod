// Module trainer is a build-only wrapper of the Kubeflow Trainer controller manager.
// Every dependency it shares with hack/tools/kubernetes is pinned at that module's version
// (hack/tools/align.sh trainer), so the packages compiled for Kubernetes, etcd, Kueue and
// JobSet are reused from the Go build cache and only Trainer's own packages compile.
module batchledger.dev/hack/tools/trainer

go 1.26.0

require github.com/kubeflow/trainer/v2 v2.2.0

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/blang/semver/v4 v4.0.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/coreos/go-oidc/v3 v3.17.0 // indirect
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/emicklei/go-restful/v3 v3.13.0 // indirect
	github.com/evanphx/json-patch/v5 v5.9.11 // indirect
	github.com/fsnotify/fsnotify v1.9.0 // indirect
	github.com/fxamacker/cbor/v2 v2.9.0 // indirect
	github.com/go-jose/go-jose/v4 v4.1.3 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/zapr v1.3.0 // indirect
	github.com/go-openapi/jsonpointer v0.22.4 // indirect
	github.com/go-openapi/jsonreference v0.21.4 // indirect
	github.com/go-openapi/swag v0.25.4 // indirect
	github.com/go-openapi/swag/cmdutils v0.25.4 // indirect
	github.com/go-openapi/swag/conv v0.25.4 // indirect
	github.com/go-openapi/swag/fileutils v0.25.4 // indirect
	github.com/go-openapi/swag/jsonname v0.25.4 // indirect
	github.com/go-openapi/swag/jsonutils v0.25.4 // indirect
	github.com/go-openapi/swag/loading v0.25.4 // indirect
	github.com/go-openapi/swag/mangling v0.25.4 // indirect
	github.com/go-openapi/swag/netutils v0.25.4 // indirect
	github.com/go-openapi/swag/stringutils v0.25.4 // indirect
	github.com/go-openapi/swag/typeutils v0.25.4 // indirect
	github.com/go-openapi/swag/yamlutils v0.25.4 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/google/gnostic-models v0.7.1 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.3-0.20250322232337-35a7c28c31ee // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/open-policy-agent/cert-controller v0.16.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2 // indirect
	github.com/prometheus/client_golang v1.23.2 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.67.5 // indirect
	github.com/prometheus/procfs v0.19.2 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.opentelemetry.io/otel v1.41.0 // indirect
	go.opentelemetry.io/otel/trace v1.41.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.27.1 // indirect
	go.yaml.in/yaml/v2 v2.4.3 // indirect
	go.yaml.in/yaml/v3 v3.0.4 // indirect
	golang.org/x/crypto v0.48.0 // indirect
	golang.org/x/net v0.51.0 // indirect
	golang.org/x/oauth2 v0.35.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/term v0.40.0 // indirect
	golang.org/x/text v0.34.0 // indirect
	golang.org/x/time v0.14.0 // indirect
	gomodules.xyz/jsonpatch/v2 v2.5.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
	gopkg.in/evanphx/json-patch.v4 v4.13.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	k8s.io/api v0.35.3 // indirect
	k8s.io/apiextensions-apiserver v0.35.3 // indirect
	k8s.io/apimachinery v0.35.3 // indirect
	k8s.io/apiserver v0.35.3 // indirect
	k8s.io/client-go v0.35.3 // indirect
	k8s.io/component-base v0.35.3 // indirect
	k8s.io/component-helpers v0.35.3 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/kube-openapi v0.0.0-20260127142750-a19766b6e2d4 // indirect
	k8s.io/utils v0.0.0-20260210185600-b8788abfbbc2 // indirect
	sigs.k8s.io/controller-runtime v0.23.3 // indirect
	sigs.k8s.io/jobset v0.11.1 // indirect
	sigs.k8s.io/json v0.0.0-20250730193827-2d320260d730 // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/scheduler-plugins v0.34.1-devel // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.3.2 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
	volcano.sh/apis v1.14.0 // indirect
)

replace github.com/emicklei/go-restful/v3 => github.com/emicklei/go-restful/v3 v3.13.0

replace github.com/go-openapi/jsonpointer => github.com/go-openapi/jsonpointer v0.22.4

replace github.com/go-openapi/jsonreference => github.com/go-openapi/jsonreference v0.21.4

replace github.com/go-openapi/swag => github.com/go-openapi/swag v0.25.4

replace github.com/google/gnostic-models => github.com/google/gnostic-models v0.7.1

replace github.com/open-policy-agent/cert-controller => github.com/open-policy-agent/cert-controller v0.16.0

replace github.com/prometheus/common => github.com/prometheus/common v0.67.5

replace github.com/prometheus/procfs => github.com/prometheus/procfs v0.19.2

replace github.com/spf13/pflag => github.com/spf13/pflag v1.0.10

replace go.opentelemetry.io/otel => go.opentelemetry.io/otel v1.41.0

replace go.opentelemetry.io/otel/trace => go.opentelemetry.io/otel/trace v1.41.0

replace golang.org/x/net => golang.org/x/net v0.51.0

replace golang.org/x/oauth2 => golang.org/x/oauth2 v0.35.0

replace golang.org/x/sync => golang.org/x/sync v0.20.0

replace golang.org/x/sys => golang.org/x/sys v0.48.0

replace golang.org/x/time => golang.org/x/time v0.14.0

replace gomodules.xyz/jsonpatch/v2 => gomodules.xyz/jsonpatch/v2 v2.5.0

replace google.golang.org/protobuf => google.golang.org/protobuf v1.36.11

replace k8s.io/api => k8s.io/api v0.35.3

replace k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.35.3

replace k8s.io/apimachinery => k8s.io/apimachinery v0.35.3

replace k8s.io/apiserver => k8s.io/apiserver v0.35.3

replace k8s.io/client-go => k8s.io/client-go v0.35.3

replace k8s.io/component-base => k8s.io/component-base v0.35.3

replace k8s.io/component-helpers => k8s.io/component-helpers v0.35.3

replace k8s.io/klog/v2 => k8s.io/klog/v2 v2.140.0

replace k8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-20260127142750-a19766b6e2d4

replace k8s.io/utils => k8s.io/utils v0.0.0-20260210185600-b8788abfbbc2

replace volcano.sh/apis => volcano.sh/apis v1.14.0
