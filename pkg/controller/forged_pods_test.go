package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/ledgerkey"
	"batchledger.dev/batchledger/pkg/result"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// handMadePod is what a namespace editor gets from `kubectl create -f` of a pod of their
// own (the pod webhooks take off any index-pod mark it claims, and the index-pod policy
// refuses one added later): a controller ownerReference to Job job (its UID is readable; blockOwnerDeletion
// left unset, so no jobs/finalizers right is needed), the Job's selector labels (so the
// Job controller's ClaimPods keeps it rather than releasing it), the completion-index
// annotation and the results scope label, but no batch.kubernetes.io/job-tracking
// finalizer, so the Job controller never counts its success. The pod webhook adds the
// result-capture finalizer (scope label + index annotation). It exits 0 with msg (while
// the Job is suspended the Job controller deletes it: it exits 0 in its grace period).
func handMadePod(job *batchv1.Job, name string, idx int, msg string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: job.Namespace, UID: types.UID(name + "-uid"),
			Labels: map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeResults,
				batchv1.ControllerUidLabel: string(job.UID), batchv1.JobNameLabel: job.Name},
			Annotations:     map[string]string{batchv1.JobCompletionIndexAnnotation: fmt.Sprint(idx)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}},
			Finalizers:      []string{v1alpha1.ResultFinalizer},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "attacker"}}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "worker",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg, FinishedAt: metav1.NewTime(testNow.Add(-time.Hour))}}}}},
	}
}

// runHandMadeThenReal reconciles account acct over the suspended Job j and the hand-made
// pods, then lets Job j run: its own pods complete indexes 0 and 1 with the real results,
// and the account is reconciled again. It returns the account and its chunks.
func runHandMadeThenReal(t *testing.T, forged ...*corev1.Pod) (*v1alpha1.BatchAccount, []v1alpha1.ShardResults) {
	t.Helper()
	suspended := jobJ(v1alpha1.ScopeResults).Suspend(true).Obj()
	acct := accountOfJ().RequireResults("result.valid == result.records").Obj()
	objs := []client.Object{acct, suspended}
	for _, p := range forged {
		objs = append(objs, p)
	}
	f := newFixture(t, hooks{}, objs...)
	if _, err := f.reconcile("acct"); err != nil {
		t.Fatal(err)
	}
	// Kueue admits the Job; the Job controller runs indexes 0 and 1 (same Job, same UID).
	done := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
	if err := f.c.Delete(context.Background(), suspended.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	done.ResourceVersion = ""
	if err := f.c.Create(context.Background(), done); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{
		wrappers.MakeIndexPod(done, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-2*time.Minute), report(t, "A")).Obj(),
		wrappers.MakeIndexPod(done, "j-1", 1).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), report(t, "B")).Obj(),
	} {
		if err := f.c.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.reconcile("acct"); err != nil {
		t.Fatal(err)
	}
	var chunks v1alpha1.ShardResultsList
	if err := f.c.List(context.Background(), &chunks); err != nil {
		t.Fatal(err)
	}
	return f.account(t, "acct"), chunks.Items
}

// TestHandMadePodResultDoesNotStand: the hand-made pod finishes (while the Job is
// still queued) with a result for shard B on the right revisions but the editor's own
// output and digest. The result that stands for shard B, on which the account and the
// Workload say Accepted, must be the Job's own pod's, not the hand-made one's.
func TestHandMadePodResultDoesNotStand(t *testing.T) {
	msg, err := result.Encode(result.Report{Shard: "B", InputRevision: "D", ModelRevision: "m-2026-11",
		Output: "s3://attacker/B", Digest: "sha256:forged", Records: 10, Valid: 10})
	if err != nil {
		t.Fatal(err)
	}
	suspended := jobJ(v1alpha1.ScopeResults).Obj()
	ba, chunks := runHandMadeThenReal(t, handMadePod(suspended, "evil", 1, msg))
	m := account.Compile("ns", &ba.Spec)
	standing := account.StandingResults(m, &ba.Spec, map[string]types.UID{"job/j": "j-uid"}, nil, nil, account.RecordedInOrder(chunks))
	if b := standing[1]; b.Pod == "evil" {
		t.Errorf("Accepted = %q, and shard B stands on the hand-made pod's result (output %s, digest %s); the Job's own pod j-1 is recorded as %s",
			conditionOf(ba.Status.Conditions, v1alpha1.ConditionAccepted), b.Output, b.Digest, rejectionOf(ba, "j-1"))
	}
}

