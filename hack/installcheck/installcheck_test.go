package installcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/pkg/certs"
	"batchledger.dev/batchledger/pkg/ledgerkey"
)

// requireToolsEnv makes missing tools a failure instead of a skip: `make verify-install`
// sets it after building them, so CI never passes by skipping.
const requireToolsEnv = "INSTALLCHECK_REQUIRE_TOOLS"

func setup(t *testing.T) (string, Tools) {
	t.Helper()
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	tools := FindTools(root)
	if tools.Helm == "" || tools.Kustomize == "" {
		msg := "helm or kustomize not found (bin/, $HELM/$KUSTOMIZE or PATH): run `make verify-install`, which builds them with hack/build-install-tools.sh"
		if os.Getenv(requireToolsEnv) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return root, tools
}

// variants pairs each supported install shape: edits of config/default (old, new) and the
// Helm values that select the same shape.
var variants = []struct {
	name  string
	edits []string
	set   []string
}{
	{name: "defaults/self-managed-certs"},
	{
		name:  "cert-manager",
		edits: []string{"\n- ../internalcert\n", "\n- ../certmanager\n"},
		set:   []string{"webhook.certMode=certManager"},
	},
	{
		name:  "servicemonitor",
		edits: []string{"\n#- ../prometheus\n", "\n- ../prometheus\n"},
		set:   []string{"serviceMonitor.enabled=true"},
	},
	{
		name:  "webhook-namespace-selector",
		edits: []string{"\n#- ../webhook-namespace-selector\n", "\n- ../webhook-namespace-selector\n"},
		set:   []string{`webhook.namespaceSelector.matchLabels.batchledger\.dev/batches=enabled`},
	},
}

// TestChartAgreesWithKustomize renders each install shape both ways and compares them.
func TestChartAgreesWithKustomize(t *testing.T) {
	root, tools := setup(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			dir := filepath.Join(root, "config", "default")
			if len(v.edits) > 0 {
				var err error
				if dir, err = ConfigVariant(root, t.TempDir(), v.edits...); err != nil {
					t.Fatal(err)
				}
			}
			k, err := tools.RenderKustomize(dir)
			if err != nil {
				t.Fatal(err)
			}
			h, err := tools.RenderChart(filepath.Join(root, "charts", "batchledger"), v.set...)
			if err != nil {
				t.Fatal(err)
			}
			t.Run("objects", func(t *testing.T) { compareInventory(t, k, h) })
			t.Run("crds", func(t *testing.T) { compareCRDs(t, k, h) })
			t.Run("rbac", func(t *testing.T) { compareRBAC(t, k, h) })
			t.Run("webhooks", func(t *testing.T) { compareWebhooks(t, k, h) })
			t.Run("deployment", func(t *testing.T) { compareDeployment(t, k, h) })
			t.Run("admission-policy", func(t *testing.T) { comparePolicies(t, k, h) })
			t.Run("kustomize-references", func(t *testing.T) { checkReferences(t, k) })
			t.Run("helm-references", func(t *testing.T) { checkReferences(t, h) })
		})
	}
}

// TestChartOtherReleaseName renders the chart under another release name and namespace:
// every name the manager is told and every reference must follow, none may be fixed.
func TestChartOtherReleaseName(t *testing.T) {
	root, tools := setup(t)
	for _, mode := range []string{"self", "certManager"} {
		t.Run(mode, func(t *testing.T) {
			out, err := run(tools.Helm, "template", "ledger", filepath.Join(root, "charts", "batchledger"),
				"--namespace", "ops", "--set", "webhook.certMode="+mode, "--set", "serviceMonitor.enabled=true")
			if err != nil {
				t.Fatal(err)
			}
			h, err := Decode(out)
			if err != nil {
				t.Fatal(err)
			}
			for k := range h {
				if k.Namespace != "" && k.Namespace != "ops" {
					t.Errorf("%s is not in the release namespace", k)
				}
				if !strings.HasPrefix(k.Name, "ledger-batchledger-") {
					t.Errorf("%s is not named after the release", k)
				}
			}
			checkReferences(t, h)
		})
	}
}

// compareInventory: the same objects, by kind, namespace and name. Helm does not create
// its release namespace (helm install --create-namespace does), and its hooks (the
// pre-delete Job, TestChartUninstallHook) run only under helm uninstall: kustomize users
// run `kubectl batchledger release` instead.
func compareInventory(t *testing.T, k, h Objects) {
	for _, key := range k.Keys() {
		if _, ok := h[key]; !ok && key.Kind != "Namespace" {
			t.Errorf("%s: in the kustomize output, not in the chart", key)
		}
	}
	for _, key := range h.Keys() {
		if _, ok := k[key]; !ok && !isHook(h[key]) {
			t.Errorf("%s: in the chart, not in the kustomize output", key)
		}
	}
}

