package controller

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// fakeWorkers are worker clusters' records as the manager reads them, by worker name.
type fakeWorkers struct {
	records map[string][]v1alpha1.WorkerResult
	jobs    map[string][]v1alpha1.WorkerJob
	states  map[string]multikueue.WorkerState
}

func (f fakeWorkers) Jobs(_ context.Context, worker, namespace, workload string) ([]v1alpha1.WorkerJob, multikueue.WorkerState, error) {
	var out []v1alpha1.WorkerJob
	for _, r := range f.jobs[worker] {
		if r.Namespace == namespace && r.Workload == workload {
			out = append(out, r)
		}
	}
	return out, f.states[worker], nil
}

func (f fakeWorkers) Records(_ context.Context, worker, namespace, workload string) ([]v1alpha1.WorkerResult, multikueue.WorkerState, error) {
	var out []v1alpha1.WorkerResult
	for _, r := range f.records[worker] {
		if r.Namespace == namespace && r.Workload == workload {
			out = append(out, r)
		}
	}
	return out, f.states[worker], nil
}

func (f fakeWorkers) Events() <-chan event.GenericEvent { return nil }

// workerRecord is the WorkerResult a worker's capture writes for index idx of Job j's
// copy, dispatched for the manager Workload workload.
func workerRecord(workload string, idx int, msg string) v1alpha1.WorkerResult {
	return workerRecordAt(workload, idx, msg, testNow.Add(-time.Minute))
}

