package installcheck

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// workerValues select the chart's worker role: cert-manager issues its certificate (the
// worker role's RBAC writes no Secret and no webhook configuration).
var workerValues = []string{"role=worker", "webhook.certMode=certManager"}

// workerPodWebhook is the only webhook of config/default the worker role serves.
const workerPodWebhook = "mpod.batchledger.dev"

// workerInstallKinds are the kinds the chart's worker rendering may hold beyond
// config/worker's objects: the CRDs, the Deployment, its webhook Service and
// PodDisruptionBudget, the pod webhook's configuration, and cert-manager's certificate.
// Anything else (a manager role, the signing key, a manager policy) is the manager's.
var workerInstallKinds = []string{"CustomResourceDefinition", "Deployment", "Service", "PodDisruptionBudget",
	"MutatingWebhookConfiguration", "Certificate", "Issuer"}

// TestChartWorkerAgreesWithConfigWorker renders the chart with role: worker and compares
// it with config/worker (kustomize): every object config/worker renders is in the chart
// with the same rules, bindings and policy specs (so a change of config/worker not copied
// into the chart by `make generate` fails here); the chart adds only what a worker needs
// to run (workerInstallKinds), none of the manager's objects; its one webhook is
// config/default's pod webhook, identical; its CRDs are config/crd's; and its Deployment
// runs --role=worker as the ServiceAccount config/worker binds the worker role to, with
// no manager flag, locked down as the manager is.
func TestChartWorkerAgreesWithConfigWorker(t *testing.T) {
	root, tools := setup(t)
	kw, err := tools.RenderKustomize(filepath.Join(root, "config", "worker"))
	if err != nil {
		t.Fatal(err)
	}
	// config/default with cert-manager: the webhook configuration and Deployment the
	// worker's are compared with.
	dir, err := ConfigVariant(root, t.TempDir(), "\n- ../internalcert\n", "\n- ../certmanager\n")
	if err != nil {
		t.Fatal(err)
	}
	kd, err := tools.RenderKustomize(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := tools.RenderChart(filepath.Join(root, "charts", "batchledger"), workerValues...)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("objects", func(t *testing.T) {
		for _, key := range kw.Keys() {
			if _, ok := h[key]; !ok {
				t.Errorf("%s: in config/worker, not in the chart's worker rendering", key)
			}
		}
		for _, key := range h.Keys() {
			if _, ok := kw[key]; !ok && !isHook(h[key]) && !slices.Contains(workerInstallKinds, key.Kind) {
				t.Errorf("%s: in the chart's worker rendering, neither in config/worker nor what a worker runs", key)
			}
		}
	})
	t.Run("rbac", func(t *testing.T) { compareRBAC(t, kw, h) })
	t.Run("admission-policies", func(t *testing.T) { comparePolicies(t, kw, h) })
	t.Run("crds", func(t *testing.T) { compareCRDs(t, kd, h) })
	t.Run("webhooks", func(t *testing.T) { compareWorkerWebhook(t, kw, kd, h) })
	t.Run("deployment", func(t *testing.T) { checkWorkerDeployment(t, kw, kd, h) })
}

// compareWorkerWebhook: the worker rendering has two webhook configurations, both
// mutating: config/default's holding the pod webhook alone, identical to config/default's
// and injected the same way, and config/worker's Job webhook, identical to config/worker's.
func compareWorkerWebhook(t *testing.T, kw, kd, h Objects) {
	if vs := h.Of("ValidatingWebhookConfiguration"); len(vs) != 0 {
		t.Errorf("%d ValidatingWebhookConfigurations rendered for a worker, want none", len(vs))
	}
	ms := h.Of("MutatingWebhookConfiguration")
	if want := 1 + len(kw.Of("MutatingWebhookConfiguration")); len(ms) != want {
		t.Fatalf("%d MutatingWebhookConfigurations rendered for a worker, want %d", len(ms), want)
	}
	for _, m := range ms {
		ref, fromWorker := kw[Key{"MutatingWebhookConfiguration", "", m.GetName()}]
		if !fromWorker {
			var ok bool
			if ref, ok = kd[Key{"MutatingWebhookConfiguration", "", m.GetName()}]; !ok {
				t.Fatalf("neither config/worker nor config/default renders a MutatingWebhookConfiguration %s", m.GetName())
			}
		}
		got, want := webhooks(t, m), webhooks(t, ref)
		if !fromWorker {
			if names := sortedKeys(got); !slices.Equal(names, []string{workerPodWebhook}) {
				t.Errorf("%s serves webhooks %v on a worker, want only %s", m.GetName(), names, workerPodWebhook)
			}
			pod, ok := want[workerPodWebhook]
			if !ok {
				t.Fatalf("config/default has no %s", workerPodWebhook)
			}
			want = map[string]admissionregistrationv1.MutatingWebhook{workerPodWebhook: pod}
		}
		if !equality.Semantic.DeepEqual(want, got) {
			t.Errorf("%s differs from its source's:\n%s", m.GetName(), diff(want, got))
		}
		if a, b := injection(ref.GetAnnotations()), injection(m.GetAnnotations()); a != b {
			t.Errorf("%s: CA injection annotation %q (source) vs %q (worker)", m.GetName(), a, b)
		}
	}
}

// checkWorkerDeployment: the Deployment runs the worker role as config/worker's
// ServiceAccount, tells it none of the manager's names or switches, runs its pod as
// config/default runs the manager's, and is whole: its Service selects it, the webhook
// calls that Service, and the certificate cert-manager writes is mounted.
func checkWorkerDeployment(t *testing.T, kw, kd, h Objects) {
	d := deployment(t, h)
	sa := workerServiceAccount(t, kw)
	if got := d.Spec.Template.Spec.ServiceAccountName; got != sa {
		t.Errorf("the worker runs as ServiceAccount %q, config/worker binds the worker role to %q", got, sa)
	}
	c := d.Spec.Template.Spec.Containers[0]
	flags := effectiveFlags(c.Args)
	if flags["role"] != "worker" {
		t.Errorf("flags %v: want --role=worker", c.Args)
	}
	for _, manager := range []string{"multikueue-worker-results", "ledger-key-secret", "concurrent-account-syncs", "short-form-ttl"} {
		if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--"+manager) }) {
			t.Errorf("the worker is given the manager's --%s", manager)
		}
	}
	if flags["cert-management"] != "external" {
		t.Errorf("--cert-management=%s, want external (cert-manager)", flags["cert-management"])
	}
	ref := deployment(t, kd)
	rs, ws := ref.Spec.Template.Spec, d.Spec.Template.Spec
	rc := rs.Containers[0]
	for _, f := range []struct {
		what string
		a, b any
	}{
		{"pod securityContext", rs.SecurityContext, ws.SecurityContext},
		{"container securityContext", rc.SecurityContext, c.SecurityContext},
		{"volumes", rs.Volumes, ws.Volumes},
		{"volumeMounts", rc.VolumeMounts, c.VolumeMounts},
		{"image", rc.Image, c.Image},
		{"probes", []any{rc.LivenessProbe, rc.ReadinessProbe}, []any{c.LivenessProbe, c.ReadinessProbe}},
	} {
		if !equality.Semantic.DeepEqual(f.a, f.b) {
			t.Errorf("worker %s differ from the manager's (config/default):\n%s", f.what, diff(f.a, f.b))
		}
	}
	checkWorkerReferences(t, h, d, flags)
}