// isHook reports whether a rendered object is a Helm hook, created only when its hook
// event runs, not by helm install.
func isHook(u *unstructured.Unstructured) bool {
	_, ok := u.GetAnnotations()["helm.sh/hook"]
	return ok
}

// compareCRDs: the same CRDs with identical specs.
func compareCRDs(t *testing.T, k, h Objects) {
	kc, hc := crds(t, k), crds(t, h)
	if len(kc) == 0 {
		t.Fatal("no CRDs rendered by kustomize")
	}
	if !equality.Semantic.DeepEqual(sortedKeys(kc), sortedKeys(hc)) {
		t.Fatalf("CRD sets differ: kustomize %v, chart %v", sortedKeys(kc), sortedKeys(hc))
	}
	for name, spec := range kc {
		if !equality.Semantic.DeepEqual(spec, hc[name]) {
			t.Errorf("CRD %s: specs differ:\n%s", name, diff(spec, hc[name]))
		}
	}
}

func crds(t *testing.T, o Objects) map[string]apiextensionsv1.CustomResourceDefinitionSpec {
	out := map[string]apiextensionsv1.CustomResourceDefinitionSpec{}
	for _, u := range o.Of("CustomResourceDefinition") {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := Into(u, &crd); err != nil {
			t.Fatalf("CRD %s: %v", u.GetName(), err)
		}
		out[crd.Name] = crd.Spec
	}
	return out
}

// compareRBAC: every ClusterRole and Role has the same rules (order-insensitive), every
// binding the same role and subjects.
func compareRBAC(t *testing.T, k, h Objects) {
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, u := range k.Of(kind) {
			other, ok := h[Key{kind, u.GetNamespace(), u.GetName()}]
			if !ok {
				continue // compareInventory reports it
			}
			kr, hr := rules(t, u), rules(t, other)
			if len(kr) == 0 {
				t.Errorf("%s %s has no rules", kind, u.GetName())
			}
			if !equality.Semantic.DeepEqual(kr, hr) {
				t.Errorf("%s %s: rules differ:\n%s", kind, u.GetName(), diff(kr, hr))
			}
			// The users' roles are granted by these labels, aggregated to admin, edit, view.
			if ka, ha := aggregation(u), aggregation(other); !equality.Semantic.DeepEqual(ka, ha) {
				t.Errorf("%s %s: kustomize aggregates it to %v, the chart to %v", kind, u.GetName(), ka, ha)
			}
		}
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, u := range k.Of(kind) {
			other, ok := h[Key{kind, u.GetNamespace(), u.GetName()}]
			if !ok {
				continue
			}
			var kb, hb rbacv1.RoleBinding // a ClusterRoleBinding has the same fields
			if err := Into(u, &kb); err != nil {
				t.Fatal(err)
			}
			if err := Into(other, &hb); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(kb.RoleRef, hb.RoleRef) || !equality.Semantic.DeepEqual(kb.Subjects, hb.Subjects) {
				t.Errorf("%s %s: kustomize binds %v to %v, the chart %v to %v", kind, u.GetName(), kb.RoleRef, kb.Subjects, hb.RoleRef, hb.Subjects)
			}
		}
	}
}

// aggregation returns the aggregate-to-* labels of a role.
func aggregation(u *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for k, v := range u.GetLabels() {
		if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
			out[k] = v
		}
	}
	return out
}

// rules returns a role's rules with each list sorted and the rules sorted, so that only
// the permissions granted are compared, not how they are written down.
func rules(t *testing.T, u *unstructured.Unstructured) []rbacv1.PolicyRule {
	var role rbacv1.ClusterRole
	if err := Into(u, &role); err != nil {
		t.Fatal(err)
	}
	out := make([]rbacv1.PolicyRule, len(role.Rules))
	for i, r := range role.Rules {
		for _, l := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs} {
			sort.Strings(l)
		}
		out[i] = r
	}
	sort.Slice(out, func(i, j int) bool { return jsonString(out[i]) < jsonString(out[j]) })
	return out
}

