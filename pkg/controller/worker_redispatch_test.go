package controller

import (
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestRedispatchBackNeverRevivesASupersededCopy: a dispatched JobSet runs on worker-a,
// is dispatched to worker-b (whose children the account follows, worker-a's going to
// history), then back to worker-a. Until worker-a's new copy records its children, the
// only records there are the first copy's, deleted long ago: a superseded identity
// never becomes the target's again, with its old coverage counted as the current
// attempt's. Once the new copy's children are recorded, they are followed.
func TestRedispatchBackNeverRevivesASupersededCopy(t *testing.T) {
	a1 := jobSetRecords(completedChild(0, "a1-c0", testNow.Add(-3*time.Hour)), completedChild(1, "a1-c1", testNow.Add(-3*time.Hour)))
	b1 := jobSetRecords(childAt(workerChild("js", 0, 0, "0"), "b1-c0", testNow.Add(-2*time.Hour)),
		childAt(workerChild("js", 1, 0, ""), "b1-c1", testNow.Add(-2*time.Hour)))
	a2 := jobSetRecords(completedChild(0, "a2-c0", testNow.Add(-time.Hour)), completedChild(1, "a2-c1", testNow.Add(-time.Hour)))
	fx := newDispatchedJobSet(t, wrappers.MakeJobSet("js", "ns"), testNow.Add(-3*time.Hour))
	steps := []struct {
		name     string
		cluster  string
		records  map[string][]v1alpha1.WorkerJob
		wantUIDs []types.UID
		covered  int32
	}{
		{"on worker-a", "worker-a", map[string][]v1alpha1.WorkerJob{"worker-a": a1}, []types.UID{"a1-c0", "a1-c1"}, 4},
		{"dispatched to worker-b", "worker-b", map[string][]v1alpha1.WorkerJob{"worker-a": a1, "worker-b": b1}, []types.UID{"b1-c0", "b1-c1"}, 1},
		{"back on worker-a, its new copy not recorded yet", "worker-a", map[string][]v1alpha1.WorkerJob{"worker-a": a1, "worker-b": b1},
			[]types.UID{"b1-c0", "b1-c1"}, 1},
		{"worker-a's new copy recorded", "worker-a", map[string][]v1alpha1.WorkerJob{"worker-a": slices.Concat(a1, a2), "worker-b": b1},
			[]types.UID{"a2-c0", "a2-c1"}, 4},
	}
	for _, s := range steps {
		fx.updateWorkload(t, func(w *kueue.Workload) { w.Status.ClusterName = ptr.To(s.cluster) })
		st := fx.reconcile(t, fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": workerRead, "worker-b": workerRead}, jobs: s.records}).Status
		uids := targetUIDs(st)
		if !slices.Equal(uids, s.wantUIDs) || st.Shards.Covered != s.covered {
			t.Errorf("%s: identities %v covering %d shards; want %v covering %d", s.name, uids, st.Shards.Covered, s.wantUIDs, s.covered)
		}
	}
}

// TestChildWhoseRecordCameBackIsFollowed: the worker role's retention deletes a
// WorkerJob of a child that still runs (a TrainJob of more than a week), and writes it
// again on the Job's next change, under the same UID. Meanwhile the account took the
// child's absence for a restart in progress (its identity went to history). Nothing
// replaced it, in the same admission: when its record is back, it is the target's again,
// with what it completed since; a copy of an earlier admission stays superseded.
func TestChildWhoseRecordCameBackIsFollowed(t *testing.T) {
	c0 := workerChild("js", 0, 0, "0-1")
	c1 := workerChild("js", 1, 0, "0")
	cases := []struct {
		name string
		// readmitted: the Workload was evicted and admitted again (to the same worker)
		// while the record was missing: the copy that ran the child is gone.
		readmitted bool
		wantUID    types.UID
		covered    int32
	}{
		{name: "same admission: the child is followed again", wantUID: c1.UID, covered: 4},
		{name: "admitted again since: the old copy stays superseded", readmitted: true, covered: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fx := newDispatchedJobSet(t, wrappers.MakeJobSet("js", "ns"), testNow.Add(-3*time.Hour))
			reconcile := func(children ...*batchv1.Job) *v1alpha1.BatchAccount {
				t.Helper()
				return fx.reconcile(t, readWorkerA(jobSetRecords(children...)...))
			}
			reconcile(c0, c1)
			// c1's record expired
			if st := reconcile(c0).Status; st.Targets[1].UID != "" || len(st.History) != 1 {
				t.Fatalf("after the record expired: target %s, history %+v", st.Targets[1].UID, st.History)
			}
			if tc.readmitted {
				fx.updateWorkload(t, func(w *kueue.Workload) {
					for i := range w.Status.Conditions {
						w.Status.Conditions[i].LastTransitionTime = metav1.NewTime(testNow.Add(time.Minute))
					}
				})
			}
			// Written again on the Job's next change.
			st := reconcile(c0, workerChild("js", 1, 0, "0-1")).Status
			if got := st.Targets[1].UID; got != tc.wantUID || st.Shards.Covered != tc.covered {
				t.Errorf("target follows %q covering %d shards; want %q covering %d", got, st.Shards.Covered, tc.wantUID, tc.covered)
			}
		})
	}
}

// TestRedispatchToAnUnreadWorkerSupersedesTheOldCopy: a dispatched JobSet observed on
// worker-a is evicted and dispatched to worker-b, whose records are not read yet; nor
// are worker-a's. The children last observed on worker-a ran there, in a copy Kueue
// deleted: they gain no admission on worker-b, and are superseded as a re-dispatch
// supersedes them, the targets pending on worker-b. Once worker-b's copy records its
// children, they are followed. A JobSet still on worker-a keeps its children as observed.
func TestRedispatchToAnUnreadWorkerSupersedesTheOldCopy(t *testing.T) {
	a := jobSetRecords(childAt(workerChild("js", 0, 0, "0"), "a-c0", time.Time{}), childAt(workerChild("js", 1, 0, "0"), "a-c1", time.Time{}))
	b := jobSetRecords(completedChild(0, "b-c0", time.Time{}), completedChild(1, "b-c1", time.Time{}))
	for _, tc := range []struct {
		name    string
		cluster string // where the Workload runs while the workers are unread
		unread  multikueue.WorkerState
		// wantUIDs are the targets' identities while the workers are unread.
		wantUIDs []types.UID
	}{
		{name: "still on worker-a, its records not read yet", cluster: "worker-a", unread: multikueue.WorkerState{Configured: true},
			wantUIDs: []types.UID{"a-c0", "a-c1"}},
		{name: "re-dispatched to worker-b, not read yet", cluster: "worker-b", unread: multikueue.WorkerState{Configured: true},
			wantUIDs: []types.UID{"", ""}},
		{name: "re-dispatched to worker-b, no kubeconfig for it", cluster: "worker-b", unread: multikueue.WorkerState{},
			wantUIDs: []types.UID{"", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newDispatchedJobSet(t, wrappers.MakeJobSet("js", "ns"), testNow.Add(-time.Hour))
			fx.reconcile(t, readWorkerA(a...))
			fx.updateWorkload(t, func(w *kueue.Workload) { w.Status.ClusterName = ptr.To(tc.cluster) })
			st := fx.reconcile(t, fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": tc.unread, "worker-b": tc.unread}}).Status
			var uids []types.UID
			for _, ts := range st.Targets {
				uids = append(uids, ts.UID)
				for _, adm := range ts.Admissions {
					if ts.UID != "" && adm.Cluster != "worker-a" {
						t.Errorf("target %s (uid %s), which ran on worker-a, has an admission on %q", ts.Name, ts.UID, adm.Cluster)
					}
				}
			}
			if !slices.Equal(uids, tc.wantUIDs) {
				t.Errorf("identities while the workers are unread %v; want %v", uids, tc.wantUIDs)
			}
			if tc.cluster == "worker-a" {
				return
			}
			var superseded []types.UID
			for _, h := range st.History {
				superseded = append(superseded, h.UID)
			}
			if !slices.Equal(superseded, []types.UID{"a-c0", "a-c1"}) {
				t.Errorf("history %v; want worker-a's children a-c0, a-c1", superseded)
			}
			st = fx.reconcile(t, fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": workerRead, "worker-b": workerRead},
				jobs: map[string][]v1alpha1.WorkerJob{"worker-a": a, "worker-b": b}}).Status
			uids = targetUIDs(st)
			if !slices.Equal(uids, []types.UID{"b-c0", "b-c1"}) || st.Shards.Covered != 4 || len(st.History) != 2 {
				t.Errorf("once worker-b is read: identities %v covering %d, history %d; want [b-c0 b-c1] covering 4, history 2",
					uids, st.Shards.Covered, len(st.History))
			}
		})
	}
}