// workerServiceAccount is the ServiceAccount config/worker binds its worker role
// ClusterRole to.
func workerServiceAccount(t *testing.T, kw Objects) string {
	t.Helper()
	for _, u := range kw.Of("ClusterRoleBinding") {
		var b rbacv1.ClusterRoleBinding
		if err := Into(u, &b); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(b.RoleRef.Name, "worker-role") && len(b.Subjects) == 1 {
			return b.Subjects[0].Name
		}
	}
	t.Fatal("config/worker binds the worker role's ClusterRole to no single ServiceAccount")
	return ""
}

// checkWorkerReferences: the Services select the worker's pods on ports it declares, the
// webhook calls the Service it is told of, and the certificate cert-manager writes is the
// Secret mounted at --webhook-cert-dir, injected into the webhook configuration.
func checkWorkerReferences(t *testing.T, h Objects, d *appsv1.Deployment, flags map[string]string) {
	ns, c := d.Namespace, d.Spec.Template.Spec.Containers[0]
	pod := labels.Set(d.Spec.Template.Labels)
	ports := map[string]bool{}
	for _, p := range c.Ports {
		ports[p.Name] = true
	}
	for _, u := range h.Of("Service") {
		var svc corev1.Service
		if err := Into(u, &svc); err != nil {
			t.Fatal(err)
		}
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(pod) {
			t.Errorf("Service %s does not select the worker's pods", svc.Name)
		}
		for _, p := range svc.Spec.Ports {
			if !ports[p.TargetPort.StrVal] {
				t.Errorf("Service %s targets port %q, which the worker does not declare", svc.Name, p.TargetPort.String())
			}
		}
	}
	mwc, ok := h[Key{"MutatingWebhookConfiguration", "", flags["mutating-webhook-configuration"]}]
	if !ok {
		t.Fatalf("the worker is told MutatingWebhookConfiguration %s, which is not rendered", flags["mutating-webhook-configuration"])
	}
	for name, w := range webhooks(t, mwc) {
		if s := w.ClientConfig.Service; s == nil || s.Name != flags["webhook-service"] || s.Namespace != ns {
			t.Errorf("webhook %s calls %s, want Service %s/%s", name, jsonString(s), ns, flags["webhook-service"])
		}
	}
	if _, ok := h[Key{"Service", ns, flags["webhook-service"]}]; !ok {
		t.Errorf("webhook Service %s is not rendered", flags["webhook-service"])
	}
	cs := h.Of("Certificate")
	if len(cs) != 1 {
		t.Fatalf("%d cert-manager Certificates rendered, want 1", len(cs))
	}
	secret := flags["webhook-cert-secret"]
	if got, _, _ := unstructured.NestedString(cs[0].Object, "spec", "secretName"); got != secret {
		t.Errorf("the Certificate writes Secret %q, the worker is told %q", got, secret)
	}
	if want := ns + "/" + cs[0].GetName(); injection(mwc.GetAnnotations()) != want {
		t.Errorf("cert-manager.io/inject-ca-from is %q, want %q", injection(mwc.GetAnnotations()), want)
	}
	if !secretMountedAt(d.Spec.Template.Spec, c, secret, flags["webhook-cert-dir"]) {
		t.Errorf("Secret %s is not mounted at --webhook-cert-dir=%s", secret, flags["webhook-cert-dir"])
	}
}