// TestHandMadePodsDoNotCrowdOutTheRealResult: MaxResultsPerShard (8) hand-made pods of
// index 1, whatever they report, use up the per-identity bound before the Job's own pod
// of index 1 succeeds; its result must still be stored, not dropped (a dropped pod counts
// as recorded and is released, so its result is lost for good).
func TestHandMadePodsDoNotCrowdOutTheRealResult(t *testing.T) {
	bad, err := result.Encode(result.Report{Shard: "B", InputRevision: "D", ModelRevision: "stale-model",
		Digest: "sha256:junk", Records: 10, Valid: 10})
	if err != nil {
		t.Fatal(err)
	}
	suspended := jobJ(v1alpha1.ScopeResults).Obj()
	var forged []*corev1.Pod
	for i := range MaxResultsPerShard {
		forged = append(forged, handMadePod(suspended, fmt.Sprintf("evil-%d", i), 1, bad))
	}
	ba, chunks := runHandMadeThenReal(t, forged...)
	for _, c := range chunks {
		if slices.Contains(c.DroppedPods, types.UID("j-1-uid")) {
			t.Errorf("the Job's own pod j-1 was dropped past the per-shard bound (not stored, yet counted as recorded and released); Accepted = %q",
				conditionOf(ba.Status.Conditions, v1alpha1.ConditionAccepted))
		}
	}
}

// TestHandMadePodDoesNotTurnARejectedShardAccepted: Job j has finished; its own pod of
// index 1 reported shard B with valid < records, so the account is False ResultRejected.
// Afterwards the editor takes a bare pod of their own that already Succeeded with a
// passing result for B and, by one pod update (nothing refuses it: held-pod-scope only
// matches held pods; the Job controller no longer syncs a finished Job), gives it Job j's
// controller ownerReference, completion index 1 and the results scope label. The
// account must not turn Accepted on it.
func TestHandMadePodDoesNotTurnARejectedShardAccepted(t *testing.T) {
	j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
	acct := accountOfJ().RequireResults("result.valid == result.records").Obj()
	failing, err := result.Encode(result.Report{Shard: "B", InputRevision: "D", ModelRevision: "m-2026-11",
		Output: "s3://b/B", Digest: "sha256:B", Records: 10, Valid: 7})
	if err != nil {
		t.Fatal(err)
	}
	pod0 := wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-2*time.Minute), report(t, "A")).Obj()
	pod1 := wrappers.MakeIndexPod(j, "j-1", 1).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), failing).Obj()
	f := newFixture(t, hooks{}, acct, j, pod0, pod1)
	if _, err := f.reconcile("acct"); err != nil {
		t.Fatal(err)
	}
	if got := conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionAccepted); got != "False ResultRejected" {
		t.Fatalf("before the forgery Accepted = %q, want False ResultRejected", got)
	}
	forgedMsg, err := result.Encode(result.Report{Shard: "B", InputRevision: "D", ModelRevision: "m-2026-11",
		Output: "s3://attacker/B", Digest: "sha256:forged", Records: 10, Valid: 10})
	if err != nil {
		t.Fatal(err)
	}
	// The bare pod, as the update leaves it (a bare pod is outside the Job's selector:
	// no labels needed, the Job controller does not sync a finished Job).
	forged := handMadePod(j, "evil", 1, forgedMsg)
	delete(forged.Labels, batchv1.ControllerUidLabel)
	delete(forged.Labels, batchv1.JobNameLabel)
	forged.Finalizers = nil // it was created without the scope label: the pod webhook never held it
	if err := f.c.Create(context.Background(), forged); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reconcile("acct"); err != nil {
		t.Fatal(err)
	}
	ba := f.account(t, "acct")
	if got := conditionOf(ba.Status.Conditions, v1alpha1.ConditionAccepted); got == "True Accepted" {
		var chunks v1alpha1.ShardResultsList
		if err := f.c.List(context.Background(), &chunks); err != nil {
			t.Fatal(err)
		}
		m := account.Compile("ns", &ba.Spec)
		b := account.StandingResults(m, &ba.Spec, map[string]types.UID{"job/j": "j-uid"}, nil, nil, account.RecordedInOrder(chunks.Items))[1]
		t.Errorf("a hand-made pod turned the verdict: Accepted = %q, shard B stands on pod %s (output %s, digest %s)", got, b.Pod, b.Output, b.Digest)
	}
}