// compareWebhooks: each webhook configuration has the same webhooks, each identical in
// every field (rules, objectSelector, namespaceSelector, failurePolicy, sideEffects,
// timeout, the Service it calls), and the same cert-manager CA injection annotation.
func compareWebhooks(t *testing.T, k, h Objects) {
	n := 0
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, u := range k.Of(kind) {
			n++
			other, ok := h[Key{kind, "", u.GetName()}]
			if !ok {
				continue
			}
			if a, b := injection(u.GetAnnotations()), injection(other.GetAnnotations()); a != b {
				t.Errorf("%s %s: CA injection annotation %q (kustomize) vs %q (chart)", kind, u.GetName(), a, b)
			}
			kw, hw := webhooks(t, u), webhooks(t, other)
			if !equality.Semantic.DeepEqual(sortedKeys(kw), sortedKeys(hw)) {
				t.Errorf("%s %s: webhooks %v (kustomize) vs %v (chart)", kind, u.GetName(), sortedKeys(kw), sortedKeys(hw))
				continue
			}
			for name, w := range kw {
				if !equality.Semantic.DeepEqual(w, hw[name]) {
					t.Errorf("%s %s, webhook %s differs:\n%s", kind, u.GetName(), name, diff(w, hw[name]))
				}
			}
		}
	}
	if n != 2 {
		t.Errorf("kustomize rendered %d webhook configurations, want a mutating and a validating one", n)
	}
}

func injection(a map[string]string) string { return a["cert-manager.io/inject-ca-from"] }

// webhooks returns a configuration's webhooks by name; validating webhooks are held as
// mutating ones (a subset of the fields) so that both kinds compare alike.
func webhooks(t *testing.T, u *unstructured.Unstructured) map[string]admissionregistrationv1.MutatingWebhook {
	var c admissionregistrationv1.MutatingWebhookConfiguration
	if err := Into(u, &c); err != nil {
		t.Fatal(err)
	}
	out := map[string]admissionregistrationv1.MutatingWebhook{}
	for _, w := range c.Webhooks {
		out[w.Name] = w
	}
	return out
}

// compareDeployment: the manager pod runs the same way: the same effective flags, the
// same image, security contexts, probes, resources, ports and certificate mount.
func compareDeployment(t *testing.T, k, h Objects) {
	kd, hd := deployment(t, k), deployment(t, h)
	ks, hs := kd.Spec.Template.Spec, hd.Spec.Template.Spec
	kc, hc := ks.Containers[0], hs.Containers[0]
	for _, f := range []struct {
		what string
		a, b any
	}{
		{"replicas", kd.Spec.Replicas, hd.Spec.Replicas},
		{"pod securityContext", ks.SecurityContext, hs.SecurityContext},
		{"volumes", ks.Volumes, hs.Volumes},
		{"image", kc.Image, hc.Image},
		{"imagePullPolicy", kc.ImagePullPolicy, hc.ImagePullPolicy},
		{"flags", effectiveFlags(kc.Args), effectiveFlags(hc.Args)},
		{"env", kc.Env, hc.Env},
		{"ports", kc.Ports, hc.Ports},
		{"container securityContext", kc.SecurityContext, hc.SecurityContext},
		{"livenessProbe", kc.LivenessProbe, hc.LivenessProbe},
		{"readinessProbe", kc.ReadinessProbe, hc.ReadinessProbe},
		{"resources", kc.Resources, hc.Resources},
		{"volumeMounts", kc.VolumeMounts, hc.VolumeMounts},
	} {
		if !equality.Semantic.DeepEqual(f.a, f.b) {
			t.Errorf("manager %s differ:\n%s", f.what, diff(f.a, f.b))
		}
	}
	sc := kc.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("manager container securityContext is not locked down: %s", jsonString(sc))
	}
	if ps := ks.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("manager pod securityContext is not non-root with seccomp RuntimeDefault: %s", jsonString(ps))
	}
}

func deployment(t *testing.T, o Objects) *appsv1.Deployment {
	t.Helper()
	ds := o.Of("Deployment")
	if len(ds) != 1 {
		t.Fatalf("%d Deployments rendered, want 1", len(ds))
	}
	var d appsv1.Deployment
	if err := Into(ds[0], &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("Deployment %s has %d containers, want 1", d.Name, len(d.Spec.Template.Spec.Containers))
	}
	return &d
}