// TestResultsReadFromWorkers: a results account of a Job dispatched to worker-a records
// the results worker-a recorded for the manager's Workload, under the manager's identity
// and with worker-a as their provenance, in its own signed chunk, and is Accepted. The
// records of a worker the Workload was admitted to before an eviction count too; a
// record from a worker the Workload was never admitted to, or of another Workload, is
// not the account's. A worker that does not answer is named in the account, its results
// pending; a worker the manager has no kubeconfig for loses the terminated Job's results
// (MissingResult), as a terminated Job without pods does on one cluster, and so does a
// Job MultiKueue copied before an account required its results (its copy's pods were
// never held there); the message says why.
func TestResultsReadFromWorkers(t *testing.T) {
	msg := func(shard string) string { return reportOf(t, shard) }
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	cases := []struct {
		name string
		// admittedBefore is a worker the account recorded an earlier admission of the
		// Workload on (an eviction there, then a dispatch to worker-a).
		admittedBefore string
		// scope is the manager Job's pod template's, which MultiKueue copied to the worker
		// (results when "").
		scope string
		// running leaves the Job running (terminated Complete when false).
		running      bool
		workers      fakeWorkers
		wantAccepted string
		wantMessage  string // a part of the ResultsAccepted message
		wantResults  int
		// wantClusters are the workers of the results in recording order; all worker-a
		// when nil.
		wantClusters []string
	}{
		{name: "recorded on worker-a: Accepted",
			workers: fakeWorkers{records: map[string][]v1alpha1.WorkerResult{"worker-a": {workerRecord("job-j", 0, msg("A")), workerRecord("job-j", 1, msg("B"))}},
				states: map[string]multikueue.WorkerState{"worker-a": ok}},
			wantAccepted: "True Accepted", wantResults: 2},
		{name: "one recorded so far: pending, read from the worker",
			workers: fakeWorkers{records: map[string][]v1alpha1.WorkerResult{"worker-a": {workerRecord("job-j", 0, msg("A"))}},
				states: map[string]multikueue.WorkerState{"worker-a": ok}},
			wantAccepted: "False ResultsPending", wantMessage: "its results are read from the worker", wantResults: 1},
		{name: "recorded on a worker it was not admitted to: not the account's",
			workers: fakeWorkers{records: map[string][]v1alpha1.WorkerResult{"worker-b": {workerRecord("job-j", 0, msg("A")), workerRecord("job-j", 1, msg("B"))}},
				states: map[string]multikueue.WorkerState{"worker-a": ok, "worker-b": ok}},
			wantAccepted: "False ResultsPending"},
		// worker-b's pod finished before the Workload was admitted on worker-a, an hour
		// before testNow (TestLateRecordsOfAnEvictedWorkerDoNotStandForTheNextOne: one
		// that finished after does not count).
		{name: "evicted from worker-b, then on worker-a: the results recorded on both count", admittedBefore: "worker-b",
			workers: fakeWorkers{records: map[string][]v1alpha1.WorkerResult{"worker-b": {workerRecordAt("job-j", 0, msg("A"), testNow.Add(-2*time.Hour))},
				"worker-a": {workerRecord("job-j", 1, msg("B"))}},
				states: map[string]multikueue.WorkerState{"worker-a": ok, "worker-b": ok}},
			wantAccepted: "True Accepted", wantResults: 2, wantClusters: []string{"worker-b", "worker-a"}},
		{name: "recorded for another Workload: not the account's",
			workers: fakeWorkers{records: map[string][]v1alpha1.WorkerResult{"worker-a": {workerRecord("job-other", 0, msg("A"))}},
				states: map[string]multikueue.WorkerState{"worker-a": ok}},
			wantAccepted: "False ResultsPending"},
		{name: "worker-a not reachable: pending, named",
			workers: fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": {Configured: true, Synced: true,
				UnreachableSince: testNow.Add(-time.Minute), Err: "connection refused"}}},
			wantAccepted: "False ResultsPending", wantMessage: "results of job j pending on worker-a: worker-a not reachable since"},
		{name: "no kubeconfig for worker-a: the terminated Job's results are lost, said why",
			workers:      fakeWorkers{},
			wantAccepted: "False MissingResult", wantMessage: "results of job j on worker-a: batchledger has no kubeconfig for worker-a"},
		{name: "copied before its account required results: the terminated Job's results are lost, said why",
			scope:        v1alpha1.ScopeCoverage,
			workers:      fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok}},
			wantAccepted: "False MissingResult", wantMessage: unstampedCopy},
		{name: "copied unstamped, still running: pending, said why", scope: v1alpha1.ScopeCoverage, running: true,
			workers:      fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok}},
			wantAccepted: "False ShardsMissing", wantMessage: "results of job j pending on worker-a: " + unstampedCopy},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := jobJ(cmp.Or(tc.scope, v1alpha1.ScopeResults)).ManagedBy(multikueue.ManagedBy)
			if !tc.running {
				j = j.Completed("0-1", 2).Complete(testNow)
			}
			job := j.Obj()
			wl := workloadOfJ(job).DispatchedTo("worker-a").Obj()
			acct := accountOfJ().Revisions("D", "m").RequireResults("")
			if tc.admittedBefore != "" {
				acct = acct.TargetStatus(v1alpha1.TargetStatus{Name: "job/j", Job: "j", UID: job.UID, Found: true,
					Admissions: []v1alpha1.Admission{{Workload: "job-j", ClusterQueue: "gpu", Cluster: tc.admittedBefore}}})
			}
			f := newFixture(t, hooks{}, acct.Obj(), job, wl)
			r := f.reconciler()
			r.WorkerResults = tc.workers
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}})
			if err != nil {
				t.Fatal(err)
			}
			st := f.account(t, "acct").Status
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != tc.wantAccepted {
				t.Errorf("Accepted = %q, want %q (%s)", got, tc.wantAccepted, apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted).Message)
			}
			if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted); !strings.Contains(c.Message, tc.wantMessage) {
				t.Errorf("ResultsAccepted message %q, want it to say %q", c.Message, tc.wantMessage)
			}
			if tc.wantAccepted == "False ResultsPending" && res.RequeueAfter == 0 {
				t.Errorf("no recheck of results pending on a worker")
			}
			var chunks v1alpha1.ShardResultsList
			if err := f.c.List(context.Background(), &chunks); err != nil {
				t.Fatal(err)
			}
			var got []v1alpha1.RecordedResult
			for _, c := range chunks.Items {
				if c.Annotations["batchledger.dev/signature"] == "" && len(c.Results) > 0 {
					t.Errorf("chunk %s unsigned", c.Name)
				}
				got = append(got, c.Results...)
			}
			if len(got) != tc.wantResults {
				t.Fatalf("recorded %d results, want %d: %+v", len(got), tc.wantResults, got)
			}
			slices.SortFunc(got, func(a, b v1alpha1.RecordedResult) int { return cmp.Compare(a.Sequence, b.Sequence) })
			for i, rr := range got {
				want := "worker-a"
				if tc.wantClusters != nil {
					want = tc.wantClusters[i]
				}
				if rr.Cluster != want || rr.JobUID != "j-uid" || rr.RejectReason != "" {
					t.Errorf("recorded %+v, want it accepted under the manager's j-uid from %s", rr, want)
				}
			}
		})
	}
}

