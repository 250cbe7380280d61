package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestRunningDispatchedChildKeptWhileItsWorkerIsUnread: a child of a dispatched JobSet
// observed running on worker-a, whose records then cannot be read for a while (the
// manager restarted and has not read them yet, or the worker's kubeconfig Secret was
// deleted), was not superseded: no restart gave it a successor. Its identity stays the
// target's, with its coverage and admissions, and no history entry is made of it; once
// the records are read again nothing changed.
func TestRunningDispatchedChildKeptWhileItsWorkerIsUnread(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state multikueue.WorkerState
		// ended: the JobSet ended (Kueue copied its end back) while worker-a was unread;
		// the child may have completed there meanwhile.
		ended bool
	}{
		{name: "manager restarted, worker-a's records not read yet", state: multikueue.WorkerState{Configured: true}},
		{name: "worker-a's kubeconfig Secret deleted", state: multikueue.WorkerState{}},
		{name: "worker-a's records not read yet, the JobSet ended meanwhile", state: multikueue.WorkerState{Configured: true}, ended: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx, c1, read, before := followRunningChild(t)
			if tc.ended {
				fx.end(t, jobsetapi.JobSetCompleted, "AllJobsCompleted")
			}
			unread := fx.reconcile(t, fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": tc.state}}).Status
			for _, c := range unread.Conditions {
				for _, lie := range []string{"never created", "deleted before", "re-run"} {
					if strings.Contains(c.Message, lie) {
						t.Errorf("%s says %q: the child runs on worker-a", c.Type, c.Message)
					}
				}
			}
			if len(unread.History) != 0 {
				t.Errorf("history while worker-a is unread = %+v; want none: nothing superseded the child", unread.History)
			}
			if got := unread.Targets[1]; got.UID != c1.UID || unread.Shards.Covered != 3 {
				t.Errorf("while worker-a is unread: target uid %q, covered %d; want %s, 3", got.UID, unread.Shards.Covered, c1.UID)
			}
			if tc.ended {
				return // read again, the record says what became of the child
			}
			after := fx.reconcile(t, read).Status
			if len(after.History) != 0 {
				t.Errorf("history once worker-a is read again = %+v; want none", after.History)
			}
			for i := range before.Targets {
				if !equality.Semantic.DeepEqual(after.Targets[i], before.Targets[i]) {
					t.Errorf("target %s once worker-a is read again differs from before:\n got %+v %+v\nwant %+v %+v", before.Targets[i].Name,
						after.Targets[i], after.Targets[i].Workload, before.Targets[i], before.Targets[i].Workload)
				}
			}
		})
	}
}

// TestDispatchedChildKeepsItsIndexListsWhileItsWorkerIsUnread: a child of a dispatched
// JobSet that failed an index on worker-a stands, while worker-a's records are not read,
// as the status last observed it, also when that status left its failed indexes out for
// size (the worker's record holds them, the status does not): they stay left out, and
// do not read as none.
func TestDispatchedChildKeepsItsIndexListsWhileItsWorkerIsUnread(t *testing.T) {
	c1 := wrappers.MakeJob("js-workers-1", "ns").UID("worker-c1-a0-uid").Indexed(2).BackoffLimitPerIndex(0).
		PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).JobSetChild(wrappers.MakeJobSet("js", "ns").Obj(), "workers", 1, 0).
		Completed("0", 1).FailedIndexes("1").Failed("FailedIndexes", testNow.Add(-time.Minute)).Obj()
	for _, tc := range []struct {
		name string
		// omit, when set, leaves these index lists of the child out of the status, as
		// the status size budget does.
		omit []string
	}{
		{name: "index lists in the status"},
		{name: "failed indexes left out for size", omit: []string{"failedIndexes"}},
		{name: "failed and repeated indexes left out for size", omit: []string{"repeatedIndexes", "failedIndexes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newDispatchedJobSet(t, wrappers.MakeJobSet("js", "ns"), testNow.Add(-time.Hour))
			ba := fx.reconcile(t, readWorkerA(jobSetRecords(workerChild("js", 0, 0, "0-1"), c1)...))
			if got := ba.Status.Targets[1]; got.UID != c1.UID || got.FailedIndexes != "1" {
				t.Fatalf("read: target %s uid %s failed %q; want %s, 1", got.Name, got.UID, got.FailedIndexes, c1.UID)
			}
			if tc.omit != nil {
				tg := &ba.Status.Targets[1]
				tg.FailedIndexes, tg.RepeatedIndexes, tg.IndexesOmitted = "", "", tc.omit
				if err := fx.f.c.Status().Update(context.Background(), ba); err != nil {
					t.Fatal(err)
				}
			}
			before := fx.f.account(t, "acct").Status.Targets[1]
			unread := fx.reconcile(t, fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": {Configured: true}}}).Status
			if got := unread.Targets[1]; !equality.Semantic.DeepEqual(got, before) {
				t.Errorf("while worker-a is unread the target differs from its status before:\n got failed %q omitted %v: %+v\nwant failed %q omitted %v: %+v",
					got.FailedIndexes, got.IndexesOmitted, got, before.FailedIndexes, before.IndexesOmitted, before)
			}
		})
	}
}