func rejectionOf(ba *v1alpha1.BatchAccount, pod string) string {
	for _, r := range ba.Status.Results.Rejections {
		if r.Pod == pod {
			return r.Reason
		}
	}
	return "not rejected"
}

// TestRelabelledJobControllerPodDoesNotStand: a pod the Job controller created for the
// editor's own Job "mine" carries its mark; the editor then points its ownerReference and
// completion index at Job j's index 1. Its mark names mine's UID and index, not j's: its
// result is not j's.
func TestRelabelledJobControllerPodDoesNotStand(t *testing.T) {
	j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
	acct := accountOfJ().RequireResults("").Obj()
	mine := wrappers.MakeJob("mine", "ns").UID("mine-uid").Indexed(2).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).Obj()
	moved := wrappers.MakeIndexPod(mine, "mine-0", 0).Succeeded(testNow.Add(-time.Minute), report(t, "B")).Obj()
	moved.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}
	moved.Annotations[batchv1.JobCompletionIndexAnnotation] = "1"
	moved.Labels[batchv1.JobNameLabel], moved.Labels[batchv1.ControllerUidLabel] = j.Name, string(j.UID)
	pod0 := wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-2*time.Minute), report(t, "A")).Obj()
	f := newFixture(t, hooks{}, acct, j, pod0, moved)
	if _, err := f.reconcile("acct"); err != nil {
		t.Fatal(err)
	}
	ba := f.account(t, "acct")
	if got := conditionOf(ba.Status.Conditions, v1alpha1.ConditionAccepted); got == "True Accepted" || ba.Status.Results.Recorded != 1 {
		t.Errorf("Accepted = %q with %d results recorded; want shard B without a result (the moved pod is mine's)", got, ba.Status.Results.Recorded)
	}
}

// TestPodsHeldBeforeMarkingAreRecorded: pods an earlier version held carry no index-pod
// mark; those created before the manager began marking (the key's IndexPodsSince) still
// report their results for as long as an earlier version may have held them
// (DefaultMaxResultHold), and an unmarked pod created since never does.
func TestPodsHeldBeforeMarkingAreRecorded(t *testing.T) {
	forged, err := result.Encode(result.Report{Shard: "B", InputRevision: "D", ModelRevision: "m-2026-11",
		Output: "s3://attacker/B", Digest: "sha256:forged", Records: 10, Valid: 10})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cutoff       time.Time
		wantRecorded int32
		wantAccepted string
	}{
		"within a day of the upgrade": {cutoff: testNow.Add(-30 * time.Minute), wantRecorded: 2, wantAccepted: "True Accepted"},
		"a day after the upgrade":     {cutoff: testNow.Add(-DefaultMaxResultHold - time.Minute), wantAccepted: "False " + v1alpha1.ReasonMissingResult},
	} {
		t.Run(name, func(t *testing.T) {
			j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
			acct := accountOfJ().RequireResults("").Obj()
			held := func(name string, idx int, shard string) *corev1.Pod {
				return wrappers.MakeIndexPod(j, name, idx).NotByJobController().Created(tc.cutoff.Add(-time.Hour)).
					Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), report(t, shard)).Obj()
			}
			since := handMadePod(j, "evil", 1, forged)
			since.CreationTimestamp = metav1.NewTime(tc.cutoff.Add(time.Minute))
			f := newFixture(t, hooks{}, acct, j, held("j-0", 0, "A"), held("j-1", 1, "B"), since)
			key, _, err := ledgerkey.Generate(testNow.Add(-48 * time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			key.IndexPodsSince = tc.cutoff
			f.ledger.key = key
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			wantVerdictWithoutPod(t, f, tc.wantAccepted, tc.wantRecorded, "evil", "the unmarked pod created after marking began")
		})
	}
}

