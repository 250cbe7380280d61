package installcheck

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestPodPatchPolicyOnLocalCluster applies the pod-patch ValidatingAdmissionPolicy
// (pod-release-only) of both installs (config/default, and the chart as release ledger in
// namespace ops) with their RBAC on a local control plane, and patches pods as each
// manager's ServiceAccount (impersonated, so its RBAC applies): removing the result-capture
// finalizer, as pkg/controller's PodReleaser does, is allowed, also from a pod being
// deleted; every other change of a pod's spec, labels, annotations, ownerReferences or
// finalizers is denied by the policy (not by RBAC: the same ServiceAccount's allowed patch
// proves it may patch) and leaves the pod as it was. The cluster admin's patches are not
// evaluated.
//
// It needs the cluster binaries (make binaries) and is skipped with -short or without them.
func TestPodPatchPolicyOnLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local control plane")
	}
	root, tools := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	installs := bothInstalls(t, root, tools)

	c, cl, admin := startBareCluster(ctx, t)

	// The manager's identity and RBAC, and the policy, as each install creates them.
	managers := map[string]string{} // install → ServiceAccount user name
	for _, name := range []string{"kustomize", "chart"} {
		objs := installs[name]
		d := deployment(t, objs)
		managers[name] = fmt.Sprintf("system:serviceaccount:%s:%s", d.Namespace, d.Spec.Template.Spec.ServiceAccountName)
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		for _, k := range objs.Keys() {
			switch k.Kind {
			case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
				"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			default:
				continue
			}
			if isHook(objs[k]) {
				continue
			}
			// Only the pod-release-only policy: held-pod-scope denies every user's change of
			// a held pod's scope label too, and the API server names only one of the
			// policies that deny a request. TestHeldPodScopePolicyOnLocalCluster tests it.
			if strings.HasPrefix(k.Kind, "ValidatingAdmissionPolicy") && !strings.HasSuffix(k.Name, releaseOnlyPolicy) {
				continue
			}
			if err := cl.Create(ctx, objs[k].DeepCopy()); err != nil {
				t.Fatalf("%s: create %s: %v", name, k, err)
			}
		}
	}

	// The API server runs OwnerReferencesPermissionEnforcement, which refuses an owner
	// reference change by a user who may not delete the pod before any policy sees it: the
	// managers may here (not in the installs), so that the policy's own refusal is tested.
	deleters := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "policy-check-pod-deleters"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "policy-check-pod-deleters"}}
	for _, user := range managers {
		sa := strings.Split(user, ":")
		deleters.Subjects = append(deleters.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: sa[2], Name: sa[3]})
	}
	for _, obj := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "policy-check-pod-deleters"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}}}},
		deleters,
	} {
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	const ns = "ml-team"
	createPodNamespace(ctx, t, cl, ns)
	owner, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const keep = "example.com/keep"
	seq := 0
	newPod := func(t *testing.T) *corev1.Pod {
		t.Helper()
		seq++
		return createIdlePod(ctx, t, admin, metav1.ObjectMeta{
			Namespace:   ns,
			Name:        fmt.Sprintf("worker-%d", seq),
			Labels:      map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeResults, "batch.kubernetes.io/job-name": "j"},
			Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": "3"},
			Finalizers:  []string{v1alpha1.ResultFinalizer, keep},
		})
	}
	as := func(user string) kubernetes.Interface {
		cfg := rest.CopyConfig(c.RESTConfig)
		sa := strings.Split(user, ":")
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sa[2], "system:authenticated"}}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	// removeFinalizer is PodReleaser's patch: test that the finalizer is at i, remove it;
	// extra operations follow.
	removeFinalizer := func(i int, extra ...string) podPatch {
		return jsonPatch(append([]string{
			fmt.Sprintf(`{"op":"test","path":"/metadata/finalizers/%d","value":%q}`, i, v1alpha1.ResultFinalizer),
			fmt.Sprintf(`{"op":"remove","path":"/metadata/finalizers/%d"}`, i),
		}, extra...)...)
	}

	// The API server loads new policies asynchronously: wait until a canary pod's label
	// patch (a new value each time, so never a no-op) is denied for each manager before
	// the cases below rely on it.
	canary := newPod(t)
	attempt := 0
	for install, user := range managers {
		policy := policyName(installs[install], releaseOnlyPolicy)
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			attempt++
			_, err := as(user).CoreV1().Pods(ns).Patch(ctx, canary.Name, types.MergePatchType,
				[]byte(fmt.Sprintf(`{"metadata":{"labels":{"canary":"%d"}}}`, attempt)), metav1.PatchOptions{})
			return err != nil && strings.Contains(err.Error(), policy), nil
		})
		if err != nil {
			t.Fatalf("the %s policy %s never denied %s's label patch: %v", install, policy, user, err)
		}
	}

	for install := range managers {
		waitTypeChecked(ctx, t, admin, policyName(installs[install], releaseOnlyPolicy))
	}

	for _, install := range []string{"kustomize", "chart"} {
		user, policy := managers[install], policyName(installs[install], releaseOnlyPolicy)
		manager := as(user)
		for _, tc := range []struct {
			name string
			// deleting: the admin deletes the pod first (the finalizers hold it).
			deleting bool
			patch    podPatch
			allowed  bool
			// want is the message of the denying validation.
			want string
			// after is the pod's finalizers after an allowed patch.
			after []string
		}{
			{
				name:    "remove the result-capture finalizer",
				patch:   removeFinalizer(0),
				allowed: true, after: []string{keep},
			},
			{
				name:     "remove the result-capture finalizer of a pod being deleted",
				deleting: true,
				patch:    removeFinalizer(0),
				allowed:  true, after: []string{keep},
			},
			{
				name:  "remove the scope label",
				patch: merge(`{"metadata":{"labels":{"` + v1alpha1.LabelScope + `":null}}}`),
				want:  "may not change a pod's labels",
			},
			{
				name:  "add a label",
				patch: merge(`{"metadata":{"labels":{"team":"ml"}}}`),
				want:  "may not change a pod's labels",
			},
			{
				name:  "remove the result-capture finalizer and change a label",
				patch: removeFinalizer(0, `{"op":"add","path":"/metadata/labels/team","value":"ml"}`),
				want:  "may not change a pod's labels",
			},
			{
				name:  "change an annotation",
				patch: merge(`{"metadata":{"annotations":{"batch.kubernetes.io/job-completion-index":"4"}}}`),
				want:  "may not change a pod's annotations",
			},
			{
				name: "add an ownerReference",
				patch: merge(fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":%q}]}}`,
					owner.UID)),
				want: "may not change a pod's ownerReferences",
			},
			{
				name:  "change the container image",
				patch: jsonPatch(`{"op":"replace","path":"/spec/containers/0/image","value":"registry.example/worker:2"}`),
				want:  "may not change a pod's spec",
			},
			{
				name:  "remove another finalizer",
				patch: jsonPatch(`{"op":"remove","path":"/metadata/finalizers/1"}`),
				want:  "may only remove the " + v1alpha1.ResultFinalizer + " finalizer",
			},
			{
				name:  "add a finalizer",
				patch: jsonPatch(`{"op":"add","path":"/metadata/finalizers/-","value":"example.com/more"}`),
				want:  "may only remove the " + v1alpha1.ResultFinalizer + " finalizer",
			},
			{
				name:  "reorder the finalizers",
				patch: merge(`{"metadata":{"finalizers":["` + keep + `","` + v1alpha1.ResultFinalizer + `"]}}`),
				want:  "may only remove the " + v1alpha1.ResultFinalizer + " finalizer",
			},
		} {
			t.Run(install+"/"+tc.name, func(t *testing.T) {
				p := newPod(t)
				if tc.deleting {
					p = deleteHeldPod(ctx, t, admin, p)
				}
				body := tc.patch.body
				got, err := manager.CoreV1().Pods(ns).Patch(ctx, p.Name, tc.patch.pt, []byte(body), metav1.PatchOptions{})
				if tc.allowed {
					if err != nil {
						t.Fatalf("%s's patch %s was refused: %v", user, body, err)
					}
					if !slices.Equal(got.Finalizers, tc.after) {
						t.Errorf("finalizers after the patch %v, want %v", got.Finalizers, tc.after)
					}
					return
				}
				if err == nil {
					t.Fatalf("%s's patch %s was allowed", user, body)
				}
				t.Logf("refused: %v", err)
				if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policy) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("patch %s refused with %v; want Forbidden by %s saying %q", body, err, policy, tc.want)
				}
				now, err := admin.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !equality.Semantic.DeepEqual(now.Labels, p.Labels) || !slices.Equal(now.Finalizers, p.Finalizers) ||
					!equality.Semantic.DeepEqual(now.Annotations, p.Annotations) || now.Spec.Containers[0].Image != p.Spec.Containers[0].Image ||
					len(now.OwnerReferences) != 0 {
					t.Errorf("a refused patch changed the pod: %s", jsonString(now.ObjectMeta))
				}
			})
		}
	}

	t.Run("the admin's patches are not evaluated", func(t *testing.T) {
		p := newPod(t)
		got, err := admin.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"team":"ml"},"finalizers":["`+keep+`","example.com/more"]}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Labels["team"] != "ml" || !slices.Equal(got.Finalizers, []string{keep, "example.com/more"}) {
			t.Errorf("the admin's patch was not applied: %s", jsonString(got.ObjectMeta))
		}
	})
}

// podPatch is a patch request's type and body.
type podPatch struct {
	pt   types.PatchType
	body string
}

// merge is a JSON merge patch.
func merge(body string) podPatch { return podPatch{types.MergePatchType, body} }

// jsonPatch is an RFC 6902 patch of the given operations.
func jsonPatch(ops ...string) podPatch {
	return podPatch{types.JSONPatchType, "[" + strings.Join(ops, ",") + "]"}
}

// policyName is the name of a rendering's ValidatingAdmissionPolicy whose name ends in
// suffix (releaseOnlyPolicy, heldScopePolicy).
func policyName(o Objects, suffix string) string {
	for _, u := range o.Of("ValidatingAdmissionPolicy") {
		if strings.HasSuffix(u.GetName(), suffix) {
			return u.GetName()
		}
	}
	return "(no ValidatingAdmissionPolicy *" + suffix + " rendered)"
}
