package controller

import (
	"slices"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestReadmissionToAnUnreadWorkerSupersedesTheOldCopy: a dispatched JobSet's named
// children complete on worker-a (a replicatedJob the account does not name still runs
// there); the Workload is evicted and admitted to worker-a again, whose new copy runs
// the children again, and the JobSet ends there; meanwhile worker-a's records are not
// read (the manager restarted, or cannot reach it: its cache then holds the old copy's
// records as last read). The old copy's children are gone with it: they do not stand for
// the run that ended, and the account is not Accepted on them. Once worker-a is read, the
// new copy's children are followed.
func TestReadmissionToAnUnreadWorkerSupersedesTheOldCopy(t *testing.T) {
	a1 := jobSetRecords(completedChild(0, "a1-c0", testNow.Add(-3*time.Hour)), completedChild(1, "a1-c1", testNow.Add(-3*time.Hour)))
	a2 := jobSetRecords(completedChild(0, "a2-c0", testNow.Add(-time.Hour)), completedChild(1, "a2-c1", testNow.Add(-time.Hour)))
	unreachable := multikueue.WorkerState{Configured: true, Synced: true, UnreachableSince: testNow.Add(-2 * time.Hour), Err: "Unauthorized"}
	for _, tc := range []struct {
		name string
		// evictionSeen: the account observed the eviction before the new admission.
		evictionSeen bool
		// unread is worker-a's state after the new admission, stale its records then.
		unread multikueue.WorkerState
		stale  []v1alpha1.WorkerJob
	}{
		{name: "eviction unseen, records not read yet", unread: multikueue.WorkerState{Configured: true}},
		{name: "eviction seen, records not read yet", evictionSeen: true, unread: multikueue.WorkerState{Configured: true}},
		{name: "eviction unseen, worker not reachable", unread: unreachable, stale: a1},
		{name: "eviction seen, worker not reachable", evictionSeen: true, unread: unreachable, stale: a1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newDispatchedJobSet(t, wrappers.MakeJobSet("js", "ns"), testNow.Add(-3*time.Hour))
			at := func(d time.Duration) { fx.r.Now = func() time.Time { return testNow.Add(d) } }
			at(-170 * time.Minute)
			if st := fx.reconcile(t, readWorkerA(a1...)).Status; st.Shards.Covered != 4 || conditionOf(st.Conditions, v1alpha1.ConditionAccepted) == "True Accepted" {
				t.Fatalf("on worker-a, the JobSet running: covered %d, %s; want 4, not Accepted", st.Shards.Covered, conditionOf(st.Conditions, v1alpha1.ConditionAccepted))
			}
			if tc.evictionSeen {
				fx.updateWorkload(t, func(w *kueue.Workload) {
					at := metav1.NewTime(testNow.Add(-2 * time.Hour))
					w.Status.ClusterName = nil
					apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted", LastTransitionTime: at})
					apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "NoReservation", LastTransitionTime: at})
				})
				at(-110 * time.Minute)
				fx.reconcile(t, readWorkerA(a1...))
			}
			fx.updateWorkload(t, func(w *kueue.Workload) {
				at := metav1.NewTime(testNow.Add(-90 * time.Minute))
				w.Status.ClusterName = ptr.To("worker-a")
				// Set whole: an eviction unseen leaves Admitted True, at the new time.
				for _, typ := range []string{kueue.WorkloadEvicted, kueue.WorkloadAdmitted} {
					apimeta.RemoveStatusCondition(&w.Status.Conditions, typ)
				}
				apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionFalse, Reason: "Admitted", LastTransitionTime: at})
				apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: at})
			})
			fx.end(t, jobsetapi.JobSetCompleted, "AllJobsCompleted")
			at(0)
			st := fx.reconcile(t, fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": tc.unread}, jobs: map[string][]v1alpha1.WorkerJob{"worker-a": tc.stale}}).Status
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got == "True Accepted" {
				t.Errorf("Accepted on the old copy's children while worker-a's new copy, unread, ran the JobSet that ended (covered %d)", st.Shards.Covered)
			}
			uids := targetUIDs(st)
			if slices.Contains(uids, "a1-c0") || slices.Contains(uids, "a1-c1") {
				t.Errorf("identities %v; want none of the old copy's", uids)
			}
			st = fx.reconcile(t, readWorkerA(slices.Concat(a1, a2)...)).Status
			uids = targetUIDs(st)
			if !slices.Equal(uids, []types.UID{"a2-c0", "a2-c1"}) || conditionOf(st.Conditions, v1alpha1.ConditionAccepted) != "True Accepted" {
				t.Errorf("once worker-a is read: identities %v, %s; want [a2-c0 a2-c1], Accepted", uids, conditionOf(st.Conditions, v1alpha1.ConditionAccepted))
			}
		})
	}
}
