package controller

import (
	"strings"
	"testing"
	"time"

	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/multikueue"
)

// TestDispatchedChildOfAnUnreachableWorkerIsNotTakenForDeleted: a child of a dispatched
// JobSet observed running on worker-a, which then stops answering the manager (its
// records were read before, so the manager's cache of them stays, as it last read it),
// and the JobSet ends (Kueue, with its own credentials, copies the end back). The
// records held are no news of the child: it may have completed there since, as when the
// records are not read at all (TestRunningDispatchedChildKeptWhileItsWorkerIsUnread). It
// is not taken for a child deleted before it terminated: it stays as last observed.
func TestDispatchedChildOfAnUnreachableWorkerIsNotTakenForDeleted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state multikueue.WorkerState
	}{
		{name: "worker-a not reachable", state: multikueue.WorkerState{Configured: true, Synced: true,
			UnreachableSince: testNow.Add(-time.Minute), Err: "Unauthorized"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx, c1, read, _ := followRunningChild(t)
			fx.end(t, jobsetapi.JobSetCompleted, "AllJobsCompleted")
			// The registry gives the records its cache holds, with the worker's state.
			st := fx.reconcile(t, fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": tc.state}, jobs: read.jobs}).Status
			for _, c := range st.Conditions {
				for _, lie := range []string{"never created", "deleted before", "re-run"} {
					if strings.Contains(c.Message, lie) {
						t.Errorf("%s says %q: the child may have completed on worker-a, not read", c.Type, c.Message)
					}
				}
			}
			if got := st.Targets[1]; got.UID != c1.UID || got.Deleted || st.Shards.Covered != 3 {
				t.Errorf("while worker-a is not reachable: target uid %q deleted %v, covered %d; want %s not deleted, 3", got.UID, got.Deleted, st.Shards.Covered, c1.UID)
			}
		})
	}
}