// TestPodMadeBeforeAFreshInstallDoesNotStand: the legacy window (unmarked pods created
// before the key Secret's indexPodsSince report results for a day) is for pods an earlier
// version held. On a fresh install (the Secret created empty, no key in it) there are none:
// an editor's bare pod that exited 0 with a passing result for shard B before the install,
// then given Job j's controller ownerReference, completion index 1 and the results scope
// (nothing refuses that: the pod is unmarked and not held), must not turn j's rejected
// shard B Accepted. On an upgrade (the Secret holds the earlier version's key) the pods
// that version held still report their results within the day.
func TestPodMadeBeforeAFreshInstallDoesNotStand(t *testing.T) {
	install := testNow.Add(-30 * time.Minute)
	_, earlierKey, err := ledgerkey.Generate(install.Add(-48 * time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	passingB, err := result.Encode(result.Report{Shard: "B", InputRevision: "D", ModelRevision: "m-2026-11",
		Output: "s3://attacker/B", Digest: "sha256:forged", Records: 10, Valid: 10})
	if err != nil {
		t.Fatal(err)
	}
	failingB, err := result.Encode(result.Report{Shard: "B", InputRevision: "D", ModelRevision: "m-2026-11",
		Output: "s3://b/B", Digest: "sha256:B", Records: 10, Valid: 7})
	if err != nil {
		t.Fatal(err)
	}
	j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
	// The bare pod, created before the install and re-pointed at j's index 1 since.
	evil := handMadePod(j, "evil", 1, passingB)
	evil.CreationTimestamp = metav1.NewTime(install.Add(-time.Hour))
	for _, tc := range []struct {
		name         string
		secretData   map[string][]byte
		pods         []*corev1.Pod
		wantAccepted string
		wantRecorded int32
	}{{
		name: "fresh install: the Secret was created empty",
		pods: []*corev1.Pod{
			wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-2*time.Minute), report(t, "A")).Obj(),
			wrappers.MakeIndexPod(j, "j-1", 1).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), failingB).Obj(),
			evil,
		},
		wantAccepted: "False " + v1alpha1.ReasonResultRejected, wantRecorded: 2,
	}, {
		name:       "upgrade: the Secret holds the earlier version's key",
		secretData: map[string][]byte{ledgerkey.DataKey: earlierKey},
		pods: []*corev1.Pod{
			wrappers.MakeIndexPod(j, "j-0", 0).NotByJobController().Created(install.Add(-time.Hour)).
				Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-2*time.Minute), report(t, "A")).Obj(),
			wrappers.MakeIndexPod(j, "j-1", 1).NotByJobController().Created(install.Add(-time.Hour)).
				Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), report(t, "B")).Obj(),
		},
		wantAccepted: "True Accepted", wantRecorded: 2,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "batchledger-system", Name: ledgerkey.DefaultSecretName}, Data: tc.secretData}
			objs := []client.Object{accountOfJ().RequireResults("result.valid == result.records").Obj(), j.DeepCopy(), secret}
			for _, p := range tc.pods {
				objs = append(objs, p.DeepCopy())
			}
			f := newFixture(t, hooks{}, objs...)
			src := ledgerkey.Source{Reader: f.c, Writer: f.c, Namespace: secret.Namespace, Name: secret.Name, Now: func() time.Time { return install }}
			// The manager marks from its start on (before its webhooks serve), and loads
			// the key when it first leads.
			if _, err := src.MarkSince(context.Background()); err != nil {
				t.Fatal(err)
			}
			f.ledger.Source = src
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			wantVerdictWithoutPod(t, f, tc.wantAccepted, tc.wantRecorded, "evil", "the bare pod made before the install")
		})
	}
}

