package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// workerChild is child Job idx of replicatedJob "workers" of the worker's copy of JobSet
// name, restart attempt attempt, of two indexes, with indexes completed (and Complete
// when both are).
func workerChild(name string, idx, attempt int, completed string) *batchv1.Job {
	js := wrappers.MakeJobSet(name, "ns").Obj()
	js.UID = "worker-js-uid"
	w := wrappers.MakeJob(fmt.Sprintf("%s-workers-%d", name, idx), "ns").UID(fmt.Sprintf("worker-c%d-a%d-uid", idx, attempt)).Indexed(2).
		PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).JobSetChild(js, "workers", idx, attempt)
	if completed != "" {
		w = w.Completed(completed, 2)
	}
	if completed == "0-1" {
		w = w.Complete(testNow.Add(-time.Minute))
	}
	return w.Obj()
}

// childResults are the WorkerResults the worker role writes for the succeeded pods of a
// worker child Job, dispatched for the manager Workload workload, reporting shards.
func childResults(t *testing.T, job *batchv1.Job, workload string, shards ...string) []v1alpha1.WorkerResult {
	var out []v1alpha1.WorkerResult
	for idx, shard := range shards {
		pod := wrappers.MakeIndexPod(job, fmt.Sprintf("%s-%d", job.Name, idx), idx).UID(fmt.Sprintf("%s-pod-%d", job.UID, idx)).
			Succeeded(testNow.Add(-time.Minute), reportOf(t, shard)).Obj()
		out = append(out, *multikueue.NewRecord(pod, workload, job.Name, idx, testNow.Add(-time.Minute)))
	}
	return out
}

// dispatchedOwner is JobSet js (or, trainJob, TrainJob tj) dispatched to worker-a and
// admitted there an hour before testNow, completed at testNow unless running (a TrainJob
// always is); its Workload; the Dispatch its worker copy's children are recorded under;
// and acct with shards assigned to indexes 0-1 of its first child.
func dispatchedOwner(trainJob, running bool, acct *wrappers.BatchAccountWrapper) (client.Object, *kueue.Workload, multikueue.Dispatch, *wrappers.BatchAccountWrapper) {
	if trainJob {
		tj, wl := dispatchedTrainJob()
		return tj, wl, multikueue.Dispatch{Workload: "trainjob-tj", JobSet: "tj", TrainJob: "tj"}, acct.AssignTrainJob("tj", "workers", 0, "0-1", "0-1")
	}
	js := wrappers.MakeJobSet("js", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(1).Obj()).Obj()
	wl := dispatchedToWorkerA(js, testNow.Add(-time.Hour)).Obj()
	if !running {
		endJobSet(js, jobsetapi.JobSetCompleted, "Completed")
	}
	return js, wl, multikueue.Dispatch{Workload: "jobset-js", JobSet: "js"}, acct.AssignJobSet("js", "workers", 0, "0-1", "0-1")
}