// managerDefaults are cmd/batchledger's defaults for the flags whose values decide how the
// manager finds its certificate and webhooks, elects its leader, how many accounts it
// reconciles at once and how fast it may call the API server, so that a rendering that relies on a default (config/default) and
// one that passes it explicitly (the chart) compare equal.
var managerDefaults = map[string]string{
	"leader-elect":                     "false",
	"leader-elect-lease-duration":      "15s",
	"leader-elect-renew-deadline":      "10s",
	"leader-elect-retry-period":        "2s",
	"concurrent-account-syncs":         "5",
	"kube-api-qps":                     "100",
	"kube-api-burst":                   "200",
	"workload-message-interval":        "10s",
	"waiting-status-delay":             "30s",
	"metrics-bind-address":             "0",
	"metrics-secure":                   "false",
	"health-probe-bind-address":        ":8081",
	"webhook-port":                     "9443",
	"webhook-cert-dir":                 "",
	"cert-management":                  "external",
	"webhook-cert-secret":              certs.DefaultSecretName,
	"webhook-service":                  certs.DefaultServiceName,
	"validating-webhook-configuration": certs.DefaultValidatingWebhookConfiguration,
	"mutating-webhook-configuration":   certs.DefaultMutatingWebhookConfiguration,
	"ledger-key-secret":                ledgerkey.DefaultSecretName,
	"zap-log-level":                    "",
	"per-account-metrics":              "true",
}

// effectiveFlags returns the flag values args leave the manager with (a bare boolean
// flag is "true").
func effectiveFlags(args []string) map[string]string {
	out := map[string]string{}
	for k, v := range managerDefaults {
		out[k] = v
	}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok {
			value = "true"
		}
		out[name] = value
	}
	return out
}

// checkReferences checks that a rendering is whole: bindings name rendered roles and
// service accounts, the webhooks call a rendered Service that selects the manager pods,
// the names the manager is given (Service, Secret, webhook configurations) exist, and
// the admission policies are bound and name the manager's ServiceAccount (checkPolicy),
// and only the manager may write the ledger (checkLedgerRBAC).
func checkReferences(t *testing.T, o Objects) {
	checkPolicy(t, o)
	checkLedgerRBAC(t, o)
	d := deployment(t, o)
	ns := d.Namespace
	pod := labels.Set(d.Spec.Template.Labels)
	sel, err := labelsSelector(d)
	if err != nil || !sel.Matches(pod) {
		t.Errorf("Deployment selector does not select its own pods (%v)", err)
	}
	if _, ok := o[Key{"ServiceAccount", ns, d.Spec.Template.Spec.ServiceAccountName}]; !ok {
		t.Errorf("the manager runs as ServiceAccount %s, which is not rendered", d.Spec.Template.Spec.ServiceAccountName)
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, u := range o.Of(kind) {
			var b rbacv1.RoleBinding
			if err := Into(u, &b); err != nil {
				t.Fatal(err)
			}
			roleNS := ""
			if b.RoleRef.Kind == "Role" {
				roleNS = u.GetNamespace()
			}
			if _, ok := o[Key{b.RoleRef.Kind, roleNS, b.RoleRef.Name}]; !ok {
				t.Errorf("%s %s binds %s %s, which is not rendered", kind, u.GetName(), b.RoleRef.Kind, b.RoleRef.Name)
			}
			for _, s := range b.Subjects {
				if _, ok := o[Key{"ServiceAccount", s.Namespace, s.Name}]; s.Kind == "ServiceAccount" && !ok {
					t.Errorf("%s %s binds ServiceAccount %s/%s, which is not rendered", kind, u.GetName(), s.Namespace, s.Name)
				}
			}
		}
	}
	c := d.Spec.Template.Spec.Containers[0]
	flags := effectiveFlags(c.Args)
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if fmt.Sprint(ports["webhook-server"]) != flags["webhook-port"] {
		t.Errorf("container port webhook-server is %d, the webhook server listens on %s", ports["webhook-server"], flags["webhook-port"])
	}
	for _, u := range o.Of("Service") {
		var svc corev1.Service
		if err := Into(u, &svc); err != nil {
			t.Fatal(err)
		}
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(pod) || len(svc.Spec.Selector) == 0 {
			t.Errorf("Service %s does not select the manager pods", svc.Name)
		}
		for _, p := range svc.Spec.Ports {
			if _, ok := ports[p.TargetPort.StrVal]; !ok {
				t.Errorf("Service %s targets port %q, which the manager does not declare", svc.Name, p.TargetPort.String())
			}
		}
	}
	names := map[string]string{"ValidatingWebhookConfiguration": flags["validating-webhook-configuration"], "MutatingWebhookConfiguration": flags["mutating-webhook-configuration"]}
	for kind, name := range names {
		u, ok := o[Key{kind, "", name}]
		if !ok {
			t.Errorf("the manager is told %s %s, which is not rendered", kind, name)
			continue
		}
		for wname, w := range webhooks(t, u) {
			s := w.ClientConfig.Service
			if s == nil || s.Name != flags["webhook-service"] || s.Namespace != ns {
				t.Errorf("webhook %s calls %s, want Service %s/%s", wname, jsonString(s), ns, flags["webhook-service"])
			}
		}
	}
	if _, ok := o[Key{"Service", ns, flags["webhook-service"]}]; !ok {
		t.Errorf("webhook Service %s is not rendered", flags["webhook-service"])
	}
	secret := flags["webhook-cert-secret"]
	if !secretMountedAt(d.Spec.Template.Spec, c, secret, flags["webhook-cert-dir"]) {
		t.Errorf("Secret %s is not mounted at --webhook-cert-dir=%s", secret, flags["webhook-cert-dir"])
	}
	// The signing key Secret is created empty in every install shape: the manager has no
	// create permission on secrets.
	if _, ok := o[Key{"Secret", ns, flags["ledger-key-secret"]}]; !ok {
		t.Errorf("the signing key Secret %s is not created", flags["ledger-key-secret"])
	}
	switch flags["cert-management"] {
	case "self":
		if _, ok := o[Key{"Secret", ns, secret}]; !ok {
			t.Errorf("self-managed certificates: Secret %s is not created", secret)
		}
		if len(o.Of("Certificate")) != 0 {
			t.Error("self-managed certificates, yet a cert-manager Certificate is rendered")
		}
	case "external":
		cs := o.Of("Certificate")
		if len(cs) != 1 {
			t.Fatalf("external certificates: %d cert-manager Certificates rendered, want 1", len(cs))
		}
		if got, _, _ := unstructured.NestedString(cs[0].Object, "spec", "secretName"); got != secret {
			t.Errorf("the Certificate writes Secret %q, the manager mounts %q", got, secret)
		}
		want := ns + "/" + cs[0].GetName()
		for kind, name := range names {
			if u, ok := o[Key{kind, "", name}]; ok && injection(u.GetAnnotations()) != want {
				t.Errorf("%s %s: cert-manager.io/inject-ca-from is %q, want %q", kind, name, injection(u.GetAnnotations()), want)
			}
		}
	}
}

