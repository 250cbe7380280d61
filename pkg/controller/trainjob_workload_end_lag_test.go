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
				var job batchv1.Job
				job.Name, job.Namespace = tc.ended.Name, tc.ended.Namespace
				f.update(t, &job, func() { job.Status = tc.ended.Status }, true)
				var w kueue.Workload
				w.Name, w.Namespace = wl.Name, wl.Namespace
				f.update(t, &w, func() {
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
				f.showEnds(t, js, tc.jobSetEnd, tj, tc.trainJobEnd, endedAt)
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

// TestTrainJobFirstObservationWaitsForTheCaches: an account created once TrainJob tj's
// batch ended (a pipeline's, late) is first reconciled when its caches show the Workload
// finished and the JobSet and the TrainJob not ended yet. That JobSet may be the one that
// ran, or one Trainer rendered again before Kueue finished the Workload; the account
// follows nothing yet to tell them apart. Within kinds' lag bound of the finish it
// writes nothing (no verdict its TTL would act on, no event) and looks again; once the
// caches caught up it follows the child that ran. Past the bound, the caches are taken
// as they are: a JobSet rendered again, no child.
func TestTrainJobFirstObservationWaitsForTheCaches(t *testing.T) {
	rendered := newRenderedTrainJob()
	tj, js := rendered.tj, rendered.jobSet("js-uid", testNow.Add(-2*time.Hour))
	child := nodeChild(js, "child-uid").Created(testNow.Add(-2 * time.Hour))
	for _, ttl := range []bool{false, true} {
		t.Run(fmt.Sprintf("within the bound, TTL 0 %v", ttl), func(t *testing.T) {
			endedAt := testNow.Add(-2 * time.Second)
			spec := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B").Revisions("D", "m").
				AssignTrainJob("tj", "node", 0, "0-1", "0-1")
			if ttl {
				spec = spec.TTLSecondsAfterFinished(0)
			}
			wl := rendered.workload().Admitted("cq", testNow.Add(-2*time.Hour)).
				Finished(endedAt).Obj()
			f := newFixture(t, hooks{}, spec.Obj(), tj, js, child.Completed("0-1", 2).Complete(endedAt).Obj(), wl)
			res, err := f.reconcile("acct")
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != CacheLagRecheck {
				t.Errorf("RequeueAfter %v while the caches may lag, want %v", res.RequeueAfter, CacheLagRecheck)
			}
			if st := f.account(t, "acct").Status; len(st.Targets) != 0 || len(st.Conditions) != 0 {
				t.Errorf("status written while the caches may lag: %+v", st)
			}
			if w := append(f.writesOf("status-update"), f.writesOf("status-apply")...); len(w) != 0 {
				t.Errorf("writes while the caches may lag: %v", w)
			}
			if e := f.eventsOf("BatchAccount"); len(e) != 0 {
				t.Errorf("events while the caches may lag: %v", e)
			}

			f.showEnds(t, js, string(jobsetapi.JobSetCompleted), tj, trainer.TrainJobComplete, endedAt)
			for range 2 {
				if _, err := f.reconcile("acct"); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
			var ba v1alpha1.BatchAccount
			switch err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "acct"}, &ba); {
			case err == nil && !ttl:
				checkFollowedThroughTheEnd(t, f, &ba, "child-uid", "Complete", "0,1", "True Accepted", "once the caches caught up")
			case err == nil:
				t.Errorf("the account kept after its final verdict with TTL 0")
			case !apierrors.IsNotFound(err) || !ttl:
				t.Fatalf("the account once the caches caught up: %v", err)
			}
		})
	}
	t.Run("past the bound: a JobSet rendered again", func(t *testing.T) {
		endedAt := testNow.Add(-CacheLagWait)
		acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B").Revisions("D", "m").
			AssignTrainJob("tj", "node", 0, "0-1", "0-1").Obj()
		wl := rendered.workload().Admitted("cq", testNow.Add(-2*time.Hour)).
			Condition(metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue,
				Reason: kueue.WorkloadFinishedReasonFailed, LastTransitionTime: metav1.NewTime(endedAt)}).Obj()
		f := newFixture(t, hooks{}, acct, tj, js, child.Obj(), wl)
		if res, err := f.reconcile("acct"); err != nil || res.RequeueAfter == CacheLagRecheck {
			t.Fatalf("Reconcile = %+v, %v; want the caches taken as they are", res, err)
		}
		st := f.account(t, "acct").Status
		if len(st.Targets) != 1 || st.Targets[0].UID != "" {
			t.Errorf("targets %+v, want tj's child not followed (rendered again)", st.Targets)
		}
	})
}

// update writes what the fake API server shows next of o: o read back, changed by
// change, and written (its status when status is set).
func (f *fixture) update(t *testing.T, o client.Object, change func(), status bool) {
	t.Helper()
	ctx := context.Background()
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

// showEnds records, at endedAt, the end jobSetEnd on JobSet js and trainJobEnd on
// TrainJob tj, as JobSet and then Trainer record them.
func (f *fixture) showEnds(t *testing.T, js *jobsetapi.JobSet, jobSetEnd string, tj *trainer.TrainJob, trainJobEnd string, endedAt time.Time) {
	t.Helper()
	var set jobsetapi.JobSet
	set.Name, set.Namespace = js.Name, js.Namespace
	f.update(t, &set, func() {
		set.Status.Conditions = wrappers.MakeJobSet("x", "ns").Condition(jobSetEnd, endedAt).Obj().Status.Conditions
	}, false)
	var train trainer.TrainJob
	train.Name, train.Namespace = tj.Name, tj.Namespace
	f.update(t, &train, func() {
		train.Status.Conditions = wrappers.MakeTrainJob("x", "ns", "r").Condition(trainJobEnd, endedAt).Obj().Status.Conditions
	}, false)
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