// TestChartWorkerOtherReleaseName renders the worker role under another release name and
// namespace: every object is named after the release and in its namespace, and both
// policies exempt the worker role's ServiceAccount of that release, not config/worker's.
func TestChartWorkerOtherReleaseName(t *testing.T) {
	root, tools := setup(t)
	h := mustChartAs(t, tools, filepath.Join(root, "charts", "batchledger"), "ledger", "ops", workerValues...)
	for k := range h {
		if k.Namespace != "" && k.Namespace != "ops" {
			t.Errorf("%s is not in the release namespace", k)
		}
		if !strings.HasPrefix(k.Name, "ledger-batchledger-") && k.Kind != "CustomResourceDefinition" {
			t.Errorf("%s is not named after the release", k)
		}
	}
	want := fmt.Sprintf("request.userInfo.username != 'system:serviceaccount:ops:%s'", deployment(t, h).Spec.Template.Spec.ServiceAccountName)
	for _, suffix := range []string{"worker-results-worker-only", "worker-pod-workload", "worker-job-workload"} {
		vap := boundPolicy(t, h, suffix)
		if mcs := vap.Spec.MatchConditions; len(mcs) == 0 || mcs[0].Expression != want {
			t.Errorf("policy %s: matchConditions %s, want first %q", vap.Name, jsonString(mcs), want)
		}
	}
}

// TestChartWorkerNeedsCertManager: role: worker with self-managed certificates, or an
// unknown role, fails the rendering instead of installing a worker that cannot serve
// its webhook.
func TestChartWorkerNeedsCertManager(t *testing.T) {
	root, tools := setup(t)
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"role=worker"}, "role: worker needs webhook.certMode: certManager"},
		{[]string{"role=workers", "webhook.certMode=certManager"}, "role"},
	} {
		_, err := tools.RenderChart(filepath.Join(root, "charts", "batchledger"), tc.set...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %v: error %v, want one saying %q", tc.set, err, tc.want)
		}
	}
}
