package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
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
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	d := multikueue.Dispatch{Workload: "jobset-js", JobSet: "js"}
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
			workers := fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
				jobs: map[string][]v1alpha1.WorkerJob{"worker-a": {*multikueue.NewJobRecord(real, d), *multikueue.NewJobRecord(tc.child0, d), *multikueue.NewJobRecord(c1, d)}}}
			js := wrappers.MakeJobSet("js", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Obj()).Obj()
			js.UID, js.Spec.ManagedBy = "js-uid", ptr.To(multikueue.ManagedBy)
			js.Status.Conditions = []metav1.Condition{{Type: string(jobsetapi.JobSetFailed), Status: metav1.ConditionTrue, Reason: "FailedJobs", LastTransitionTime: metav1.NewTime(ended)}}
			wl := wrappers.MakeWorkload("jobset-js", "ns").UID("wl-uid").ForJobSet(js).Admitted("gpu", testNow.Add(-time.Hour)).DispatchedTo("worker-a").Obj()
			acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B", "C", "D").Revisions("D", "m").
				AssignJobSet("js", "workers", 0, "0-1", "0-1").AssignJobSet("js", "workers", 1, "0-1", "2-3")
			f := newFixture(t, hooks{}, js, wl, acct.Obj())
			r := f.reconciler()
			r.WorkerResults = workers
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}); err != nil {
				t.Fatal(err)
			}
			st := f.account(t, "acct").Status
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
