package controller

import (
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestDispatchedChildMadeAfterItsJobSetEndedNotFollowed: a JobSet MultiKueue dispatched
// to worker-a failed there (its child 0 ran out of retries); MultiKueue copied its Failed
// condition to the manager. A namespace editor of worker-a then made a Job of child 0's
// name, labels and controller reference, which ran to Complete, and the worker role
// recorded it, newer than the real child. A JobSet that ended creates no child: the
// record of a Job created after the end (give or take kinds.ClockSkewAllowance) is not the
// target's, which stays the real, failed child, and the batch is not Accepted.
func TestDispatchedChildMadeAfterItsJobSetEndedNotFollowed(t *testing.T) {
	ended := testNow.Add(-30 * time.Minute)
	real := wrappers.MakeJob("js-workers-0", "ns").UID("worker-c0-a0-uid").Indexed(2).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
		JobSetChild(wrappers.MakeJobSet("js", "ns").Obj(), "workers", 0, 0).Completed("0", 1).Failed("BackoffLimitExceeded", ended).Obj()
	real.CreationTimestamp = metav1.NewTime(testNow.Add(-2 * time.Hour))
	forgedAt := func(created time.Time, uid string) *batchv1.Job {
		j := workerChild("js", 0, 0, "0-1")
		j.UID, j.CreationTimestamp = types.UID(uid), metav1.NewTime(created)
		return j
	}
	c1 := workerChild("js", 1, 0, "0-1")
	c1.CreationTimestamp = metav1.NewTime(testNow.Add(-2 * time.Hour))
	for _, tc := range []struct {
		name    string
		child0  *batchv1.Job
		wantUID types.UID
	}{
		{"made 20 minutes after the JobSet failed: not followed", forgedAt(ended.Add(20*time.Minute), "forged-uid"), "worker-c0-a0-uid"},
		{"made within the clock skew allowance of the end: followed", forgedAt(ended.Add(30*time.Second), "late-uid"), "late-uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := wrappers.MakeJobSet("js", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Obj()).Obj()
			js.Status.Conditions = []metav1.Condition{{Type: string(jobsetapi.JobSetFailed), Status: metav1.ConditionTrue, Reason: "FailedJobs", LastTransitionTime: metav1.NewTime(ended)}}
			wl := dispatchedToWorkerA(js, testNow.Add(-time.Hour)).Obj()
			f := newFixture(t, hooks{}, js, wl, jobSetAccount().Obj())
			st := f.reconcileWorkers(t, f.reconciler(), readWorkerA(jobSetRecords(real, tc.child0, c1)...)).Status
			i := slices.IndexFunc(st.Targets, func(ts v1alpha1.TargetStatus) bool { return ts.Name == "jobset/js/workers/0" })
			if i < 0 || st.Targets[i].UID != tc.wantUID {
				t.Fatalf("targets = %+v; want child 0 followed as %s", st.Targets, tc.wantUID)
			}
			if accepted := apimeta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionAccepted); accepted != (tc.wantUID != "worker-c0-a0-uid") {
				t.Errorf("Accepted = %v with child 0 %s", accepted, tc.wantUID)
			}
		})
	}
}
