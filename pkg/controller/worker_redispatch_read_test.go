package controller

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestRedispatchFromAReadWorkerToAnUnreadOneWaits: a dispatched JobSet's named children
// complete on worker-a (a replicatedJob the account does not name still runs there), the
// Workload is evicted and dispatched to worker-b, whose records are not read (no
// kubeconfig, not read yet, not reachable), and the JobSet ends there (Kueue copies its
// end back). worker-a's records are still read: they are of the copy Kueue deleted, whose
// children worker-b's copy ran again. The targets wait on worker-b, as when worker-a is
// not read either (TestRedispatchToAnUnreadWorkerSupersedesTheOldCopy): worker-a's
// children do not stand for the run that ended, and the account is not Accepted on them.
func TestRedispatchFromAReadWorkerToAnUnreadOneWaits(t *testing.T) {
	a := jobSetRecords(completedChild(0, "a-c0", time.Time{}), completedChild(1, "a-c1", time.Time{}))
	for _, tc := range []struct {
		name string
		b    multikueue.WorkerState
		// aUnread: worker-a's records are not read either after the re-dispatch.
		aUnread bool
	}{
		{name: "neither worker read", b: multikueue.WorkerState{Configured: true}, aUnread: true},
		{name: "no kubeconfig for worker-b", b: multikueue.WorkerState{}},
		{name: "worker-b not read yet", b: multikueue.WorkerState{Configured: true}},
		{name: "worker-b not reachable", b: multikueue.WorkerState{Configured: true, Synced: true, UnreachableSince: testNow.Add(-time.Minute), Err: "connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newDispatchedJobSet(t, wrappers.MakeJobSet("js", "ns"), testNow.Add(-time.Hour))
			workers := readWorkerA(a...)
			if st := fx.reconcile(t, workers).Status; st.Shards.Covered != 4 || conditionOf(st.Conditions, v1alpha1.ConditionAccepted) == "True Accepted" {
				t.Fatalf("on worker-a, the JobSet running: covered %d, %s; want 4, not Accepted", st.Shards.Covered, conditionOf(st.Conditions, v1alpha1.ConditionAccepted))
			}
			fx.updateWorkload(t, func(w *kueue.Workload) { w.Status.ClusterName = ptr.To("worker-b") })
			fx.end(t, jobsetapi.JobSetCompleted, "AllJobsCompleted")
			workers.states["worker-b"] = tc.b
			if tc.aUnread {
				workers = fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": tc.b, "worker-b": tc.b}}
			}
			st := fx.reconcile(t, workers).Status
			uids := targetUIDs(st)
			if !slices.Equal(uids, []types.UID{"", ""}) {
				t.Errorf("identities on worker-b, unread, %v; want none: worker-a's copy is gone", uids)
			}
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got == "True Accepted" {
				t.Errorf("Accepted on worker-a's children while the JobSet ran again and ended on worker-b, unread (covered %d)", st.Shards.Covered)
			}
			// Once worker-b is read, its children are the targets'.
			b := jobSetRecords(completedChild(0, "b-c0", time.Time{}), completedChild(1, "b-c1", time.Time{}))
			st = fx.reconcile(t, fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": workerRead, "worker-b": workerRead},
				jobs: map[string][]v1alpha1.WorkerJob{"worker-a": a, "worker-b": b}}).Status
			uids = targetUIDs(st)
			if !slices.Equal(uids, []types.UID{"b-c0", "b-c1"}) || st.Shards.Covered != 4 || len(st.History) != 2 ||
				conditionOf(st.Conditions, v1alpha1.ConditionAccepted) != "True Accepted" {
				t.Errorf("once worker-b is read: identities %v covering %d, history %d, %s; want [b-c0 b-c1] covering 4, history 2, Accepted",
					uids, st.Shards.Covered, len(st.History), conditionOf(st.Conditions, v1alpha1.ConditionAccepted))
			}
		})
	}
}
