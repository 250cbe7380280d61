package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestUnfinishedPodOfACompletedIndexStillReports: the Job controller counts an index pod
// only once the API server says it succeeded, but the manager's pod cache may show the
// Job's status before the pod's (two watches, each with its own lag; the start of a
// leader's caches). A pod of a completed index that the cache still shows unfinished
// will report its result, and is held until it is recorded: its shard's result is
// pending, not MissingResult, a verdict taken for final (retention deletes the account
// at its next reconcile, the one the pod's success wakes, and its result with it).
func TestUnfinishedPodOfACompletedIndexStillReports(t *testing.T) {
	j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow.Add(-time.Minute)).Obj()
	done := wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-2*time.Minute), reportOf(t, "A")).Obj()
	other := withUID(wrappers.MakeJob("j", "ns").Indexed(2).Obj(), "j-earlier-uid")
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string // ResultsAccepted
		// wantFinished: the batch counts as finished (retention may delete the account).
		wantFinished bool
	}{
		{name: "still running in the cache: pending",
			pod:  wrappers.MakeIndexPod(j, "j-1", 1).Finalizers(v1alpha1.ResultFinalizer).Phase(corev1.PodRunning).Obj(),
			want: "False ResultsPending"},
		{name: "still pending in the cache: pending",
			pod:  wrappers.MakeIndexPod(j, "j-1", 1).Finalizers(v1alpha1.ResultFinalizer).Phase(corev1.PodPending).Obj(),
			want: "False ResultsPending"},
		{name: "running and being deleted: pending",
			pod:  wrappers.MakeIndexPod(j, "j-1", 1).Finalizers(v1alpha1.ResultFinalizer).Phase(corev1.PodRunning).Deleting(testNow.Add(time.Minute)).Obj(),
			want: "False ResultsPending"},
		{name: "running, no longer held (released unrecorded after MaxHold): missing",
			pod:  wrappers.MakeIndexPod(j, "j-1", 1).Finalizers("example.com/keep").Phase(corev1.PodRunning).Deleting(testNow.Add(-time.Hour)).Obj(),
			want: "False MissingResult", wantFinished: true},
		{name: "failed: its result is missing",
			pod:  wrappers.MakeIndexPod(j, "j-1", 1).Phase(corev1.PodFailed).Obj(),
			want: "False MissingResult", wantFinished: true},
		{name: "running, but no pod the Job controller made: it reports nothing, missing",
			pod:  wrappers.MakeIndexPod(j, "j-1", 1).NotByJobController().Phase(corev1.PodRunning).Obj(),
			want: "False MissingResult", wantFinished: true},
		{name: "running, of an earlier Job of the name: missing",
			pod:  wrappers.MakeIndexPod(other, "j-1", 1).Finalizers(v1alpha1.ResultFinalizer).Phase(corev1.PodRunning).Obj(),
			want: "False MissingResult", wantFinished: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acct := accountOfJ().Revisions("D", "m").RequireResults("").Obj()
			f := newFixture(t, hooks{}, acct, j, done, tc.pod)
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			ba := f.account(t, "acct")
			if got := conditionOf(ba.Status.Conditions, v1alpha1.ConditionResultsAccepted); got != tc.want {
				t.Errorf("ResultsAccepted = %q, want %q", got, tc.want)
			}
			if _, finished := batchFinished(ba); finished != tc.wantFinished {
				t.Errorf("batch finished = %v, want %v", finished, tc.wantFinished)
			}
		})
	}
}
