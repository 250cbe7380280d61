package controller

import (
	"context"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestRetainedWorkloadDeletedResultsStillRead: a Job, JobSet or TrainJob dispatched to
// worker-a completes there; the account records its end before worker-a's records of its
// results are read, and Kueue's retention (objectRetentionPolicies.workloads.afterFinished)
// deletes the finished Workload while the owner stays. The results worker-a holds are
// still the identity's, read from its admission on record, and the account is Accepted;
// while worker-a does not answer they are pending, never MissingResult. An admission on
// record from before the owner was created is a predecessor's of the same name, and an
// owner that has not finished (created again, its own Workload still to come) ran
// nothing yet: a dispatched owner's children are read from neither.
func TestRetainedWorkloadDeletedResultsStillRead(t *testing.T) {
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	for _, tc := range []struct {
		name string
		kind string
		// created is when the owner was created (two hours before testNow when zero); the
		// account first sees the Workload admitted at testNow, the Workload's deletion an
		// hour later.
		created time.Time
		// running: the JobSet has not finished when its Workload is gone.
		running bool
		// unreachable: worker-a does not answer once the Workload is gone.
		unreachable  bool
		wantAccepted string
		wantResults  int32
	}{
		{name: "Job", kind: "Job", wantAccepted: "True Accepted", wantResults: 2},
		{name: "JobSet", kind: "JobSet", wantAccepted: "True Accepted", wantResults: 2},
		{name: "TrainJob", kind: "TrainJob", wantAccepted: "True Accepted", wantResults: 2},
		{name: "JobSet, worker-a not reachable: pending", kind: "JobSet", unreachable: true, wantAccepted: "False ResultsPending"},
		{name: "Job, worker-a not reachable: pending", kind: "Job", unreachable: true, wantAccepted: "False ResultsPending"},
		{name: "JobSet not finished (created again, its Workload to come): its predecessor's children not read", kind: "JobSet", running: true,
			wantAccepted: "False AwaitingTermination"},
		{name: "JobSet created after the admission on record: not its", kind: "JobSet", created: testNow.Add(2 * time.Minute),
			wantAccepted: "False MissingResult"},
		// The admission's time is batchledger's clock, the creation the API server's.
		{name: "JobSet created by a clock ahead of batchledger's: the admission is its", kind: "JobSet", created: testNow.Add(30 * time.Second),
			wantAccepted: "True Accepted", wantResults: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B").Revisions("D", "m").RequireResults("")
			var owner client.Object
			var wl *kueue.Workload
			var before, after fakeWorkers
			switch tc.kind {
			case "Job":
				job := jobJ(v1alpha1.ScopeResults).ManagedBy(multikueue.ManagedBy).Completed("0-1", 2).Complete(testNow).Obj()
				wl = workloadOfJ(job).DispatchedTo("worker-a").Obj()
				acct = acct.AssignJob("j", "0-1", "A", "B")
				owner = job
				before = fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok}}
				after = fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
					records: map[string][]v1alpha1.WorkerResult{"worker-a": {workerRecord("job-j", 0, reportOf(t, "A")), workerRecord("job-j", 1, reportOf(t, "B"))}}}
			default:
				var d multikueue.Dispatch
				owner, wl, d, acct = dispatchedOwner(tc.kind == "TrainJob", tc.running, acct)
				child := workerChild(d.JobSet, 0, 0, "0-1")
				jobs := map[string][]v1alpha1.WorkerJob{"worker-a": {*multikueue.NewJobRecord(child, d)}}
				before = fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok}, jobs: jobs}
				after = fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok}, jobs: jobs,
					records: map[string][]v1alpha1.WorkerResult{"worker-a": childResults(t, child, d.Workload, "A", "B")}}
			}
			created := tc.created
			if created.IsZero() {
				created = testNow.Add(-2 * time.Hour)
			}
			owner.SetCreationTimestamp(metav1.NewTime(created))
			if tc.unreachable {
				after = fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": {Configured: true, Synced: true,
					UnreachableSince: testNow.Add(-time.Minute), Err: "connection refused"}}}
			}
			f := newFixture(t, hooks{}, owner, wl, acct.Obj())
			r := f.reconciler()
			reconcile := func(w fakeWorkers) v1alpha1.BatchAccountStatus {
				t.Helper()
				r.WorkerResults = w
				if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}); err != nil {
					t.Fatal(err)
				}
				return f.account(t, "acct").Status
			}
			if st := reconcile(before); len(st.Targets) != 1 || st.Targets[0].Terminal != "Complete" {
				t.Fatalf("targets %+v, want the end recorded", st.Targets)
			}
			if err := f.c.Delete(context.Background(), wl); err != nil {
				t.Fatal(err)
			}
			r.Now = func() time.Time { return testNow.Add(time.Hour) }
			st := reconcile(after)
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != tc.wantAccepted {
				t.Errorf("Accepted = %q (%s), want %q", got, apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted).Message, tc.wantAccepted)
			}
			if st.Results.Recorded != tc.wantResults {
				t.Errorf("recorded %d results, want %d", st.Results.Recorded, tc.wantResults)
			}
			if len(st.Targets) != 1 || st.Targets[0].Terminal != "Complete" {
				t.Errorf("targets %+v, want the end still recorded", st.Targets)
			}
		})
	}
}
