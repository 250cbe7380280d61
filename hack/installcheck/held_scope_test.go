package installcheck

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestHeldPodScopePolicyOnLocalCluster applies the held-pod-scope ValidatingAdmissionPolicy
// of each install in turn (config/default, then the chart as release ledger in namespace
// ops; one at a time, since the API server names only one of the policies that deny a
// request) on a local control plane, and patches pods as the cluster admin, whom the
// policy binds like every other user. While a pod carries the result-capture finalizer,
// removing or changing its batchledger.dev/scope label is denied, through pods and
// pods/status, also while the pod is being deleted, and leaves the pod as it was: the
// manager watches only pods labelled scope=results, and a held pod out of its sight would
// stay Terminating with the finalizer. The same changes of a pod without the finalizer
// are allowed, and so are removing the finalizer (alone or with the label in one update),
// changing another label of a held pod, and labelling a held pod that carries no scope
// label.
//
// It needs the cluster binaries (make binaries) and is skipped with -short or without them.
func TestHeldPodScopePolicyOnLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local control plane")
	}
	root, tools := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	installs := bothInstalls(t, root, tools)

	_, cl, admin := startBareCluster(ctx, t)

	const ns = "ml-team"
	createPodNamespace(ctx, t, cl, ns)
	const keep = "example.com/keep"
	seq := 0
	// newPod creates a pod that carries the finalizer keep, and batchledger's
	// result-capture finalizer before it when held, and the scope label results when
	// scoped.
	newPod := func(t *testing.T, held, scoped bool) *corev1.Pod {
		t.Helper()
		seq++
		labels := map[string]string{"batch.kubernetes.io/job-name": "j"}
		if scoped {
			labels[v1alpha1.LabelScope] = v1alpha1.ScopeResults
		}
		finalizers := []string{keep}
		if held {
			finalizers = []string{v1alpha1.ResultFinalizer, keep}
		}
		return createIdlePod(ctx, t, admin, metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("worker-%d", seq), Labels: labels, Finalizers: finalizers})
	}
	scopeLabel := func(value string) podPatch {
		if value == "" {
			return merge(`{"metadata":{"labels":{"` + v1alpha1.LabelScope + `":null}}}`)
		}
		return merge(`{"metadata":{"labels":{"` + v1alpha1.LabelScope + `":"` + value + `"}}}`)
	}
	// removeFinalizer is PodReleaser's (and kubectl batchledger release's) patch.
	removeFinalizer := jsonPatch(
		fmt.Sprintf(`{"op":"test","path":"/metadata/finalizers/0","value":%q}`, v1alpha1.ResultFinalizer),
		`{"op":"remove","path":"/metadata/finalizers/0"}`)

	// canary's scope label is patched to a new value on each attempt (never a no-op)
	// until the policy is seen to deny it, or to allow it once the policy is deleted.
	canary := newPod(t, true, true)
	attempt := 0
	patchCanary := func(ctx context.Context) error {
		attempt++
		_, err := admin.CoreV1().Pods(ns).Patch(ctx, canary.Name, types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"canary-%d"}}}`, v1alpha1.LabelScope, attempt)), metav1.PatchOptions{})
		return err
	}

	for _, install := range []string{"kustomize", "chart"} {
		objs, policy := installs[install], policyName(installs[install], heldScopePolicy)
		var created []*corev1.ObjectReference
		for _, k := range objs.Keys() {
			if !strings.HasPrefix(k.Kind, "ValidatingAdmissionPolicy") || !strings.HasSuffix(k.Name, heldScopePolicy) {
				continue
			}
			if err := cl.Create(ctx, objs[k].DeepCopy()); err != nil {
				t.Fatalf("%s: create %s: %v", install, k, err)
			}
			created = append(created, &corev1.ObjectReference{Kind: k.Kind, Name: k.Name})
		}
		if len(created) != 2 {
			t.Fatalf("%s rendered %d held-pod-scope objects, want a policy and its binding", install, len(created))
		}
		// The API server loads new policies asynchronously.
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := patchCanary(ctx)
			return err != nil && strings.Contains(err.Error(), policy), nil
		}); err != nil {
			t.Fatalf("the %s policy %s never denied the canary's label patch: %v", install, policy, err)
		}
		waitTypeChecked(ctx, t, admin, policy)

		for _, tc := range []struct {
			name string
			// held: the pod carries the result-capture finalizer (and keep after it);
			// unscoped: it carries no scope label.
			held, unscoped bool
			// deleting: the admin deletes the pod first (the finalizers hold it).
			deleting bool
			patch    podPatch
			// subresource is the one the patch is sent to ("" is the pod itself).
			subresource string
			allowed     bool
			// wantScope is the scope label after an allowed patch ("" is none);
			// wantFinalizers the finalizers.
			wantScope      string
			wantFinalizers []string
		}{
			{name: "held: remove the scope label", held: true, patch: scopeLabel("")},
			{name: "held: change the scope label", held: true, patch: scopeLabel(v1alpha1.ScopeCoverage)},
			{name: "held: remove the scope label through pods/status", held: true, patch: scopeLabel(""), subresource: "status"},
			{name: "held, being deleted: remove the scope label", held: true, deleting: true, patch: scopeLabel("")},
			{
				name: "held: remove the scope label and another finalizer", held: true,
				patch: merge(`{"metadata":{"labels":{"` + v1alpha1.LabelScope + `":null},"finalizers":["` + v1alpha1.ResultFinalizer + `"]}}`),
			},
			{
				name: "not held: remove the scope label", patch: scopeLabel(""),
				allowed: true, wantFinalizers: []string{keep},
			},
			{
				name: "not held: change the scope label", patch: scopeLabel(v1alpha1.ScopeCoverage),
				allowed: true, wantScope: v1alpha1.ScopeCoverage, wantFinalizers: []string{keep},
			},
			{
				name: "held: remove the result-capture finalizer", held: true, patch: removeFinalizer,
				allowed: true, wantScope: v1alpha1.ScopeResults, wantFinalizers: []string{keep},
			},
			{
				name: "held, being deleted: remove the result-capture finalizer", held: true, deleting: true, patch: removeFinalizer,
				allowed: true, wantScope: v1alpha1.ScopeResults, wantFinalizers: []string{keep},
			},
			{
				name: "held: remove the result-capture finalizer and the scope label in one update", held: true,
				patch:   merge(`{"metadata":{"labels":{"` + v1alpha1.LabelScope + `":null},"finalizers":["` + keep + `"]}}`),
				allowed: true, wantFinalizers: []string{keep},
			},
			{
				name: "held: change another label", held: true, patch: merge(`{"metadata":{"labels":{"team":"ml"}}}`),
				allowed: true, wantScope: v1alpha1.ScopeResults, wantFinalizers: []string{v1alpha1.ResultFinalizer, keep},
			},
			{
				name: "held, out of scope already: label it back", held: true, unscoped: true, patch: scopeLabel(v1alpha1.ScopeResults),
				allowed: true, wantScope: v1alpha1.ScopeResults, wantFinalizers: []string{v1alpha1.ResultFinalizer, keep},
			},
		} {
			t.Run(install+"/"+tc.name, func(t *testing.T) {
				p := newPod(t, tc.held, !tc.unscoped)
				if tc.deleting {
					p = deleteHeldPod(ctx, t, admin, p)
				}
				var sub []string
				if tc.subresource != "" {
					sub = []string{tc.subresource}
				}
				got, err := admin.CoreV1().Pods(ns).Patch(ctx, p.Name, tc.patch.pt, []byte(tc.patch.body), metav1.PatchOptions{}, sub...)
				if tc.allowed {
					if err != nil {
						t.Fatalf("the admin's patch %s was refused: %v", tc.patch.body, err)
					}
					if scope := got.Labels[v1alpha1.LabelScope]; scope != tc.wantScope || !slices.Equal(got.Finalizers, tc.wantFinalizers) {
						t.Errorf("after the patch: scope label %q, finalizers %v; want %q, %v", scope, got.Finalizers, tc.wantScope, tc.wantFinalizers)
					}
					return
				}
				if err == nil {
					t.Fatalf("the admin's patch %s was allowed: %s", tc.patch.body, jsonString(got.ObjectMeta))
				}
				t.Logf("refused: %v", err)
				const want = "may not be removed or changed"
				if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policy) || !strings.Contains(err.Error(), want) ||
					!strings.Contains(err.Error(), "kubectl batchledger release") {
					t.Errorf("patch %s refused with %v; want Forbidden by %s saying %q and how to release the pod", tc.patch.body, err, policy, want)
				}
				now, err := admin.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !equality.Semantic.DeepEqual(now.Labels, p.Labels) || !slices.Equal(now.Finalizers, p.Finalizers) {
					t.Errorf("a refused patch changed the pod: %s", jsonString(now.ObjectMeta))
				}
			})
		}

		// Take this install's policy away (and see it gone) before the next one's cases.
		for _, ref := range created {
			var err error
			if ref.Kind == "ValidatingAdmissionPolicy" {
				err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, ref.Name, metav1.DeleteOptions{})
			} else {
				err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, ref.Name, metav1.DeleteOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return patchCanary(ctx) == nil, nil
		}); err != nil {
			t.Fatalf("the canary's label patch was still denied after deleting the %s policy %s: %v", install, policy, err)
		}
	}
}