// TestUnverifiedPodsLeaveTheirResultsMissing: a Job that ran before any account followed
// it has pods batchledger did not see the Job controller create; once it terminated,
// their shards' results are missing (for a repair), not pending forever.
func TestUnverifiedPodsLeaveTheirResultsMissing(t *testing.T) {
	j := jobJ("").Completed("0-1", 2).Complete(testNow).Obj()
	acct := accountOfJ().RequireResults("").Obj()
	var objs []client.Object
	for i, shard := range []string{"A", "B"} {
		objs = append(objs, wrappers.MakeIndexPod(j, fmt.Sprintf("j-%d", i), i).NotByJobController().
			Succeeded(testNow.Add(-time.Minute), report(t, shard)).Obj())
	}
	f := newFixture(t, hooks{}, append(objs, acct, j)...)
	if _, err := f.reconcile("acct"); err != nil {
		t.Fatal(err)
	}
	ba := f.account(t, "acct")
	if got := conditionOf(ba.Status.Conditions, v1alpha1.ConditionResultsAccepted); got != "False "+v1alpha1.ReasonMissingResult || ba.Status.Results.Recorded != 0 {
		t.Errorf("ResultsAccepted = %q with %d results recorded; want False %s and none recorded", got, ba.Status.Results.Recorded, v1alpha1.ReasonMissingResult)
	}
}

// TestOrphanedPodResultRecorded: a held index pod succeeded, and its Job was deleted with
// propagationPolicy Orphan (a batch/v1 Job's default without options) before its result
// was recorded (within the capture batch, or while no manager led): the garbage collector
// took the pod's ownerReference away, and left its labels, its completion index and its
// index-pod mark, which the index-pod policy keeps. The result is still its Job's: it is
// recorded and accepted, and the pod is held until then and released after.
func TestOrphanedPodResultRecorded(t *testing.T) {
	ctx := context.Background()
	j := wrappers.MakeJob("j", "ns").Indexed(1).UID("j-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).
		Completed("0", 1).Complete(testNow.Add(-5*time.Second)).Finalizers(metav1.FinalizerOrphanDependents, v1alpha1.RecordFinalizer).
		Deleting(testNow.Add(-time.Second)).Obj()
	acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A").AssignJob("j", "0", "A").
		Revisions("D", "m").RequireResults("").Obj()
	pod := wrappers.MakeIndexPod(j, "j-0", 0).NoOwner().Finalizers(v1alpha1.ResultFinalizer).
		Succeeded(testNow.Add(-10*time.Second), reportOf(t, "A")).Obj()
	f := newFixture(t, hooks{}, acct, j, pod)
	r := &PodReleaser{Client: f.c, APIReader: f.c, Recorder: f, Now: func() time.Time { return testNow }, Ledger: &f.ledger}
	release := func() []string {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)}); err != nil {
			t.Fatal(err)
		}
		var got corev1.Pod
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
			t.Fatal(err)
		}
		return got.Finalizers
	}
	if fin := release(); !slices.Contains(fin, v1alpha1.ResultFinalizer) {
		t.Fatalf("the orphaned pod was released before its result was recorded (finalizers %v)", fin)
	}
	if _, err := f.reconcile("acct"); err != nil {
		t.Fatal(err)
	}
	recorded := slices.ContainsFunc(chunksOf(t, f.c), func(c v1alpha1.ShardResults) bool {
		return slices.ContainsFunc(c.Results, func(r v1alpha1.RecordedResult) bool { return r.PodUID == pod.UID && r.JobUID == j.UID })
	})
	if !recorded {
		t.Errorf("the orphaned pod's result was not recorded under Job %s", j.UID)
	}
	if st := f.account(t, "acct").Status; st.Shards.Accepted != 1 {
		t.Errorf("accepted %d/1 (results %+v)", st.Shards.Accepted, st.Results)
	}
	if fin := release(); slices.Contains(fin, v1alpha1.ResultFinalizer) {
		t.Errorf("the pod is still held after its result was recorded")
	}
}