func labelsSelector(d *appsv1.Deployment) (labels.Selector, error) {
	if d.Spec.Selector == nil || len(d.Spec.Selector.MatchLabels) == 0 {
		return nil, fmt.Errorf("no matchLabels")
	}
	return labels.SelectorFromSet(d.Spec.Selector.MatchLabels), nil
}

// diff shows two values as YAML, line by line, the lines only one of them has
// (a longest-common-subsequence diff), each with the path of keys above it.
func diff(a, b any) string {
	ay, _ := yaml.Marshal(a)
	by, _ := yaml.Marshal(b)
	al, bl := strings.Split(string(ay), "\n"), strings.Split(string(by), "\n")
	// lcs[i][j] is the length of the longest common subsequence of al[i:] and bl[j:].
	lcs := make([][]int, len(al)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(bl)+1)
	}
	for i := len(al) - 1; i >= 0; i-- {
		for j := len(bl) - 1; j >= 0; j-- {
			if al[i] == bl[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	for i, j := 0, 0; i < len(al) || j < len(bl); {
		switch {
		case i < len(al) && j < len(bl) && al[i] == bl[j]:
			i, j = i+1, j+1
		case j < len(bl) && (i == len(al) || lcs[i][j+1] >= lcs[i+1][j]):
			out = append(out, fmt.Sprintf("+ chart     %s   (under %s)", bl[j], yamlPath(bl, j)))
			j++
		default:
			out = append(out, fmt.Sprintf("- kustomize %s   (under %s)", al[i], yamlPath(al, i)))
			i++
		}
	}
	if len(out) > 40 {
		out = append(out[:40], fmt.Sprintf("... %d more lines", len(out)-40))
	}
	return strings.Join(out, "\n")
}

// yamlPath names the keys enclosing line i of a YAML document, by indentation.
func yamlPath(lines []string, i int) string {
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " -")) }
	var path []string
	for want := indent(lines[i]); i >= 0 && want > 0; i-- {
		if l := lines[i]; strings.TrimSpace(l) != "" && indent(l) < want {
			key, _, _ := strings.Cut(strings.TrimLeft(l, " -"), ":")
			path = append([]string{key}, path...)
			want = indent(l)
		}
	}
	if len(path) == 0 {
		return "/"
	}
	return strings.Join(path, ".")
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// secretMountedAt reports whether container c of the pod spec mounts Secret secret at dir.
func secretMountedAt(spec corev1.PodSpec, c corev1.Container, secret, dir string) bool {
	for _, v := range spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName != secret {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name && m.MountPath == dir {
				return true
			}
		}
	}
	return false
}