// TestDispatchedJobSetChildrenFromWorkerRecords: an account of a JobSet (or TrainJob)
// MultiKueue dispatched to worker-a, which has no child Job on the manager, covers each
// target from the WorkerJob worker-a recorded for the manager's Workload, under the
// worker Job's identity, and records its pods' results from worker-a's WorkerResults
// under that identity with worker-a as provenance: Accepted. A record from a worker the
// Workload was not admitted to, or naming another Workload, is not the target's; of a
// child restarted on the worker, the newest attempt is followed. Nothing is written to a
// Job made from a record.
func TestDispatchedJobSetChildrenFromWorkerRecords(t *testing.T) {
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	c0, c1 := workerChild("js", 0, 0, "0-1"), workerChild("js", 1, 0, "0-1")
	jsDispatch := multikueue.Dispatch{Workload: "jobset-js", JobSet: "js"}
	tjDispatch := multikueue.Dispatch{Workload: "trainjob-tj", JobSet: "tj", TrainJob: "tj"}
	t0, t1 := workerChild("tj", 0, 0, "0-1"), workerChild("tj", 1, 0, "0-1")
	rec := func(job *batchv1.Job, d multikueue.Dispatch) v1alpha1.WorkerJob {
		return *multikueue.NewJobRecord(job, d)
	}
	restarted := workerChild("js", 1, 1, "0-1")
	cases := []struct {
		name        string
		trainJob    bool
		workers     fakeWorkers
		wantFound   bool
		wantUIDs    []types.UID // the identity of each target, in assignment order
		wantResults int
		wantMessage string // a part of the account's ResultsAccepted message
	}{
		{name: "recorded on worker-a: covered and Accepted", wantFound: true,
			workers: fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
				jobs:    map[string][]v1alpha1.WorkerJob{"worker-a": {rec(c0, jsDispatch), rec(c1, jsDispatch)}},
				records: map[string][]v1alpha1.WorkerResult{"worker-a": append(childResults(t, c0, "jobset-js", "A", "B"), childResults(t, c1, "jobset-js", "C", "D")...)}},
			wantUIDs: []types.UID{c0.UID, c1.UID}, wantResults: 4},
		{name: "child restarted on the worker: the newest attempt followed", wantFound: true,
			workers: fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
				jobs: map[string][]v1alpha1.WorkerJob{"worker-a": {rec(c0, jsDispatch), rec(restarted, jsDispatch),
					rec(workerChild("js", 1, 0, "0"), jsDispatch)}},
				records: map[string][]v1alpha1.WorkerResult{"worker-a": append(childResults(t, c0, "jobset-js", "A", "B"), childResults(t, restarted, "jobset-js", "C", "D")...)}},
			wantUIDs: []types.UID{c0.UID, restarted.UID}, wantResults: 4},
		{name: "recorded on a worker it was not admitted to: not found",
			workers: fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok, "worker-b": ok},
				jobs: map[string][]v1alpha1.WorkerJob{"worker-b": {rec(c0, jsDispatch), rec(c1, jsDispatch)}}}},
		{name: "recorded for another Workload: not found",
			workers: fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
				jobs: map[string][]v1alpha1.WorkerJob{"worker-a": {rec(c0, multikueue.Dispatch{Workload: "jobset-other", JobSet: "js"})}}}},
		{name: "worker-a not reachable before its first record: not found, the worker named",
			workers: fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": {Configured: true, Synced: true,
				UnreachableSince: testNow.Add(-time.Minute), Err: "connection refused"}}},
			wantMessage: "pending on worker-a: worker-a not reachable since"},
		{name: "TrainJob recorded on worker-a: covered and Accepted", trainJob: true, wantFound: true,
			workers: fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
				jobs:    map[string][]v1alpha1.WorkerJob{"worker-a": {rec(t0, tjDispatch), rec(t1, tjDispatch)}},
				records: map[string][]v1alpha1.WorkerResult{"worker-a": append(childResults(t, t0, "trainjob-tj", "A", "B"), childResults(t, t1, "trainjob-tj", "C", "D")...)}},
			wantUIDs: []types.UID{t0.UID, t1.UID}, wantResults: 4},
		{name: "a JobSet's records do not cover a TrainJob of its name", trainJob: true,
			workers: fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
				jobs: map[string][]v1alpha1.WorkerJob{"worker-a": {rec(t0, multikueue.Dispatch{Workload: "trainjob-tj", JobSet: "tj"})}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B", "C", "D").Revisions("D", "m").RequireResults("")
			var objs []client.Object
			if tc.trainJob {
				tj, wl := dispatchedTrainJob()
				acct = acct.AssignTrainJob("tj", "workers", 0, "0-1", "0-1").AssignTrainJob("tj", "workers", 1, "0-1", "2-3")
				objs = append(objs, tj, wl)
			} else {
				js := wrappers.MakeJobSet("js", "ns").Obj()
				wl := dispatchedToWorkerA(js, testNow.Add(-time.Hour)).Obj()
				endJobSet(js, jobsetapi.JobSetCompleted, "Completed")
				acct = jobSetAccount().RequireResults("")
				objs = append(objs, js, wl)
			}
			f := newFixture(t, hooks{}, append(objs, acct.Obj())...)
			st := f.reconcileWorkers(t, f.reconciler(), tc.workers).Status
			for _, w := range append(f.writesOf("patch"), f.writesOf("update")...) {
				if strings.HasPrefix(w, "Job/") {
					t.Errorf("wrote %s: no Job of a dispatched JobSet exists on the manager", w)
				}
			}
			var uids []types.UID
			for _, ts := range st.Targets {
				if ts.Found != tc.wantFound {
					t.Errorf("target %s found = %v, want %v", ts.Name, ts.Found, tc.wantFound)
				}
				if tc.wantFound {
					uids = append(uids, ts.UID)
					if len(ts.Admissions) == 0 || ts.Admissions[len(ts.Admissions)-1].Cluster != "worker-a" {
						t.Errorf("target %s admissions %+v, want the last on worker-a", ts.Name, ts.Admissions)
					}
				}
			}
			if !slices.Equal(uids, tc.wantUIDs) {
				t.Errorf("identities %v, want %v", uids, tc.wantUIDs)
			}
			want := "True Accepted"
			if !tc.wantFound {
				want = ""
			}
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); (want != "") != (got == want) {
				t.Errorf("Accepted = %q (%s), want %q", got, apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted).Message, cmp.Or(want, "not Accepted"))
			}
			if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted); c == nil || !strings.Contains(c.Message, tc.wantMessage) {
				t.Errorf("ResultsAccepted %+v, want its message to say %q", c, tc.wantMessage)
			}
			got := recordedResults(t, f.c)
			if len(got) != tc.wantResults {
				t.Fatalf("recorded %d results, want %d: %+v", len(got), tc.wantResults, got)
			}
			for _, rr := range got {
				if rr.Cluster != "worker-a" || !slices.Contains(tc.wantUIDs, rr.JobUID) || rr.RejectReason != "" {
					t.Errorf("recorded %+v, want it accepted under a worker child's identity from worker-a", rr)
				}
			}
		})
	}
}