// wantVerdictWithoutPod checks account acct's Accepted condition and recorded count, and
// that no chunk records the pod named pod (what, for the error).
func wantVerdictWithoutPod(t *testing.T, f *fixture, wantAccepted string, wantRecorded int32, pod, what string) {
	t.Helper()
	ba := f.account(t, "acct")
	if got := conditionOf(ba.Status.Conditions, v1alpha1.ConditionAccepted); got != wantAccepted || ba.Status.Results.Recorded != wantRecorded {
		t.Errorf("Accepted = %q with %d results recorded; want %q with %d", got, ba.Status.Results.Recorded, wantAccepted, wantRecorded)
	}
	for _, r := range account.RecordedInOrder(chunksOf(t, f.c)) {
		if r.Pod == pod {
			t.Errorf("%s was recorded: %+v", what, r)
		}
	}
}

// TestRewrittenAssignmentAnnotationsMoveNoClaim: a namespace editor may rewrite the
// annotations the pod webhook told a pod its assignment with (batchledger.dev/shard, the
// revisions, the account: nothing keeps them), before its worker reads them or after. The
// account judges a result against its own mapping and revisions, never against the pod's
// annotations: a worker that did the rewritten shard's work on the rewritten revisions is
// rejected, and one that did the assigned work stands whatever the annotations say now.
func TestRewrittenAssignmentAnnotationsMoveNoClaim(t *testing.T) {
	onOldRevisions, err := result.Encode(result.Report{Shard: "A", InputRevision: "C", ModelRevision: "m-2026-10",
		Output: "s3://b/A", Digest: "sha256:A-old", Records: 10, Valid: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		msg          string // what index 1's worker reports
		wantAccepted string
		wantB        string // the pod whose result stands for shard B ("" for none)
		wantReason   string // the rejection of index 1's pod
	}{
		{name: "the worker did what the rewritten annotations say", msg: onOldRevisions,
			wantAccepted: "False " + v1alpha1.ReasonResultRejected, wantReason: v1alpha1.RejectionForgedClaim},
		{name: "the worker did its assigned shard", msg: report(t, "B"),
			wantAccepted: "True " + v1alpha1.ReasonAccepted, wantB: "j-1", wantReason: "not rejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
			pod0 := wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-2*time.Minute), report(t, "A")).Obj()
			pod1 := wrappers.MakeIndexPod(j, "j-1", 1).Finalizers(v1alpha1.ResultFinalizer).
				Annotation(v1alpha1.AnnotationShard, "A").Annotation(v1alpha1.AnnotationInputRev, "C").
				Annotation(v1alpha1.AnnotationModelRev, "m-2026-10").Annotation(v1alpha1.AnnotationAccount, "other").
				Succeeded(testNow.Add(-time.Minute), tc.msg).Obj()
			f := newFixture(t, hooks{}, accountOfJ().RequireResults("result.valid == result.records").Obj(), j, pod0, pod1)
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			ba := f.account(t, "acct")
			m := account.Compile("ns", &ba.Spec)
			b := account.StandingResults(m, &ba.Spec, map[string]types.UID{"job/j": j.UID}, nil, nil, account.RecordedInOrder(chunksOf(t, f.c)))[1]
			if got := conditionOf(ba.Status.Conditions, v1alpha1.ConditionAccepted); got != tc.wantAccepted || b.Pod != tc.wantB || rejectionOf(ba, "j-1") != tc.wantReason {
				t.Errorf("Accepted = %q, shard B stands on pod %q, j-1 %s; want %q, %q, %s", got, b.Pod, rejectionOf(ba, "j-1"), tc.wantAccepted, tc.wantB, tc.wantReason)
			}
		})
	}
}
