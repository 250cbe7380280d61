# batchledger — see README.md for the two commands a newcomer needs.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
# GOGC for the compiler in our builds (hack/lib.sh BUILD_GOGC says why); $GOGC wins.
BUILD_GOGC ?= $(or $(GOGC),400)
PKGS_UNIT := ./pkg/... ./cmd/... ./hack/release/... ./hack/cluster/... ./hack/bench/... ./hack/soak/... ./hack/kind/... ./internal/testsupport/kwok/... ./internal/testsupport/scrape/... ./internal/testsupport/report/...
# The local control plane's own tests start its processes: they need `make binaries`.
PKGS_E2E := ./e2e/... ./internal/testsupport/localcluster/...
E2E_TIMEOUT ?= 40m
CHART := charts/batchledger
# Files of the chart that `make generate` copies from config/.
CHART_GENERATED := $(CHART)/files/generated
# Everything `make generate` writes (hand-written kustomize files in config/ are not).
GENERATED_PATHS := pkg/apis config/crd/bases config/rbac/role.yaml config/webhook/manifests.yaml $(CHART)/crds $(CHART_GENERATED) schemas

.PHONY: all
all: build

##@ Development

.PHONY: generate
generate: ## Regenerate deepcopy code and CRD manifests with controller-gen, and the result message's JSON Schema.
	$(GO) tool controller-gen object:headerFile=hack/boilerplate.go.txt paths=./pkg/apis/...
	$(GO) tool controller-gen crd:allowDangerousTypes=false paths=./pkg/apis/... output:crd:artifacts:config=config/crd/bases
	$(GO) tool controller-gen rbac:roleName=manager-role paths=./pkg/controller/... paths=./pkg/kinds/... paths=./pkg/certs/... paths=./cmd/batchledger/... output:rbac:artifacts:config=config/rbac
	$(GO) tool controller-gen webhook paths=./pkg/webhook/... output:webhook:artifacts:config=config/webhook
	@# The Helm chart installs exactly the generated CRDs, RBAC rules and webhooks: copies,
	@# never hand edits (verify-generate fails on a stale copy).
	rm -rf $(CHART_GENERATED) $(CHART)/crds/*.yaml && mkdir -p $(CHART)/crds $(CHART_GENERATED)
	cp config/crd/bases/*.yaml $(CHART)/crds/
	cp config/rbac/role.yaml $(CHART_GENERATED)/role.yaml
	cp config/webhook/manifests.yaml $(CHART_GENERATED)/webhook-manifests.yaml
	@# config/worker's resources, for the chart's role: worker (its kustomization is not).
	mkdir -p $(CHART_GENERATED)/worker && cp $$(ls config/worker/*.yaml | grep -v /kustomization.yaml) $(CHART_GENERATED)/worker/
	cp config/monitoring/grafana-dashboard.json config/monitoring/prometheusrule.yaml $(CHART_GENERATED)/
	@# The result message's JSON Schema, derived from pkg/result's types and limits.
	$(GO) run ./hack/resultschema -o schemas/result-v1.schema.json

.PHONY: verify-tools
verify-tools: ## Fail when the project or JobSet's or Trainer's wrapper module resolves a shared dependency to another version than hack/tools/kubernetes (cold builds would compile it twice).
	hack/tools/align.sh project --check
	hack/tools/align.sh jobset --check
	hack/tools/align.sh trainer --check

.PHONY: verify-generate
verify-generate: generate ## Fail when generated files are stale.
	@git diff --exit-code -- pkg/apis config/crd config/rbac config/webhook $(CHART)/crds $(CHART_GENERATED) schemas && [ -z "$$(git ls-files --others --exclude-standard $(GENERATED_PATHS))" ] || { echo "generated files are stale: run 'make generate' and commit" >&2; exit 1; }

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet, and a gofmt check.
	@out=$$(gofmt -l $$(git ls-files '*.go' ; git ls-files --others --exclude-standard '*.go')); \
	  [ -z "$$out" ] || { echo "gofmt needed: $$out" >&2; exit 1; }
	$(GO) vet ./...

GOLANGCI_LINT := $(CURDIR)/bin/golangci-lint

# --allow-parallel-runners: several checkouts (worktrees, a CI clone) may lint at once on
# one machine; they need not fail on golangci-lint's lock.
.PHONY: golangci-lint
golangci-lint: ## golangci-lint with .golangci.yml (pinned in hack/tools/golangci-lint, built once into the cache).
	hack/build-install-tools.sh golangci-lint
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...

.PHONY: lint
lint: vet golangci-lint verify-generate verify-install verify-tools ## Every static check CI runs.

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# -ldflags that stamp VERSION into a binary (pkg/version); hack/release stamps the same.
VERSION_LDFLAGS := -s -w -X batchledger.dev/batchledger/pkg/version.Version=$(VERSION)

.PHONY: build
build: ## Build the manager into bin/ exactly as the Dockerfile's build stage does.
	CGO_ENABLED=0 GOGC=$(BUILD_GOGC) $(GO) build -trimpath -ldflags "$(VERSION_LDFLAGS)" -o bin/batchledger ./cmd/batchledger
	CGO_ENABLED=0 GOGC=$(BUILD_GOGC) $(GO) build -trimpath -ldflags "$(VERSION_LDFLAGS)" -o bin/kubectl-batchledger ./cmd/kubectl-batchledger
	CGO_ENABLED=0 GOGC=$(BUILD_GOGC) $(GO) build -trimpath -ldflags "$(VERSION_LDFLAGS)" -o bin/kubectl_complete-batchledger ./cmd/kubectl_complete-batchledger

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) -t batchledger:$(VERSION) .

##@ Tests

.PHONY: test
test: lint test-unit test-e2e test-install test-soak test-e2e-kind ## The whole suite: static checks, unit tests, e2e on a real local control plane, the kustomize install's manager, a short chaos soak, e2e on kind.

.PHONY: test-unit
test-unit: test-python ## Unit tests of the pure packages (no cluster), and of the Python worker module.
	$(GO) test -count=1 $(PKGS_UNIT)

.PHONY: test-python
test-python: ## Unit tests of the Python worker module (python/, standard library only).
	python3 -m unittest discover -s python -t python

.PHONY: binaries
binaries: ## Build (or reuse from the cache) etcd, Kubernetes, kwok, Kueue, JobSet and Kubeflow Trainer binaries.
	hack/build-binaries.sh

.PHONY: kubectl
kubectl: ## Build (or reuse from the cache) bin/kubectl v1.35, to look into the demo's cluster; `make binaries` leaves it out, since nothing on the local control plane runs it.
	hack/build-binaries.sh kubectl

.PHONY: test-e2e
test-e2e: binaries ## e2e tests on a local control plane started by the tests (or E2E_USE_EXISTING_CLUSTER=true with KUBECONFIG).
	$(GO) test -p 1 -count=1 -timeout $(E2E_TIMEOUT) $(PKGS_E2E)

.PHONY: test-e2e-kind
test-e2e-kind: binaries install-tools ## e2e on a kind cluster of real kubelets (GPU-flavored workers, charts of Kueue, JobSet and batchledger), then helm uninstall; builds and tears down everything (KIND_KEEP=true keeps it).
	hack/kind/test.sh

.PHONY: kind-up
kind-up: binaries install-tools ## Start the kind cluster (dockerd, node image, images, Kueue and JobSet and batchledger by Helm, Kubeflow Trainer by its kustomize manifests); prints its KUBECONFIG.
	hack/kind/cluster.sh up

.PHONY: kind-down
kind-down: ## Delete the kind cluster and stop its dockerd, removing its bridges and iptables chains.
	hack/kind/cluster.sh down

.PHONY: mutate
mutate: ## Mutation testing of pkg/indexset, pkg/account, pkg/result, pkg/acceptance (gremlins, pinned in hack/tools/gremlins); fails under 90% efficacy (~75 min on 2 cores).
	hack/mutate.sh

.PHONY: test-soak
test-soak: binaries ## The short chaos soak: 10 seeded batches under 10 SIGKILLs (batchledger leader, Kueue, kcm, apiserver); fails on a lost result, a wrong verdict, a forged result counted or a stranded pod (~3 min).
	$(GO) run ./hack/soak --seed=1 --batches=10 --kills=10

SOAK_FLAGS ?= --seed=7 --batches=100 --kills=100 --min-gap=3s --max-gap=9s --out=docs/reliability.md
.PHONY: soak
soak: binaries ## The chaos soak behind docs/reliability.md (~18 min on 2 cores).
	$(GO) run ./hack/soak $(SOAK_FLAGS)

##@ Install

INSTALL_OUT := _output/install
HELM := $(CURDIR)/bin/helm
KUSTOMIZE := $(CURDIR)/bin/kustomize

.PHONY: install-tools
install-tools: ## Build (or reuse from the cache) helm and kustomize, pinned in hack/tools/{helm,kustomize}.
	hack/build-install-tools.sh

.PHONY: helm-lint
helm-lint: install-tools ## helm lint --strict and helm template charts/batchledger in both certificate modes.
	@mkdir -p $(INSTALL_OUT)
	for mode in self certManager; do \
	  $(HELM) lint --strict $(CHART) --set webhook.certMode=$$mode --set serviceMonitor.enabled=true; \
	  $(HELM) template batchledger $(CHART) --namespace batchledger-system --include-crds \
	    --set webhook.certMode=$$mode > $(INSTALL_OUT)/helm-$$mode.yaml; \
	done

.PHONY: kustomize-build
kustomize-build: install-tools ## Render config/default into _output/install/kustomize-default.yaml.
	@mkdir -p $(INSTALL_OUT)
	$(KUSTOMIZE) build config/default > $(INSTALL_OUT)/kustomize-default.yaml

.PHONY: verify-install
verify-install: helm-lint kustomize-build ## Check that the chart and config/default agree (CRDs, RBAC, webhooks, Deployment), and config/worker's policies.
	INSTALLCHECK_REQUIRE_TOOLS=1 HELM=$(HELM) KUSTOMIZE=$(KUSTOMIZE) $(GO) test -count=1 -run '^(TestChart|TestDocker|TestWorkerPolicies)' ./hack/installcheck/

.PHONY: test-install
test-install: binaries install-tools ## Run config/default's manager (self-managed certificates, its own RBAC) on a local control plane.
	INSTALLCHECK_REQUIRE_TOOLS=1 HELM=$(HELM) KUSTOMIZE=$(KUSTOMIZE) $(GO) test -count=1 -timeout 10m -run 'OnLocalCluster$$' ./hack/installcheck/

##@ Release

# The manager image repository the release's install.yaml and chart default to.
IMAGE ?= batchledger
RELEASE_OUT := _output/release

.PHONY: release
release: install-tools ## Build the release offline into _output/release: install.yaml, the packaged chart, the plugin for linux/darwin x amd64/arm64, the manager image (OCI archive, linux/amd64+arm64), SHA256SUMS (VERSION=vX.Y.Z IMAGE=registry/batchledger; ~minutes).
	GOGC=$(BUILD_GOGC) $(GO) run ./hack/release --version=$(VERSION) --image=$(IMAGE) --out=$(RELEASE_OUT) --helm=$(HELM) --kustomize=$(KUSTOMIZE) --go=$(GO)

##@ Local cluster

.PHONY: demo
# The demo, the plugin and the manager compile static and -trimpath, like `make build`, the
# component binaries and the kind images: one build configuration, so a newcomer's cold
# first run fills the Go build cache once (and, with hack/tools/align.sh project, reuses
# what the Kubernetes build compiled). One `go build` for the three: compiles and links
# overlap. `go build -o bin/` names the demo bin/demo.
demo: export CGO_ENABLED = 0
demo: export GOFLAGS += -trimpath
demo: binaries ## The main job: local cluster + controller, then the IJ245 batch and a JobSet run, step by step (DEMO_FLAGS=--down tears down).
	GOGC=$(BUILD_GOGC) $(GO) build -o bin/ ./cmd/kubectl-batchledger ./cmd/batchledger ./hack/demo
	bin/demo --manager=bin/batchledger $(DEMO_FLAGS)

.PHONY: demo-multikueue
demo-multikueue: export CGO_ENABLED = 0
demo-multikueue: export GOFLAGS += -trimpath
demo-multikueue: binaries ## A results batch across a MultiKueue fleet: a manager and two worker local control planes, batchledger in both roles; stops them at the end.
	GOGC=$(BUILD_GOGC) $(GO) build -o bin/ ./cmd/kubectl-batchledger ./cmd/batchledger ./hack/demo
	bin/demo --multikueue --manager=bin/batchledger $(DEMO_FLAGS)

.PHONY: demo-kind
demo-kind: binaries install-tools ## The same batches on kind: real kubelets, batchledger installed by its Helm chart (make kind-down tears down).
	hack/kind/cluster.sh up
	$(GO) run ./hack/demo --kind=$(CURDIR)/_output/kind/kubeconfig

.PHONY: cluster-up
cluster-up: binaries ## Start the local control plane with Kueue, JobSet and kwok GPU nodes; prints the kubeconfig.
	$(GO) run ./hack/cluster up

.PHONY: cluster-down
cluster-down: ## Stop the local control plane.
	$(GO) run ./hack/cluster down

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Benchmarks

.PHONY: bench
bench: binaries build ## Load benchmark on a fresh local cluster: controller vs kube-controller-manager CPU, writes per change, latency (BENCH_FLAGS=--sizes=5x10,20x50 --out=docs/benchmarks.md).
	$(GO) run ./hack/bench $(BENCH_FLAGS)

.PHONY: bench-baseline
bench-baseline: binaries build ## Kueue's scheduler-performance baseline, scaled, with and without batchledger (BASELINE_FLAGS=--scale=0.1 --rounds=2).
	$(GO) run ./hack/bench baseline $(BASELINE_FLAGS)