// TestRedispatchToTheSameWorkerFollowsTheNewCopy: a JobSet restarted once on worker-a,
// evicted (its copy deleted, the records of its children kept), then dispatched to
// worker-a again: the new copy's children count their restarts from 0, yet they are the
// ones followed, being created after the old copy's.
func TestRedispatchToTheSameWorkerFollowsTheNewCopy(t *testing.T) {
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	d := multikueue.Dispatch{Workload: "jobset-js", JobSet: "js"}
	created := func(j *batchv1.Job, at time.Time) *batchv1.Job {
		j.CreationTimestamp = metav1.NewTime(at)
		return j
	}
	oldC0 := created(workerChild("js", 0, 1, "0"), testNow.Add(-2*time.Hour))
	oldC1 := created(workerChild("js", 1, 1, ""), testNow.Add(-2*time.Hour))
	newC0 := created(workerChild("js", 0, 0, "0-1"), testNow.Add(-time.Hour))
	newC1 := created(workerChild("js", 1, 0, "0-1"), testNow.Add(-time.Hour))
	recs := []v1alpha1.WorkerJob{*multikueue.NewJobRecord(oldC0, d), *multikueue.NewJobRecord(oldC1, d),
		*multikueue.NewJobRecord(newC0, d), *multikueue.NewJobRecord(newC1, d)}
	workers := fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
		jobs:    map[string][]v1alpha1.WorkerJob{"worker-a": recs},
		records: map[string][]v1alpha1.WorkerResult{"worker-a": append(childResults(t, newC0, "jobset-js", "A", "B"), childResults(t, newC1, "jobset-js", "C", "D")...)}}
	js := wrappers.MakeJobSet("js", "ns").Obj()
	wl := dispatchedToWorkerA(js, testNow.Add(-time.Hour)).Obj()
	endJobSet(js, jobsetapi.JobSetCompleted, "Completed")
	f := newFixture(t, hooks{}, js, wl, jobSetAccount().RequireResults("").Obj())
	st := f.reconcileWorkers(t, f.reconciler(), workers).Status
	var uids []types.UID
	for _, ts := range st.Targets {
		uids = append(uids, ts.UID)
	}
	if !slices.Equal(uids, []types.UID{newC0.UID, newC1.UID}) {
		t.Errorf("identities %v, want the new copy's %v %v", uids, newC0.UID, newC1.UID)
	}
	if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != "True Accepted" {
		t.Errorf("Accepted = %q, want True Accepted", got)
	}
}

