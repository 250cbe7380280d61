package batchledger

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/repair"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// gitOpsManager is the field manager Argo CD applies with (server-side apply).
const gitOpsManager = "argocd-controller"

// accountManifest is IJ245's account as a GitOps repository holds it: no repairs.
func accountManifest(t *testing.T, namespace string) *unstructured.Unstructured {
	t.Helper()
	manifest := fmt.Sprintf(`apiVersion: batchledger.dev/v1alpha1
kind: BatchAccount
metadata:
  name: ij245
  namespace: %s
spec:
  inputRevision: D
  modelRevision: m-2026-11
  shards:
    names: [A, B, C, D]
  assignments:
  - target: {job: j}
    indexes: "0-3"
    shards: [A, B, C, D]
`, namespace)
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestRepairSurvivesGitOpsReapply: an account a GitOps tool applies (server-side, as
// Argo CD with ServerSideApply and Flux do) is repaired while the tool keeps re-applying
// its manifest: a forced server-side apply and a client-side (three-way merge) apply of
// the unchanged manifest, as self-heal does, leave spec.repairs alone, since the manifest
// never set it and the repair's own field manager owns it; a replace of the manifest is
// refused once work was done under the account; and the repair Job's shard counts.
func TestRepairSurvivesGitOpsReapply(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	job := wrappers.MakeJob("j", f.Namespace).Indexed(4).Parallelism(4).Queue("default").GPU(1).BackoffLimit(0).Obj()
	f.Create(job)
	apply := func(what string) {
		t.Helper()
		if err := f.Client.Apply(f.Ctx, client.ApplyConfigurationFromUnstructured(accountManifest(t, f.Namespace)),
			client.FieldOwner(gitOpsManager), client.ForceOwnership); err != nil {
			t.Fatalf("%s: server-side apply as %s: %v", what, gitOpsManager, err)
		}
	}
	apply("sync")

	framework.RunningPods(t, job, 4)
	for i := range 3 {
		framework.FinishIndexPod(t, job, i, 0, "")
	}
	framework.FinishIndexPod(t, job, 3, 1, "")
	framework.WaitForJobCondition(t, job, batchv1.JobFailed)
	waitAccount(t, f, "ij245", "job j Failed observed, D missing", func(ba *v1alpha1.BatchAccount) bool {
		return ba.Status.ObservedGeneration == ba.Generation && ba.Status.Shards.Missing == "D" && target(ba, "job/j") != nil && target(ba, "job/j").Terminal != ""
	})

	if out, errOut, code := plugin(t, "repair", "ij245", "-n", f.Namespace, "--dry-run=server"); code != options.ExitOK || !strings.Contains(out, "(server dry run)") {
		t.Fatalf("repair --dry-run=server: exit %d, stderr %q\n%s", code, errOut, out)
	}
	ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Name: "ij245", Namespace: f.Namespace}}
	f.Get(ba)
	if len(ba.Spec.Repairs) != 0 {
		t.Fatalf("a server dry run stored spec.repairs %+v", ba.Spec.Repairs)
	}
	if out, errOut, code := plugin(t, "repair", "ij245", "-n", f.Namespace); code != options.ExitOK {
		t.Fatalf("repair: exit %d, stderr %q\n%s", code, errOut, out)
	}
	f.Get(ba)
	want := []v1alpha1.Assignment{{Target: v1alpha1.TargetRef{Job: "j-repair-1"}, Indexes: "0", Shards: []string{"D"}}}
	if !slices.EqualFunc(ba.Spec.Repairs, want, assignmentsEqual) {
		t.Fatalf("spec.repairs after repair = %+v", ba.Spec.Repairs)
	}
	// Who owns spec.repairs decides what a GitOps apply does to it: only the repair's
	// manager, which is none of Flux's kubectl* managers it takes over.
	for _, mf := range ba.ManagedFields {
		if mf.FieldsV1 == nil || !strings.Contains(string(mf.FieldsV1.Raw), `"f:repairs"`) {
			continue
		}
		if mf.Manager != repair.FieldManager {
			t.Errorf("spec.repairs is owned by %s (%s), want %s alone", mf.Manager, mf.Operation, repair.FieldManager)
		}
	}

	// Self-heal while the repair Job runs: a forced server-side apply of the manifest...
	apply("self-heal")
	f.Get(ba)
	if !slices.EqualFunc(ba.Spec.Repairs, want, assignmentsEqual) || len(ba.Spec.Assignments) != 1 {
		t.Fatalf("after a forced server-side apply: assignments %+v, repairs %+v", ba.Spec.Assignments, ba.Spec.Repairs)
	}
	// ...and a client-side apply, kubectl's three-way JSON merge patch for a custom
	// resource (last applied: the manifest; modified: the manifest; current: the live object).
	manifest, err := accountManifest(t, f.Namespace).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("BatchAccount"))
	if err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(ba), live); err != nil {
		t.Fatal(err)
	}
	current, err := live.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonmergepatch.CreateThreeWayJSONMergePatch(manifest, manifest, current)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Client.Patch(f.Ctx, live, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("kubectl-client-side-apply")); err != nil {
		t.Fatalf("client-side apply: %v", err)
	}
	f.Get(ba)
	if !slices.EqualFunc(ba.Spec.Repairs, want, assignmentsEqual) {
		t.Fatalf("after a client-side apply (patch %s): repairs %+v", patch, ba.Spec.Repairs)
	}
	// A replace of the manifest would drop the repairs: refused once work was done under
	// the account and the repair Job observed (before, taking the entry out is allowed:
	// repair does so when it cannot create the Job).
	ba = waitAccount(t, f, "ij245", "the repair Job observed", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/j-repair-1")
		return tg != nil && tg.Found
	})
	replaced := ba.DeepCopy()
	replaced.Spec.Repairs = nil
	if err := f.Client.Update(f.Ctx, replaced); err == nil || !strings.Contains(err.Error(), "repairs are immutable once work was done") {
		t.Errorf("a replace dropping spec.repairs: %v, want it refused", err)
	}

	repair := jobStatus(t, f, "j-repair-1")
	framework.RunningPods(t, repair, 1)
	framework.FinishIndexPod(t, repair, 0, 0, "")
	waitAccountCondition(t, f, "ij245", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	ba = waitAccount(t, f, "ij245", "D covered by the repair", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 4 })
	if want := []v1alpha1.ShardCoverage{{Shard: "D", Target: "job/j-repair-1", Index: 0}}; !slices.Equal(ba.Status.Shards.CoveredBy, want) {
		t.Errorf("coveredBy = %+v, want %+v", ba.Status.Shards.CoveredBy, want)
	}
}

// assignmentsEqual compares the fields repair writes.
func assignmentsEqual(a, b v1alpha1.Assignment) bool {
	return a.Target == b.Target && a.Indexes == b.Indexes && slices.Equal(a.Shards, b.Shards) && a.ShardOrdinals == b.ShardOrdinals && a.Repair == b.Repair
}
