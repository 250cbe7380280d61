package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestFailedTrainJobKeepsItsRecordWhenRenderedAgain: TrainJob tj failed (its JobSet
// Failed, node 0 having completed index 0), and its JobSet was deleted. Trainer v2.2
// takes the failure off the TrainJob in the reconcile that renders the JobSet again,
// writing the TrainJob's status after the JobSet: the cache may show the new JobSet and
// its child while the TrainJob still reads Failed. Kueue finished the Workload (from a
// cache that may show the failure late, after the JobSet was rendered again); the new
// child never runs. Whichever the cache shows first, the account keeps the failed run's
// child as the target's record (what it completed stays covered), and follows no child
// of the JobSet rendered after the end. When the cache shows neither the failure nor the
// Workload's finish, the new child is taken for no run's only once that finish is seen:
// until then (within CacheLagWait of the JobSet's creation) the account writes nothing.
func TestFailedTrainJobKeepsItsRecordWhenRenderedAgain(t *testing.T) {
	failedAt := testNow.Add(-time.Minute)
	rendered := newRenderedTrainJob()
	tj := rendered.tj
	failed := tj.DeepCopy()
	failed.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: "FailedJobs", LastTransitionTime: metav1.NewTime(failedAt)}}
	ran := rendered.jobSet("js-ran", testNow.Add(-2*time.Hour))
	ran.Status.Conditions = []metav1.Condition{{Type: string(jobsetapi.JobSetFailed), Status: metav1.ConditionTrue, Reason: "FailedJobs", LastTransitionTime: metav1.NewTime(failedAt)}}
	ranChild := nodeChild(ran, "child-ran").Created(testNow.Add(-2*time.Hour)).Completed("0", 1).Failed("BackoffLimitExceeded", failedAt).Obj()
	again := rendered.jobSet("js-again", testNow.Add(-6*time.Second))
	againChild := nodeChild(again, "child-again").Created(testNow.Add(-5 * time.Second)).Obj()
	finishedWL := rendered.workload().
		Condition(metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: kueue.WorkloadFinishedReasonFailed, LastTransitionTime: metav1.NewTime(failedAt)}).Obj()
	// Kueue finishes the Workload from the TrainJob its cache shows: read Failed late, its
	// finish may come after Trainer took the failure off and rendered the JobSet again.
	finishedLate := finishedWL.DeepCopy()
	finishedLate.Status.Conditions[0].LastTransitionTime = metav1.NewTime(testNow.Add(-2 * time.Second))
	cases := []struct {
		name string
		// then is what the cache shows once the failed JobSet is gone and Trainer
		// rendered it again; later, what it shows next.
		then, later []client.Object
	}{
		{name: "the TrainJob still shows the failure", then: []client.Object{failed, again, againChild, finishedWL}},
		{name: "the TrainJob still shows the failure, its Workload not seen finished yet", then: []client.Object{failed, again, againChild}},
		{name: "the failure taken off, the Workload finished", then: []client.Object{tj, again, againChild, finishedWL}},
		{name: "the failure taken off, the Workload finished after the JobSet was rendered again", then: []client.Object{tj, again, againChild, finishedLate}},
		{name: "the failure taken off, the Workload not seen finished yet", then: []client.Object{tj, again, againChild}, later: []client.Object{finishedLate}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B").Revisions("D", "m").
				AssignTrainJob("tj", "node", 0, "0-1", "0-1").Obj()
			f := newFixture(t, hooks{}, acct, failed, ran, ranChild)
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			if got := f.account(t, "acct").Status.Targets[0]; got.UID != ranChild.UID || got.Terminal != "Failed" {
				t.Fatalf("first: target %s terminal %q, want the failed run's child", got.UID, got.Terminal)
			}
			ctx := context.Background()
			for _, o := range []client.Object{ranChild, ran, failed} {
				if err := f.c.Delete(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			for _, shown := range [][]client.Object{tc.then, tc.later} {
				for _, o := range shown {
					o = o.DeepCopyObject().(client.Object)
					o.SetResourceVersion("")
					if err := f.c.Create(ctx, o); err != nil {
						t.Fatal(err)
					}
				}
				for range 2 {
					if _, err := f.reconcile("acct"); err != nil {
						t.Fatal(err)
					}
				}
				st := f.account(t, "acct").Status
				got := st.Targets[0]
				if got.UID != ranChild.UID || got.CompletedIndexes != "0" || got.Terminal != "Failed" {
					t.Errorf("target %s (completed %q, terminal %q), want the failed run's record %s (completed 0, Failed)", got.UID, got.CompletedIndexes, got.Terminal, ranChild.UID)
				}
				if len(st.History) != 0 {
					t.Errorf("history %+v, want none: the JobSet rendered after the end ran nothing of the batch", st.History)
				}
				if st.Shards.Covered != 1 {
					t.Errorf("%d shards covered, want 1 (A, by the failed run's index 0)", st.Shards.Covered)
				}
			}
		})
	}
}