// TestDeletedDispatchedJobResultsStillRead: a Job dispatched to worker-a completes there
// and Kueue copies its end back; the account records that end while worker-a's records
// are not read yet (not reachable, or its capture lags the Job controller), and the
// manager's Job is deleted (ttlSecondsAfterFinished, a cleanup): the record finalizer
// lets it go once its end is recorded. The results worker-a recorded are still the
// identity's, read from its admission on record, and the account is Accepted; while
// worker-a does not answer they are pending, never MissingResult; only without a
// kubeconfig for worker-a are they lost, as for the Job before its deletion.
func TestDeletedDispatchedJobResultsStillRead(t *testing.T) {
	msg := func(shard string) string { return reportOf(t, shard) }
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	unreachable := fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": {Configured: true, Synced: true,
		UnreachableSince: testNow.Add(-time.Minute), Err: "connection refused"}}}
	all := fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
		records: map[string][]v1alpha1.WorkerResult{"worker-a": {workerRecord("job-j", 0, msg("A")), workerRecord("job-j", 1, msg("B"))}}}
	for _, tc := range []struct {
		name         string
		before       fakeWorkers // read while the Job exists
		after        fakeWorkers // read once it is deleted
		wantAccepted string
		wantResults  int32
	}{
		{name: "worker-a not reachable while the Job existed", before: unreachable, after: all,
			wantAccepted: "True Accepted", wantResults: 2},
		{name: "one result recorded while the Job existed", after: all,
			before: fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
				records: map[string][]v1alpha1.WorkerResult{"worker-a": {workerRecord("job-j", 0, msg("A"))}}},
			wantAccepted: "True Accepted", wantResults: 2},
		{name: "worker-a still not reachable: pending", before: unreachable, after: unreachable,
			wantAccepted: "False ResultsPending"},
		{name: "no kubeconfig for worker-a: lost", before: unreachable, after: fakeWorkers{},
			wantAccepted: "False MissingResult"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := jobJ(v1alpha1.ScopeResults).ManagedBy(multikueue.ManagedBy).Completed("0-1", 2).Complete(testNow).Obj()
			wl := workloadOfJ(job).DispatchedTo("worker-a").Obj()
			f := newFixture(t, hooks{}, accountOfJ().Revisions("D", "m").RequireResults("").Obj(), job, wl)
			r := f.reconciler()
			reconcile := func(w fakeWorkers) *v1alpha1.BatchAccount {
				t.Helper()
				r.WorkerResults = w
				if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}); err != nil {
					t.Fatal(err)
				}
				return f.account(t, "acct")
			}
			if st := reconcile(tc.before).Status; len(st.Targets) != 1 || st.Targets[0].Terminal != "Complete" {
				t.Fatalf("targets %+v, want j's end recorded", st.Targets)
			}
			if err := f.c.Delete(context.Background(), job); err != nil {
				t.Fatal(err)
			}
			st := reconcile(tc.after).Status
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != tc.wantAccepted {
				t.Errorf("Accepted = %q (%s), want %q", got, apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted).Message, tc.wantAccepted)
			}
			if st.Results.Recorded != tc.wantResults {
				t.Errorf("recorded %d results, want %d", st.Results.Recorded, tc.wantResults)
			}
		})
	}
}

// TestDeletedDispatchedOwnerResultsStillRead: a JobSet (or TrainJob) dispatched to
// worker-a completes there; the account records its child's end from worker-a's
// WorkerJob before the child's results are recorded there (the Job controller counts a
// pod before the worker role captures it), and the manager's JobSet is deleted (a
// cleanup), its Workload with it. The results worker-a recorded are still the child
// identity's, read from its admission on record, and the account is Accepted; never
// MissingResult for results the worker holds.
func TestDeletedDispatchedOwnerResultsStillRead(t *testing.T) {
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	for _, tc := range []struct {
		name     string
		trainJob bool
	}{
		{name: "JobSet"},
		{name: "TrainJob", trainJob: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B").Revisions("D", "m").RequireResults("")
			owner, wl, d, acct := dispatchedOwner(tc.trainJob, false, acct)
			child := workerChild(d.JobSet, 0, 0, "0-1")
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
			jobs := map[string][]v1alpha1.WorkerJob{"worker-a": {*multikueue.NewJobRecord(child, d)}}
			if st := reconcile(fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok}, jobs: jobs}); len(st.Targets) != 1 || st.Targets[0].Terminal != "Complete" {
				t.Fatalf("targets %+v, want the child's end recorded", st.Targets)
			}
			for _, o := range []client.Object{owner, wl} {
				if err := f.c.Delete(context.Background(), o); err != nil {
					t.Fatal(err)
				}
			}
			st := reconcile(fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok}, jobs: jobs,
				records: map[string][]v1alpha1.WorkerResult{"worker-a": childResults(t, child, d.Workload, "A", "B")}})
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != "True Accepted" {
				t.Errorf("Accepted = %q (%s), want the results worker-a holds read", got,
					apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted).Message)
			}
			if st.Results.Recorded != 2 {
				t.Errorf("recorded %d results, want 2", st.Results.Recorded)
			}
		})
	}
}

