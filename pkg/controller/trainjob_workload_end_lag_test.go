package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestTrainJobWorkloadEndSeenBeforeItsJobSetEnd: TrainJob tj runs its JobSet, whose
// child node 0 the account follows (seen done, or with index 0 done); the account is
// kept, or deleted the moment its batch finishes (ttlSecondsAfterFinished: 0). The child
// ends, then the JobSet, then Trainer copies that end onto the TrainJob, and Kueue
// finishes the Workload; the controller's caches lag independently, so a reconcile may
// see the Workload finished while the JobSet and the TrainJob show no end yet. That
// JobSet is the one whose child the account follows: the account keeps following it,
// records no deletion, warns of no lost target, and gives the Workload the verdict it
// keeps once the caches caught up.
func TestTrainJobWorkloadEndSeenBeforeItsJobSetEnd(t *testing.T) {
	endedAt := testNow.Add(-time.Minute)
	rendered := newRenderedTrainJob()
	tj, js := rendered.tj, rendered.jobSet("js-uid", testNow.Add(-2*time.Hour))
	child := func() *wrappers.JobWrapper { return nodeChild(js, "child-uid").Created(testNow.Add(-2 * time.Hour)) }
	wl := rendered.workload().Admitted("cq", testNow.Add(-2*time.Hour)).Obj()
	completed := child().Completed("0-1", 2).Complete(endedAt).Obj()
	failed := child().Completed("0", 1).FailedIndexes("1").Failed("BackoffLimitExceeded", endedAt).Obj()
	cases := []struct {
		name string
		// seen is the child as the account observed it before the end; ended, as the
		// cache shows it once the Workload finished.
		seen, ended *batchv1.Job
		// jobSetEnd, trainJobEnd and finished are the end the JobSet, the TrainJob and
		// the Workload record.
		jobSetEnd, trainJobEnd, finished string
		// terminal, completed and accepted are the target's record and the verdict.
		terminal, completed, accepted string
	}{
		{"the child seen Complete", completed, completed, string(jobsetapi.JobSetCompleted), trainer.TrainJobComplete,
			kueue.WorkloadFinishedReasonSucceeded, "Complete", "0,1", "True Accepted"},
		{"the child seen running, Complete since", child().Completed("0", 1).Obj(), completed, string(jobsetapi.JobSetCompleted), trainer.TrainJobComplete,
			kueue.WorkloadFinishedReasonSucceeded, "Complete", "0,1", "True Accepted"},
		{"the child seen running, Failed since", child().Completed("0", 1).Obj(), failed, string(jobsetapi.JobSetFailed), trainer.TrainJobFailed,
			kueue.WorkloadFinishedReasonFailed, "Failed", "0", "False " + v1alpha1.ReasonShardsMissing},
	}
	for _, tc := range cases {
		for _, ttl := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, TTL 0 %v", tc.name, ttl), func(t *testing.T) {
				spec := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B").Revisions("D", "m").
					AssignTrainJob("tj", "node", 0, "0-1", "0-1")
				if ttl {
					spec = spec.TTLSecondsAfterFinished(0)
				}
				acct := spec.Obj()
				f := newFixture(t, hooks{}, acct, tj, js, tc.seen, wl)
				for range 2 {
					if _, err := f.reconcile("acct"); err != nil {
						t.Fatal(err)
					}
				}
				if got := f.account(t, "acct").Status.Targets[0]; got.UID != tc.seen.UID {
					t.Fatalf("before the end: target %q, want the child %s", got.UID, tc.seen.UID)
				}
				ctx := context.Background()
				// update writes what the cache shows next of o (read back, changed by change).
				update := func(o client.Object, change func(), status bool) {
					t.Helper()
					if err := f.c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
						t.Fatal(err)
					}
					change()
					write := func() error { return f.c.Update(ctx, o) }
					if status {
						write = func() error { return f.c.Status().Update(ctx, o) }
					}
					if err := write(); err != nil {
						t.Fatal(err)
					}
				}
				var job batchv1.Job
				job.Name, job.Namespace = tc.ended.Name, tc.ended.Namespace
				update(&job, func() { job.Status = tc.ended.Status }, true)
				var w kueue.Workload
				w.Name, w.Namespace = wl.Name, wl.Namespace
				update(&w, func() {
					apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue,
						Reason: tc.finished, LastTransitionTime: metav1.NewTime(endedAt)})
				}, true)
				f.reset()

				// The lag: the Workload is seen finished, the JobSet and the TrainJob not ended.
				if _, err := f.reconcile("acct"); err != nil {
					t.Fatal(err)
				}
				ba := f.account(t, "acct")
				checkFollowedThroughTheEnd(t, f, ba, tc.ended.UID, tc.terminal, tc.completed, tc.accepted, "while the JobSet's end is not seen")
				for _, e := range f.eventsOf("BatchAccount") {
					if strings.HasPrefix(e, "Warning") && !strings.HasSuffix(e, "NotAccepted") || strings.Contains(e, v1alpha1.ReasonTargetDeleted) {
						t.Errorf("event %q while the JobSet's end is not seen", e)
					}
				}

				// The caches caught up.
				var set jobsetapi.JobSet
				set.Name, set.Namespace = js.Name, js.Namespace
				update(&set, func() {
					set.Status.Conditions = wrappers.MakeJobSet("x", "ns").Condition(tc.jobSetEnd, endedAt).Obj().Status.Conditions
				}, false)
				var train trainer.TrainJob
				train.Name, train.Namespace = tj.Name, tj.Namespace
				update(&train, func() {
					train.Status.Conditions = wrappers.MakeTrainJob("x", "ns", "r").Condition(tc.trainJobEnd, endedAt).Obj().Status.Conditions
				}, false)
				for range 2 {
					if _, err := f.reconcile("acct"); err != nil && !apierrors.IsNotFound(err) {
						t.Fatal(err)
					}
				}
				// With TTL 0 the verdict of the end deletes the account; without, it stands.
				switch err := f.c.Get(ctx, client.ObjectKeyFromObject(acct), ba); {
				case err == nil && !ttl:
					checkFollowedThroughTheEnd(t, f, ba, tc.ended.UID, tc.terminal, tc.completed, tc.accepted, "once the caches caught up")
				case err == nil:
					t.Errorf("the account kept after its final verdict %s with TTL 0", tc.accepted)
				case !apierrors.IsNotFound(err) || !ttl:
					t.Fatalf("the account once the caches caught up: %v", err)
				}
			})
		}
	}
}