// TestRedispatchBackToTheFirstWorkerFollowsItsNewCopy: a dispatched JobSet runs on worker-a, is
// evicted and dispatched to worker-b, evicted again and dispatched back to worker-a,
// where its new copy completes. The account must follow worker-a's new children (the
// current admission), not worker-b's abandoned ones.
func TestRedispatchBackToTheFirstWorkerFollowsItsNewCopy(t *testing.T) {
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	d := multikueue.Dispatch{Workload: "jobset-js", JobSet: "js"}
	created := func(j *batchv1.Job, uid string, at time.Time) *batchv1.Job {
		j.UID = types.UID(uid)
		j.CreationTimestamp = metav1.NewTime(at)
		return j
	}
	// First copy on worker-a (3h ago), the copy on worker-b (2h ago), the new copy on worker-a (1h ago).
	a1c0 := created(workerChild("js", 0, 0, "0"), "a1-c0", testNow.Add(-3*time.Hour))
	a1c1 := created(workerChild("js", 1, 0, ""), "a1-c1", testNow.Add(-3*time.Hour))
	b1c0 := created(workerChild("js", 0, 0, "0"), "b1-c0", testNow.Add(-2*time.Hour))
	b1c1 := created(workerChild("js", 1, 0, ""), "b1-c1", testNow.Add(-2*time.Hour))
	a2c0 := created(workerChild("js", 0, 0, "0-1"), "a2-c0", testNow.Add(-time.Hour))
	a2c1 := created(workerChild("js", 1, 0, "0-1"), "a2-c1", testNow.Add(-time.Hour))
	rec := func(j *batchv1.Job) v1alpha1.WorkerJob { return *multikueue.NewJobRecord(j, d) }
	workers := fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok, "worker-b": ok},
		jobs: map[string][]v1alpha1.WorkerJob{
			"worker-a": {rec(a1c0), rec(a1c1), rec(a2c0), rec(a2c1)},
		},
		records: map[string][]v1alpha1.WorkerResult{"worker-a": append(childResults(t, a2c0, "jobset-js", "A", "B"), childResults(t, a2c1, "jobset-js", "C", "D")...)}}
	js := wrappers.MakeJobSet("js", "ns").Obj()
	wl := dispatchedToWorkerA(js, testNow.Add(-3*time.Hour)).Obj()
	f := newFixture(t, hooks{}, js, wl, jobSetAccount().RequireResults("").Obj())
	r := f.reconciler()
	reconcile := func() {
		t.Helper()
		f.reconcileWorkers(t, r, workers)
	}
	dispatchTo := func(cluster string) {
		t.Helper()
		var w kueue.Workload
		if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "jobset-js"}, &w); err != nil {
			t.Fatal(err)
		}
		w.Status.ClusterName = ptr.To(cluster)
		if err := f.c.Status().Update(context.Background(), &w); err != nil {
			t.Fatal(err)
		}
	}
	workers.jobs["worker-a"] = []v1alpha1.WorkerJob{rec(a1c0), rec(a1c1)}
	reconcile() // admitted on worker-a
	dispatchTo("worker-b")
	reconcile() // re-dispatched to worker-b, whose children are not recorded yet
	// worker-b records its children; before the account looks again the Workload is
	// evicted there and dispatched back to worker-a.
	workers.jobs["worker-b"] = []v1alpha1.WorkerJob{rec(b1c0), rec(b1c1)}
	workers.jobs["worker-a"] = []v1alpha1.WorkerJob{rec(a1c0), rec(a1c1), rec(a2c0), rec(a2c1)}
	dispatchTo("worker-a")
	reconcile() // back on worker-a: its new copy completes there
	st := f.account(t, "acct").Status
	var uids []types.UID
	for _, ts := range st.Targets {
		var clusters []string
		for _, a := range ts.Admissions {
			clusters = append(clusters, a.Cluster)
		}
		t.Logf("target %s: uid %s, admissions on %v", ts.Name, ts.UID, clusters)
		uids = append(uids, ts.UID)
	}
	if want := []types.UID{a2c0.UID, a2c1.UID}; !slices.Equal(uids, want) {
		t.Errorf("identities %v, want worker-a's current copy %v", uids, want)
	}
	if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != "True Accepted" {
		t.Errorf("Accepted = %q, want True Accepted (all four results recorded on worker-a)", got)
	}
}

