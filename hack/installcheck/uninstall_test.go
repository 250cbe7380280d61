package installcheck

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestChartUninstallHook renders the chart and checks its pre-delete hook
// (uninstall.releaseHeldPods): exactly a ServiceAccount, a ClusterRole and a Role with
// their bindings, and a Job, all pre-delete hooks deleted before re-creation and once they
// succeed, the ServiceAccount and RBAC created before the Job; the Job runs the manager's
// image with `release --all-namespaces --mutating-webhook-configuration <each of this
// release's configurations that hold pods or Jobs> --stop-deployment <the manager's
// Deployment> --stop-timeout 2m` as that ServiceAccount, locked down like the manager, in
// a pod that no Service or PodDisruptionBudget of the release selects; the ServiceAccount
// may list and patch pods and Jobs, delete those configurations, and get the manager's
// Deployment and update its scale, nothing else. With uninstall.releaseHeldPods=false no
// hook is rendered.
func TestChartUninstallHook(t *testing.T) {
	root, tools := setup(t)
	chart := filepath.Join(root, "charts", "batchledger")
	for _, c := range []struct {
		name, release, namespace string
		set                      []string
		want                     bool
		// workerWebhooks is the worker role's Job webhook configuration, without the
		// release's prefix, which the hook deletes too.
		workerWebhooks string
	}{
		{name: "defaults", release: Release, namespace: Namespace, want: true},
		{name: "release ledger in namespace ops, cert-manager", release: "ledger", namespace: "ops", set: []string{"webhook.certMode=certManager"}, want: true},
		{name: "replicas=2 (a PodDisruptionBudget)", release: Release, namespace: Namespace, set: []string{"replicas=2"}, want: true},
		{name: "private registry", release: Release, namespace: Namespace, want: true,
			set: []string{"image.repository=registry.example/batchledger", "image.tag=v1.2.3", "imagePullSecrets[0].name=pull"}},
		{name: "role worker", release: "ledger", namespace: "ops", set: []string{"role=worker", "webhook.certMode=certManager"}, want: true,
			workerWebhooks: "worker-job-webhook"},
		{name: "uninstall.releaseHeldPods=false", release: Release, namespace: Namespace, set: []string{"uninstall.releaseHeldPods=false"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := mustChartAs(t, tools, chart, c.release, c.namespace, c.set...)
			var hooks []Key
			for _, k := range o.Keys() {
				if isHook(o[k]) {
					hooks = append(hooks, k)
				}
			}
			if !c.want {
				if len(hooks) != 0 {
					t.Errorf("hooks rendered: %v, want none", hooks)
				}
				return
			}
			d := deployment(t, o)
			fullname := d.Name[:len(d.Name)-len("-controller-manager")]
			name := fullname + "-release-held-pods"
			mwc := effectiveFlags(d.Spec.Template.Spec.Containers[0].Args)["mutating-webhook-configuration"]
			mwcs := []string{mwc}
			if c.workerWebhooks != "" {
				mwcs = append(mwcs, fullname+"-"+c.workerWebhooks)
			}
			for _, m := range mwcs {
				if _, ok := o[Key{"MutatingWebhookConfiguration", "", m}]; !ok {
					t.Fatalf("MutatingWebhookConfiguration %s is not rendered", m)
				}
			}
			if got := len(o.Of("MutatingWebhookConfiguration")); got != len(mwcs) {
				t.Errorf("%d MutatingWebhookConfigurations rendered, the hook deletes %d: %v", got, len(mwcs), mwcs)
			}
			want := []Key{
				{"ClusterRole", "", name},
				{"ClusterRoleBinding", "", name},
				{"Job", c.namespace, name},
				{"Role", c.namespace, name},
				{"RoleBinding", c.namespace, name},
				{"ServiceAccount", c.namespace, name},
			}
			if !slices.Equal(hooks, want) {
				t.Fatalf("hooks %v, want %v", hooks, want)
			}
			weight := map[string]int{}
			for _, k := range hooks {
				a := o[k].GetAnnotations()
				if a["helm.sh/hook"] != "pre-delete" {
					t.Errorf("%s: helm.sh/hook %q, want pre-delete", k, a["helm.sh/hook"])
				}
				if a["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" {
					t.Errorf("%s: helm.sh/hook-delete-policy %q, want before-hook-creation,hook-succeeded", k, a["helm.sh/hook-delete-policy"])
				}
				w, err := strconv.Atoi(a["helm.sh/hook-weight"])
				if err != nil {
					t.Errorf("%s: helm.sh/hook-weight %q: %v", k, a["helm.sh/hook-weight"], err)
				}
				weight[k.Kind] = w
			}
			for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
				if weight[kind] >= weight["Job"] {
					t.Errorf("%s has hook weight %d, the Job %d: it must exist before the Job runs", kind, weight[kind], weight["Job"])
				}
			}

			var job batchv1.Job
			if err := Into(o[Key{"Job", c.namespace, name}], &job); err != nil {
				t.Fatal(err)
			}
			ps := job.Spec.Template.Spec
			if len(ps.Containers) != 1 {
				t.Fatalf("the hook Job has %d containers, want 1", len(ps.Containers))
			}
			hc, mc := ps.Containers[0], d.Spec.Template.Spec.Containers[0]
			wantArgs := []string{"release", "--all-namespaces"}
			for _, m := range mwcs {
				wantArgs = append(wantArgs, "--mutating-webhook-configuration", m)
			}
			wantArgs = append(wantArgs, "--stop-deployment", c.namespace+"/"+d.Name, "--stop-timeout", "2m")
			if !slices.Equal(hc.Args, wantArgs) || len(hc.Command) != 0 {
				t.Errorf("hook command %q args %q, want the image's entrypoint with args %q", hc.Command, hc.Args, wantArgs)
			}
			for _, f := range []struct {
				what string
				a, b any
			}{
				{"image", hc.Image, mc.Image},
				{"imagePullPolicy", hc.ImagePullPolicy, mc.ImagePullPolicy},
				{"imagePullSecrets", ps.ImagePullSecrets, d.Spec.Template.Spec.ImagePullSecrets},
				{"container securityContext", hc.SecurityContext, mc.SecurityContext},
				{"pod securityContext", ps.SecurityContext, d.Spec.Template.Spec.SecurityContext},
			} {
				if !equality.Semantic.DeepEqual(f.a, f.b) {
					t.Errorf("hook %s differs from the manager's:\n%s", f.what, diff(f.b, f.a))
				}
			}
			if ps.ServiceAccountName != name {
				t.Errorf("hook runs as ServiceAccount %q, want its own %q", ps.ServiceAccountName, name)
			}
			if ps.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("hook restartPolicy %q, want Never (the Job retries)", ps.RestartPolicy)
			}
			podLabels := labels.Set(job.Spec.Template.Labels)
			for kind, path := range map[string][]string{
				"Service":             {"spec", "selector"},
				"PodDisruptionBudget": {"spec", "selector", "matchLabels"},
			} {
				for _, u := range o.Of(kind) {
					sel, _, err := unstructured.NestedStringMap(u.Object, path...)
					if err != nil || len(sel) == 0 {
						t.Errorf("%s %s: no selector at %v (%v)", kind, u.GetName(), path, err)
					}
					if labels.SelectorFromSet(sel).Matches(podLabels) {
						t.Errorf("%s %s selects the hook pod %v", kind, u.GetName(), podLabels)
					}
				}
			}
			if labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(podLabels) {
				t.Errorf("the manager Deployment's selector selects the hook pod %v", podLabels)
			}

			var b rbacv1.ClusterRoleBinding
			if err := Into(o[Key{"ClusterRoleBinding", "", name}], &b); err != nil {
				t.Fatal(err)
			}
			wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: c.namespace, Name: name}}
			if b.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}) || !equality.Semantic.DeepEqual(b.Subjects, wantSubjects) {
				t.Errorf("hook binding binds %v to %v, want ClusterRole %s to %v", b.RoleRef, b.Subjects, name, wantSubjects)
			}
			var rb rbacv1.RoleBinding
			if err := Into(o[Key{"RoleBinding", c.namespace, name}], &rb); err != nil {
				t.Fatal(err)
			}
			if rb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}) || !equality.Semantic.DeepEqual(rb.Subjects, wantSubjects) {
				t.Errorf("hook role binding binds %v to %v, want Role %s to %v", rb.RoleRef, rb.Subjects, name, wantSubjects)
			}
			sortedMWCs := slices.Sorted(slices.Values(mwcs))
			wantRules := []rbacv1.PolicyRule{
				{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, ResourceNames: sortedMWCs, Verbs: []string{"delete"}},
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "patch"}},
				{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"list", "patch"}},
			}
			if got := rules(t, o[Key{"ClusterRole", "", name}]); !equality.Semantic.DeepEqual(got, wantRules) {
				t.Errorf("hook ClusterRole rules differ:\n%s", diff(wantRules, got))
			}
			wantRoleRules := []rbacv1.PolicyRule{
				{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{d.Name}, Verbs: []string{"get"}},
				{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, ResourceNames: []string{d.Name}, Verbs: []string{"update"}},
			}
			if got := rules(t, o[Key{"Role", c.namespace, name}]); !equality.Semantic.DeepEqual(got, wantRoleRules) {
				t.Errorf("hook Role rules differ:\n%s", diff(wantRoleRules, got))
			}
			perms := grantedTo(t, o, wantSubjects[0])
			for _, r := range []struct {
				verb, group, resource, namespace, name string
				want                                   bool
			}{
				{"list", "", "pods", "ml-team", "", true},
				{"patch", "", "pods", "ml-team", "p-0", true},
				{"delete", "", "pods", "ml-team", "p-0", false},
				{"update", "", "pods", "ml-team", "p-0", false},
				{"list", "batch", "jobs", "ml-team", "", true},
				{"patch", "batch", "jobs", "ml-team", "j", true},
				{"delete", "batch", "jobs", "ml-team", "j", false},
				{"delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", mwc, true},
				{"delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "kueue-mutating-webhook-configuration", false},
				{"delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", mwc, false},
				{"update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", mwc, false},
				{"delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", fullname + "-worker-job-webhook", c.workerWebhooks != ""},
				{"get", "apps", "deployments", c.namespace, d.Name, true},
				{"update", "apps", "deployments/scale", c.namespace, d.Name, true},
				{"get", "apps", "deployments/scale", c.namespace, d.Name, false},
				{"patch", "apps", "deployments", c.namespace, d.Name, false},
				{"update", "apps", "deployments", c.namespace, d.Name, false},
				{"delete", "apps", "deployments", c.namespace, d.Name, false},
				{"list", "apps", "deployments", c.namespace, "", false},
				{"update", "apps", "deployments/scale", c.namespace, "kueue-controller-manager", false},
				{"update", "apps", "deployments/scale", "kueue-system", d.Name, false},
				{"get", "apps", "deployments", "kueue-system", d.Name, false},
			} {
				if got := perms.allows(r.verb, r.group, r.resource, r.namespace, r.name); got != r.want {
					t.Errorf("the hook may %s %s %q in namespace %q: %v, want %v", r.verb, r.resource, r.name, r.namespace, got, r.want)
				}
			}
		})
	}
}