// checkFollowedThroughTheEnd fails t unless ba follows the child of uid with its record
// (terminal, completed), nothing in history, its verdict accepted ("<status> <reason>")
// and the Workload trainjob-tj-1a2b3 carrying that verdict; when says at which moment.
func checkFollowedThroughTheEnd(t *testing.T, f *fixture, ba *v1alpha1.BatchAccount, uid types.UID, terminal, completed, accepted, when string) {
	t.Helper()
	st := ba.Status
	if got := st.Targets[0]; got.UID != uid || got.Deleted || got.Terminal != terminal || got.CompletedIndexes != completed {
		t.Errorf("%s: target %s (deleted %v, terminal %q, completed %q), want the child %s (%s, completed %s)",
			when, got.UID, got.Deleted, got.Terminal, got.CompletedIndexes, uid, terminal, completed)
	}
	if len(st.History) != 0 {
		t.Errorf("%s: history %+v, want none", when, st.History)
	}
	if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != accepted {
		t.Errorf("%s: Accepted %q, want %q", when, got, accepted)
	}
	var wl kueue.Workload
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "trainjob-tj-1a2b3"}, &wl); err != nil {
		t.Fatal(err)
	}
	if got := conditionOf(wl.Status.Conditions, v1alpha1.WorkloadConditionAccepted); got != accepted {
		t.Errorf("%s: the Workload's %s %q, want the account's %q", when, v1alpha1.WorkloadConditionAccepted, got, accepted)
	}
}