// TestRecreatedDispatchedTrainJobIsNotCoveredByItsPredecessor: a TrainJob dispatched
// by MultiKueue to worker-a completes there (Accepted). It is deleted and created again
// under the same name; Kueue gives the new one a new Workload (trainjob-tj-<hash of the
// new UID>), still queued. worker-a keeps the old copy's WorkerJobs (7 days). The new
// TrainJob has run nothing: the account must not follow the old copy's child Jobs, and
// the new Workload must not be told its shards are covered.
func TestRecreatedDispatchedTrainJobIsNotCoveredByItsPredecessor(t *testing.T) {
	ctx := context.Background()
	oldD := multikueue.Dispatch{Workload: "trainjob-tj-old", JobSet: "tj", TrainJob: "tj"}
	t0, t1 := workerChild("tj", 0, 0, "0-1"), workerChild("tj", 1, 0, "0-1")
	workers := fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": {Configured: true, Synced: true}},
		jobs:    map[string][]v1alpha1.WorkerJob{"worker-a": {*multikueue.NewJobRecord(t0, oldD), *multikueue.NewJobRecord(t1, oldD)}},
		records: map[string][]v1alpha1.WorkerResult{"worker-a": append(childResults(t, t0, "trainjob-tj-old", "A", "B"), childResults(t, t1, "trainjob-tj-old", "C", "D")...)}}
	oldTJ := wrappers.MakeTrainJob("tj", "ns", "torch-distributed").UID("tj-old").Condition(trainer.TrainJobComplete, testNow).Obj()
	oldTJ.Spec.ManagedBy = ptr.To(multikueue.ManagedBy)
	oldWL := wrappers.MakeWorkload("trainjob-tj-old", "ns").UID("wl-old").ControlledBy(oldTJ, trainJobGVK).
		Admitted("gpu", testNow.Add(-time.Hour)).DispatchedTo("worker-a").Obj()
	acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B", "C", "D").Revisions("D", "m").RequireResults("").
		AssignTrainJob("tj", "workers", 0, "0-1", "0-1").AssignTrainJob("tj", "workers", 1, "0-1", "2-3")
	f := newFixture(t, hooks{}, oldTJ, oldWL, acct.Obj())
	r := f.reconciler()
	reconcile := func() {
		t.Helper()
		f.reconcileWorkers(t, r, workers)
	}
	reconcile()
	if got := conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionAccepted); got != "True Accepted" {
		t.Fatalf("the first TrainJob: Accepted = %q, want True Accepted", got)
	}
	// Deleted (its Workload with it) and created again: a new UID, a new queued Workload.
	for _, o := range []client.Object{oldWL, oldTJ} {
		if err := f.c.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	newTJ := wrappers.MakeTrainJob("tj", "ns", "torch-distributed").UID("tj-new").Suspend(true).Obj()
	newTJ.Spec.ManagedBy = ptr.To(multikueue.ManagedBy)
	newWL := wrappers.MakeWorkload("trainjob-tj-new", "ns").UID("wl-new").ControlledBy(newTJ, trainJobGVK).Obj()
	for _, o := range []client.Object{newTJ, newWL} {
		if err := f.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	reconcile()
	st := f.account(t, "acct").Status
	for _, ts := range st.Targets {
		wl := "<none>"
		if ts.Workload != nil {
			wl = ts.Workload.Name
		}
		t.Logf("target %s found=%v uid=%s completed=%q workload=%s", ts.Name, ts.Found, ts.UID, ts.CompletedIndexes, wl)
		if ts.Found && (ts.UID == t0.UID || ts.UID == t1.UID) {
			t.Errorf("target %s follows the deleted TrainJob's child %s on worker-a", ts.Name, ts.UID)
		}
	}
	var wl kueue.Workload
	if err := f.c.Get(ctx, client.ObjectKeyFromObject(newWL), &wl); err != nil {
		t.Fatal(err)
	}
	for _, c := range wl.Status.Conditions {
		t.Logf("new Workload: %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		if c.Status == "True" {
			t.Errorf("the new, queued TrainJob's Workload carries %s=True from its predecessor's run", c.Type)
		}
	}
}

// TestWorkerRecordsWakeTheirAccounts: a WorkerJob wakes the accounts naming its JobSet, or
// its TrainJob; a WorkerResult those naming its Job; a record of anything no account
// names wakes none.
func TestWorkerRecordsWakeTheirAccounts(t *testing.T) {
	jsAcct := wrappers.MakeBatchAccount("js-acct", "ns").Shards("A", "B").AssignJobSet("js", "workers", 0, "0-1", "0-1").Obj()
	tjAcct := wrappers.MakeBatchAccount("tj-acct", "ns").Shards("A", "B").AssignTrainJob("tj", "workers", 0, "0-1", "0-1").Obj()
	jAcct := accountOfJ().Obj()
	f := newFixture(t, hooks{}, jsAcct, tjAcct, jAcct)
	r := f.reconciler()
	rec := func(d multikueue.Dispatch) *v1alpha1.WorkerJob {
		return multikueue.NewJobRecord(workerChild(d.JobSet, 0, 0, ""), d)
	}
	result := workerRecord("job-j", 0, "")
	for name, tc := range map[string]struct {
		obj  client.Object
		want []string
	}{
		"child of JobSet js":        {obj: rec(multikueue.Dispatch{Workload: "jobset-js", JobSet: "js"}), want: []string{"js-acct"}},
		"child of TrainJob tj":      {obj: rec(multikueue.Dispatch{Workload: "trainjob-tj", JobSet: "tj", TrainJob: "tj"}), want: []string{"tj-acct"}},
		"child of a JobSet unnamed": {obj: rec(multikueue.Dispatch{Workload: "jobset-other", JobSet: "other"})},
		"result of a pod of Job j":  {obj: &result, want: []string{"acct"}},
	} {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, req := range r.workerResultToAccounts(context.Background(), tc.obj) {
				got = append(got, req.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("woke %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDispatchedChildOnAnUnreadWorkerIsPending: a JobSet MultiKueue dispatched to
// worker-a completed there (its status copied back); its child Jobs exist only on the
// worker. While batchledger does not read worker-a's records (no
// --multikueue-worker-results, no kubeconfig Secret, not read yet, not reachable), the
// JobSet's end says nothing of its children: the account says they wait on worker-a and
// why, never that they were deleted or never created, nor that their shards need a
// re-run; it looks again every WorkerRecheck when a reader may bring the records. An
// account that recorded the children before the worker became unread keeps its coverage.
func TestDispatchedChildOnAnUnreadWorkerIsPending(t *testing.T) {
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	d := multikueue.Dispatch{Workload: "jobset-js", JobSet: "js"}
	c0 := workerChild("js", 0, 0, "0-1")
	js := wrappers.MakeJobSet("js", "ns").Obj()
	wl := dispatchedToWorkerA(js, testNow.Add(-time.Hour)).Finished(testNow).Obj()
	endJobSet(js, jobsetapi.JobSetCompleted, "Completed")
	acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B").Revisions("D", "m").
		AssignJobSet("js", "workers", 0, "0-1", "0-1")
	unreachable := fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": {Configured: true,
		UnreachableSince: testNow.Add(-time.Minute), Err: "connection refused"}}}
	for _, tc := range []struct {
		name    string
		before  WorkerResults // read first, when set
		workers WorkerResults
		want    string // part of ShardsCovered's message
		covered bool
	}{
		{name: "without --multikueue-worker-results",
			want: "pending on MultiKueue worker cluster worker-a: batchledger reads no worker cluster (the manager runs without --multikueue-worker-results)"},
		{name: "no kubeconfig Secret for worker-a", workers: fakeWorkers{states: map[string]multikueue.WorkerState{}},
			want: "pending on MultiKueue worker cluster worker-a: batchledger has no kubeconfig for worker-a"},
		{name: "worker-a not read yet (manager just started)", workers: fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": {Configured: true}}},
			want: "pending on MultiKueue worker cluster worker-a: reading the results recorded on worker-a"},
		{name: "worker-a unreachable since the manager started", workers: unreachable,
			want: "pending on MultiKueue worker cluster worker-a: worker-a not reachable since"},
		{name: "recorded before worker-a became unreachable: the coverage kept", covered: true, workers: unreachable,
			before: fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
				jobs: map[string][]v1alpha1.WorkerJob{"worker-a": {*multikueue.NewJobRecord(c0, d)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, js.DeepCopy(), wl.DeepCopy(), acct.Obj())
			r := f.reconciler()
			reconcile := func(w WorkerResults) ctrl.Result {
				t.Helper()
				r.WorkerResults = w
				res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			if tc.before != nil {
				reconcile(tc.before)
			}
			res := reconcile(tc.workers)
			st := f.account(t, "acct").Status
			for _, c := range st.Conditions {
				t.Logf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
				for _, lie := range []string{"never created", "deleted before", "re-run"} {
					if strings.Contains(c.Message, lie) {
						t.Errorf("%s says %q: the child ran on worker-a", c.Type, c.Message)
					}
				}
			}
			cov := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionShardsCovered)
			if got := cov.Status == metav1.ConditionTrue; got != tc.covered {
				t.Errorf("ShardsCovered = %s, want covered %v", cov.Status, tc.covered)
			}
			if !strings.Contains(cov.Message, tc.want) {
				t.Errorf("ShardsCovered says %q, want it to say %q", cov.Message, tc.want)
			}
			if tc.workers != nil && !tc.covered && (res.RequeueAfter == 0 || res.RequeueAfter > WorkerRecheck) {
				t.Errorf("requeued after %v, want within %v: the worker's records may come", res.RequeueAfter, WorkerRecheck)
			}
		})
	}
}

// TestDispatchedFailedChildWaitsForItsJobSet: a child of a JobSet MultiKueue dispatched,
// recorded Failed on worker-a while the JobSet runs there (its failure policy may restart
// the child), leaves the batch AwaitingTermination as a child on the manager would, so
// that retention does not take the account before the restart's child is recorded. The
// JobSet's end, which Kueue copies back onto the manager's JobSet, makes the failure stand.
func TestDispatchedFailedChildWaitsForItsJobSet(t *testing.T) {
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	d := multikueue.Dispatch{Workload: "jobset-js", JobSet: "js"}
	c0 := wrappers.MakeJob("js-workers-0", "ns").UID("worker-c0-a0-uid").Indexed(2).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
		JobSetChild(wrappers.MakeJobSet("js", "ns").Obj(), "workers", 0, 0).Completed("0", 1).Failed("BackoffLimitExceeded", testNow.Add(-time.Minute)).Obj()
	c1 := workerChild("js", 1, 0, "0-1")
	workers := fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
		jobs: map[string][]v1alpha1.WorkerJob{"worker-a": {*multikueue.NewJobRecord(c0, d), *multikueue.NewJobRecord(c1, d)}}}
	js := wrappers.MakeJobSet("js", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Obj()).MaxRestarts(3).Obj()
	wl := dispatchedToWorkerA(js, testNow.Add(-time.Hour)).Obj()
	f := newFixture(t, hooks{}, js, wl, jobSetAccount().Obj())
	r := f.reconciler()
	terminated := func() *metav1.Condition {
		t.Helper()
		return apimeta.FindStatusCondition(f.reconcileWorkers(t, r, workers).Status.Conditions, v1alpha1.ConditionTerminated)
	}
	if c := terminated(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonAwaitingTermination {
		t.Fatalf("Terminated while the dispatched JobSet may restart its failed child = %+v; want False/%s", c, v1alpha1.ReasonAwaitingTermination)
	}

	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(js), js); err != nil {
		t.Fatal(err)
	}
	endJobSet(js, jobsetapi.JobSetFailed, "ReachedMaxRestarts")
	if err := f.c.Update(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	if c := terminated(); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonTargetFailed {
		t.Errorf("Terminated once the JobSet Failed = %+v; want True/%s", c, v1alpha1.ReasonTargetFailed)
	}
}

// TestDispatchedChildCopiedOutsideTheResultsScope: a JobSet (or TrainJob) MultiKueue
// dispatched while no account required its results runs its children on the worker
// outside the results scope (their pod template carries the coverage scope, recorded in
// their WorkerJob): their pods are not held there and the worker role records none of
// their results. An account requiring them (a second account, or the spec changed)
// says why while the child runs, and once it terminated counts its results as lost
// (MissingResult, for a repair), as for a Job copied so; a child copied in the results
// scope waits for its records.
func TestDispatchedChildCopiedOutsideTheResultsScope(t *testing.T) {
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	for _, tc := range []struct {
		name         string
		trainJob     bool
		scope        string // the child's pod template's, as recorded
		completed    string // the child's completed indexes, Complete when "0-1"
		wantAccepted string
		wantMessage  string // a part of the ResultsAccepted message
	}{
		{name: "copied in the results scope, terminated: its results awaited", scope: v1alpha1.ScopeResults, completed: "0-1",
			wantAccepted: "False ResultsPending", wantMessage: "its results are read from the worker"},
		{name: "copied in the coverage scope, terminated: its results lost, said why", scope: v1alpha1.ScopeCoverage, completed: "0-1",
			wantAccepted: "False MissingResult", wantMessage: unstampedCopy},
		{name: "copied in the coverage scope, running: pending, said why", scope: v1alpha1.ScopeCoverage, completed: "0",
			wantAccepted: "False ShardsMissing", wantMessage: unstampedCopy},
		{name: "TrainJob copied in the coverage scope, terminated: its results lost", trainJob: true, scope: v1alpha1.ScopeCoverage, completed: "0-1",
			wantAccepted: "False MissingResult", wantMessage: unstampedCopy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B").Revisions("D", "m").RequireResults("")
			// The JobSet ends once its child completed both indexes (the TrainJob is Complete).
			owner, wl, d, acct := dispatchedOwner(tc.trainJob, tc.completed != "0-1", acct)
			child := workerChild(d.JobSet, 0, 0, tc.completed)
			child.Spec.Template.Labels[v1alpha1.LabelScope] = tc.scope
			f := newFixture(t, hooks{}, owner, wl, acct.Obj())
			st := f.reconcileWorkers(t, f.reconciler(), fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
				jobs: map[string][]v1alpha1.WorkerJob{"worker-a": {*multikueue.NewJobRecord(child, d)}}}).Status
			if len(st.Targets) != 1 || !st.Targets[0].Found || st.Targets[0].UID != child.UID {
				t.Fatalf("targets %+v, want the worker child %s found", st.Targets, child.UID)
			}
			res := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted)
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != tc.wantAccepted {
				t.Errorf("Accepted = %q, want %q (%s)", got, tc.wantAccepted, res.Message)
			}
			if !strings.Contains(res.Message, tc.wantMessage) {
				t.Errorf("ResultsAccepted message %q, want it to say %q", res.Message, tc.wantMessage)
			}
		})
	}
}