// TestUninstallHookOnLocalCluster runs the chart's pre-delete hook for real on a local
// control plane, as release ledger in namespace ops: the hook's ServiceAccount, roles and
// bindings as rendered, and the manager binary run with exactly the hook Job's args
// under that ServiceAccount's token (as the kubelet would run the Job's pod). With pods
// held in two namespaces, the release's MutatingWebhookConfiguration in place and the
// manager's Deployment running pods (the controller manager's Deployment controller, not
// the manager image), the run exits 0 having deleted that configuration, scaled the
// Deployment to 0 with none of its pods left, and removed the result-capture finalizer,
// and only it, from every pod; a pod that never held it is untouched. So the hook's RBAC
// (pods list and patch, delete on that one configuration, get of the Deployment and update
// of its scale) is enough for the command.
//
// It needs the cluster binaries (make binaries) and is skipped with -short or without them.
func TestUninstallHookOnLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local control plane")
	}
	root, tools := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const release, ns = "ledger", "ops"
	o := mustChartAs(t, tools, filepath.Join(root, "charts", "batchledger"), release, ns)
	var job batchv1.Job
	var hookKeys []Key
	for _, k := range o.Keys() {
		if !isHook(o[k]) {
			continue
		}
		if k.Kind == "Job" {
			if err := Into(o[k], &job); err != nil {
				t.Fatal(err)
			}
			continue
		}
		hookKeys = append(hookKeys, k)
	}
	if job.Name == "" {
		t.Fatal("no hook Job rendered")
	}
	mwcName := effectiveFlags(deployment(t, o).Spec.Template.Spec.Containers[0].Args)["mutating-webhook-configuration"]

	bin, err := localcluster.BuildBatchledger(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, cl, admin := startBareCluster(ctx, t)
	for _, name := range []string{ns, "team-a", "team-b"} {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
		if err := cl.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "default"}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, k := range hookKeys {
		if err := cl.Create(ctx, o[k].DeepCopy()); err != nil {
			t.Fatalf("create %s: %v", k, err)
		}
	}

	const keep = "example.com/keep"
	pods := []struct {
		namespace, name string
		finalizers      []string
		want            []string
	}{
		{"team-a", "held", []string{v1alpha1.ResultFinalizer}, nil},
		{"team-a", "held-with-another", []string{keep, v1alpha1.ResultFinalizer}, []string{keep}},
		{"team-b", "held", []string{v1alpha1.ResultFinalizer, keep}, []string{keep}},
		{"team-b", "not-held", []string{keep}, []string{keep}},
	}
	for _, p := range pods {
		createIdlePod(ctx, t, admin, metav1.ObjectMeta{Namespace: p.namespace, Name: p.name, Finalizers: p.finalizers,
			Labels: map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeResults}})
	}
	// The pod webhook's configuration, created after the pods: nothing serves it here.
	if err := cl.Create(ctx, o[Key{"MutatingWebhookConfiguration", "", mwcName}].DeepCopy()); err != nil {
		t.Fatal(err)
	}
	// The manager's Deployment as rendered, with the ServiceAccount its pods need to be
	// admitted; the hook must stop it and wait for its pods.
	manager := deployment(t, o)
	for _, k := range []Key{{"ServiceAccount", ns, manager.Spec.Template.Spec.ServiceAccountName}, {"Deployment", ns, manager.Name}} {
		if err := cl.Create(ctx, o[k].DeepCopy()); err != nil {
			t.Fatalf("create %s: %v", k, err)
		}
	}
	managerPods := func() []corev1.Pod {
		t.Helper()
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(manager.Spec.Selector.MatchLabels)); err != nil {
			t.Fatal(err)
		}
		return pods.Items
	}
	for len(managerPods()) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the manager's Deployment never created a pod")
		}
		time.Sleep(200 * time.Millisecond)
	}

	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, job.Spec.Template.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, kubeconfig, c.RESTConfig.Host, c.CA.CertPEM, tr.Status.Token)
	// The Job's args as rendered; the kubeconfig stands in for the pod's in-cluster
	// configuration, and no second pass is needed with no API server lagging behind.
	args := append(slices.Clone(job.Spec.Template.Spec.Containers[0].Args), "--kubeconfig="+kubeconfig, "--recheck-after=0")
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.CombinedOutput()
	t.Logf("batchledger %s:\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("the hook's command failed: %v", err)
	}

	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwcName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("MutatingWebhookConfiguration %s still there: %v", mwcName, err)
	}
	got, err := admin.AppsV1().Deployments(ns).Get(ctx, manager.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := ptr.Deref(got.Spec.Replicas, 1); r != 0 {
		t.Errorf("the manager's Deployment has %d replicas after the hook, want 0", r)
	}
	if left := managerPods(); len(left) != 0 {
		t.Errorf("%d of the manager's pods left after the hook, want none", len(left))
	}
	if !strings.Contains(string(out), "the manager's pods have stopped") {
		t.Error("the hook did not wait for the manager's pods to stop")
	}
	for _, p := range pods {
		got, err := admin.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Finalizers, p.want) {
			t.Errorf("pod %s/%s: finalizers %v after the hook, want %v", p.namespace, p.name, got.Finalizers, p.want)
		}
	}
}