// TestDispatchedJobWithoutItsWorkload: the manager's Workload of a dispatched Job is
// deleted (Kueue's retention of a finished Workload, a cleanup) while the Job stays. The
// worker a Workload was admitted to is known only from the Workload or an admission the
// account recorded: with one on record the results are read from that worker as before;
// with none (the account was created, or the controller was down, until the Workload was
// gone) no worker's records can be trusted as the Job's, so once the Job terminated its
// shards without a recorded result count as MissingResult, said why, instead of waiting
// forever. A Job still running waits: Kueue gives it a new Workload. Results recorded
// before stay accepted.
func TestDispatchedJobWithoutItsWorkload(t *testing.T) {
	msg := func(shard string) string { return reportOf(t, shard) }
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	both := fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
		records: map[string][]v1alpha1.WorkerResult{"worker-a": {workerRecord("job-j", 0, msg("A")), workerRecord("job-j", 1, msg("B"))}}}
	for _, tc := range []struct {
		name string
		// admittedOn is the worker of the admission on record; none when "".
		admittedOn string
		// recorded are the results the account recorded before (by index).
		recorded     []int
		running      bool
		workers      fakeWorkers
		wantAccepted string
		wantMessage  string
		wantResults  int32
	}{
		{name: "no admission on record: the terminated Job's results are lost, said why", workers: both,
			wantAccepted: "False MissingResult", wantMessage: "results of job j: " + unknownWorker},
		{name: "no admission on record, no worker answering: lost all the same",
			workers:      fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": {Configured: true, UnreachableSince: testNow, Err: "connection refused"}}},
			wantAccepted: "False MissingResult", wantMessage: unknownWorker},
		{name: "one result recorded before, then no kubeconfig for worker-a: it stays, the other is lost", admittedOn: "worker-a",
			recorded: []int{0}, workers: fakeWorkers{},
			wantAccepted: "False MissingResult", wantMessage: "1/2 shard results accepted", wantResults: 1},
		{name: "no admission on record, still running: waits for its next Workload", workers: both, running: true,
			wantAccepted: "False ShardsMissing"},
		{name: "admitted to worker-a on record: its results are read there", admittedOn: "worker-a", workers: both,
			wantAccepted: "True Accepted", wantResults: 2},
		{name: "admitted to worker-a on record, no kubeconfig for it: lost, as with its Workload", admittedOn: "worker-a",
			workers:      fakeWorkers{},
			wantAccepted: "False MissingResult", wantMessage: "results of job j: batchledger has no kubeconfig for worker-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := jobJ(v1alpha1.ScopeResults).ManagedBy(multikueue.ManagedBy)
			if !tc.running {
				j = j.Completed("0-1", 2).Complete(testNow)
			}
			job := j.Obj()
			acct := accountOfJ().Revisions("D", "m").RequireResults("")
			if tc.admittedOn != "" {
				acct = acct.TargetStatus(v1alpha1.TargetStatus{Name: "job/j", Job: "j", UID: job.UID, Found: true,
					Admissions: []v1alpha1.Admission{{Workload: "job-j", ClusterQueue: "gpu", Cluster: tc.admittedOn}}})
			}
			f := newFixture(t, hooks{}, acct.Obj(), job)
			r := f.reconciler()
			if len(tc.recorded) > 0 {
				// Recorded while the Workload was there: read once from worker-a.
				wl := workloadOfJ(job).DispatchedTo("worker-a").Obj()
				if err := f.c.Create(context.Background(), wl); err != nil {
					t.Fatal(err)
				}
				var recs []v1alpha1.WorkerResult
				for _, i := range tc.recorded {
					recs = append(recs, both.records["worker-a"][i])
				}
				r.WorkerResults = fakeWorkers{states: both.states, records: map[string][]v1alpha1.WorkerResult{"worker-a": recs}}
				if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}); err != nil {
					t.Fatal(err)
				}
				if err := f.c.Delete(context.Background(), wl); err != nil {
					t.Fatal(err)
				}
			}
			r.WorkerResults = tc.workers
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}); err != nil {
				t.Fatal(err)
			}
			st := f.account(t, "acct").Status
			c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted)
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != tc.wantAccepted {
				t.Errorf("Accepted = %q, want %q (%s)", got, tc.wantAccepted, c.Message)
			}
			if !strings.Contains(c.Message, tc.wantMessage) {
				t.Errorf("ResultsAccepted message %q, want it to say %q", c.Message, tc.wantMessage)
			}
			if st.Results.Recorded != tc.wantResults {
				t.Errorf("recorded %d results, want %d", st.Results.Recorded, tc.wantResults)
			}
		})
	}
}