// TestRunningTrainJobFollowsItsJobSetMadeAgain: the JobSet of running TrainJob tj is
// deleted (by a user) while its Workload stays admitted, and Trainer renders it again: its
// new child is the target's next identity, the one that ran superseded. The cache shows
// the TrainJob and its Workload as after a failure Trainer took off before Kueue's finish
// was seen, so the account writes nothing for CacheLagWait after the new JobSet was made;
// then it follows the new child. So too when the new child carries no scope label (the
// scope webhook failed open), and the cache does not hold it: read from the API server,
// it waits as long.
func TestRunningTrainJobFollowsItsJobSetMadeAgain(t *testing.T) {
	rendered := newRenderedTrainJob()
	tj := rendered.tj
	ran := rendered.jobSet("js-ran", testNow.Add(-2*time.Hour))
	ranChild := nodeChild(ran, "child-ran").Created(testNow.Add(-2*time.Hour)).Completed("0", 1).Obj()
	wl := rendered.workload().Admitted("cq", testNow.Add(-2*time.Hour)).Obj()
	for _, tc := range []struct {
		name string
		// made is how long before now the new JobSet was made.
		made time.Duration
		// wantUID is the child the account follows; wantHistory whether the one that
		// ran is in its history.
		wantUID     string
		wantHistory bool
	}{
		{name: "within the bound: nothing written", made: 6 * time.Second, wantUID: "child-ran"},
		{name: "past the bound: the new child", made: CacheLagWait, wantUID: "child-again", wantHistory: true},
	} {
		for _, unlabelled := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, the new child unlabelled %v", tc.name, unlabelled), func(t *testing.T) {
				acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B").Revisions("D", "m").
					AssignTrainJob("tj", "node", 0, "0-1", "0-1").Obj()
				f := newFixture(t, hooks{}, acct, tj, ran, ranChild, wl)
				r := f.cachedReconciler()
				reconcile := func() ctrl.Result {
					t.Helper()
					res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}})
					if err != nil {
						t.Fatal(err)
					}
					return res
				}
				reconcile()
				if got := f.account(t, "acct").Status.Targets[0]; got.UID != ranChild.UID {
					t.Fatalf("first: target %s, want the running child %s", got.UID, ranChild.UID)
				}
				ctx := context.Background()
				for _, o := range []client.Object{ranChild, ran} {
					if err := f.c.Delete(ctx, o); err != nil {
						t.Fatal(err)
					}
				}
				again := rendered.jobSet("js-again", testNow.Add(-tc.made))
				againChild := nodeChild(again, "child-again").Created(testNow.Add(-tc.made)).Obj()
				if unlabelled {
					delete(againChild.Labels, v1alpha1.LabelScope)
				}
				for _, o := range []client.Object{again, againChild} {
					if err := f.c.Create(ctx, o); err != nil {
						t.Fatal(err)
					}
				}
				f.reset()
				res := reconcile()
				written := f.writesOf("status-update")
				if waits := res.RequeueAfter == CacheLagRecheck && len(written) == 0; waits != !tc.wantHistory {
					t.Errorf("RequeueAfter %v, status writes %v; want waiting for the caches %v", res.RequeueAfter, written, !tc.wantHistory)
				}
				st := f.account(t, "acct").Status
				if got := st.Targets[0].UID; string(got) != tc.wantUID {
					t.Errorf("target %s, want %s", got, tc.wantUID)
				}
				if got := len(st.History) == 1 && st.History[0].UID == ranChild.UID; got != tc.wantHistory {
					t.Errorf("history %+v, want the child that ran in it: %v", st.History, tc.wantHistory)
				}
			})
		}
	}
}
