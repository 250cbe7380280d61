package controller

import (
	"cmp"
	"context"
	"slices"
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

// dispatchedJobSet is a JobSet js that MultiKueue dispatched to worker-a, as the manager
// holds it: the JobSet (two workers replicas, UID js-uid, managed by MultiKueue), its
// Workload jobset-js admitted at a given time, and account acct mapping the indexes 0-1
// of workers[0] onto shards A, B and those of workers[1] onto C, D.
type dispatchedJobSet struct {
	f  *fixture
	r  *Reconciler
	js *jobsetapi.JobSet
	wl *kueue.Workload
}

// newDispatchedJobSet builds the fixture from js (without its replicatedJobs) and the
// Workload's admission time.
func newDispatchedJobSet(t *testing.T, js *wrappers.JobSetWrapper, admitted time.Time) *dispatchedJobSet {
	t.Helper()
	d := &dispatchedJobSet{js: js.ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Obj()).Obj()}
	d.wl = dispatchedToWorkerA(d.js, admitted).Obj()
	d.f = newFixture(t, hooks{}, d.js, d.wl, jobSetAccount().Obj())
	d.r = d.f.reconciler()
	return d
}

// jobSetAccount is account acct mapping the indexes 0-1 of JobSet js's workers[0] onto
// shards A, B and those of workers[1] onto C, D.
func jobSetAccount() *wrappers.BatchAccountWrapper {
	return wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B", "C", "D").Revisions("D", "m").
		AssignJobSet("js", "workers", 0, "0-1", "0-1").AssignJobSet("js", "workers", 1, "0-1", "2-3")
}

// dispatchedToWorkerA makes js JobSet js-uid, managed by MultiKueue, and returns its
// Workload jobset-js, admitted at admitted and dispatched to worker-a.
func dispatchedToWorkerA(js *jobsetapi.JobSet, admitted time.Time) *wrappers.WorkloadWrapper {
	js.UID, js.Spec.ManagedBy = "js-uid", ptr.To(multikueue.ManagedBy)
	return wrappers.MakeWorkload("jobset-js", "ns").UID("wl-uid").ForJobSet(js).Admitted("gpu", admitted).DispatchedTo("worker-a")
}

// dispatchedTrainJob is TrainJob tj, Complete at testNow, managed by MultiKueue, and its
// Workload trainjob-tj, admitted an hour before testNow and dispatched to worker-a.
func dispatchedTrainJob() (*trainer.TrainJob, *kueue.Workload) {
	tj := makeTJ().Condition(trainer.TrainJobComplete, testNow).Obj()
	return tj, trainJobDispatchedToWorkerA(tj).Obj()
}

// trainJobWorkload is TrainJob tj's Workload trainjob-tj (UID wl-uid), controlled by tj
// and admitted on gpu an hour before testNow.
func trainJobWorkload(tj *trainer.TrainJob) *wrappers.WorkloadWrapper {
	return wrappers.MakeWorkload("trainjob-"+tj.Name, tj.Namespace).UID("wl-uid").ControlledBy(tj, trainJobGVK).
		Admitted("gpu", testNow.Add(-time.Hour))
}

// trainJobDispatchedToWorkerA makes tj managed by MultiKueue and returns its Workload
// trainjob-tj, admitted an hour before testNow and dispatched to worker-a.
func trainJobDispatchedToWorkerA(tj *trainer.TrainJob) *wrappers.WorkloadWrapper {
	tj.Spec.ManagedBy = ptr.To(multikueue.ManagedBy)
	return trainJobWorkload(tj).DispatchedTo("worker-a")
}

// workerRead is the state of a worker whose records the manager reads.
var workerRead = multikueue.WorkerState{Configured: true, Synced: true}

// jobSetDispatch is what the worker role records of a child of JobSet js's copy,
// dispatched for the manager Workload jobset-js.
var jobSetDispatch = multikueue.Dispatch{Workload: "jobset-js", JobSet: "js"}

// jobSetRecords are the WorkerJobs the worker role writes of the children jobs of JobSet
// js's copy.
func jobSetRecords(jobs ...*batchv1.Job) []v1alpha1.WorkerJob {
	recs := make([]v1alpha1.WorkerJob, 0, len(jobs))
	for _, j := range jobs {
		recs = append(recs, *multikueue.NewJobRecord(j, jobSetDispatch))
	}
	return recs
}

// readWorkerA is worker-a read, holding the records recs.
func readWorkerA(recs ...v1alpha1.WorkerJob) fakeWorkers {
	return fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": workerRead}, jobs: map[string][]v1alpha1.WorkerJob{"worker-a": recs}}
}

// completedChild is child idx of JobSet js's copy, Complete, of UID uid, created at
// created (left unset when zero).
func completedChild(idx int, uid string, created time.Time) *batchv1.Job {
	return childAt(workerChild("js", idx, 0, "0-1"), uid, created)
}

// childAt gives the worker child Job j the UID uid and, unless zero, the creation time
// created, as a copy of its own makes it.
func childAt(j *batchv1.Job, uid string, created time.Time) *batchv1.Job {
	j.UID = types.UID(uid)
	if !created.IsZero() {
		j.CreationTimestamp = metav1.NewTime(created)
	}
	return j
}

// targetUIDs are the identities of st's targets, in order.
func targetUIDs(st v1alpha1.BatchAccountStatus) []types.UID {
	var uids []types.UID
	for _, ts := range st.Targets {
		uids = append(uids, ts.UID)
	}
	return uids
}

// followRunningChild builds the fixture of JobSet js (successPolicy All) whose child
// workers[0] completed on worker-a and workers[1] runs there, index 0 done; reconciles
// it with worker-a read and fails t unless the running child is the target's, 3 shards
// covered. It returns the fixture, the running child, worker-a read and the status.
func followRunningChild(t *testing.T) (*dispatchedJobSet, *batchv1.Job, fakeWorkers, v1alpha1.BatchAccountStatus) {
	t.Helper()
	c1 := workerChild("js", 1, 0, "0")
	read := readWorkerA(jobSetRecords(workerChild("js", 0, 0, "0-1"), c1)...)
	fx := newDispatchedJobSet(t, wrappers.MakeJobSet("js", "ns").SuccessPolicy(jobsetapi.OperatorAll), testNow.Add(-time.Hour))
	before := fx.reconcile(t, read).Status
	if before.Targets[1].UID != c1.UID || before.Shards.Covered != 3 {
		t.Fatalf("before: target %s uid %s, covered %d; want %s, 3", before.Targets[1].Name, before.Targets[1].UID, before.Shards.Covered, c1.UID)
	}
	return fx, c1, read, before
}

// endJobSet gives js the condition typ (JobSetCompleted, JobSetFailed) at testNow, as
// Kueue copies the worker's JobSet's end back.
func endJobSet(js *jobsetapi.JobSet, typ jobsetapi.JobSetConditionType, reason string) {
	js.Status.Conditions = []metav1.Condition{{Type: string(typ), Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(testNow)}}
}

// reconcileWorkers reconciles acct with r reading the worker records w tells, and
// returns acct as written.
func (f *fixture) reconcileWorkers(t *testing.T, r *Reconciler, w WorkerResults) *v1alpha1.BatchAccount {
	t.Helper()
	r.WorkerResults = w
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}); err != nil {
		t.Fatal(err)
	}
	return f.account(t, "acct")
}

// wantAccepted fails t unless st's Accepted condition is want ("True Accepted"), saying
// what ResultsAccepted says.
func wantAccepted(t *testing.T, st v1alpha1.BatchAccountStatus, want string) {
	t.Helper()
	if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != want {
		t.Errorf("Accepted = %q (%s), want %q", got, apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted).Message, want)
	}
}

// recordedResults are the results recorded in the chunks the fake API server holds,
// chunk by chunk.
func recordedResults(t *testing.T, c client.Client) []v1alpha1.RecordedResult {
	t.Helper()
	var got []v1alpha1.RecordedResult
	for _, ch := range chunksOf(t, c) {
		got = append(got, ch.Results...)
	}
	return got
}

// recordedPods are the pods (UIDs) of the results the account's chunks record, in
// recording order.
func recordedPods(t *testing.T, c client.Client) []string {
	t.Helper()
	got := recordedResults(t, c)
	slices.SortFunc(got, func(a, b v1alpha1.RecordedResult) int { return cmp.Compare(a.Sequence, b.Sequence) })
	var pods []string
	for _, rr := range got {
		pods = append(pods, string(rr.PodUID))
	}
	return pods
}

// workerRecordAt is the WorkerResult the worker role writes, for the manager Workload
// workload, of the pod of index idx of worker-a's copy of Job j, finished at finished
// with the termination message msg.
func workerRecordAt(workload string, idx int, msg string, finished time.Time) v1alpha1.WorkerResult {
	copyOfJ := wrappers.MakeJob("j", "ns").Indexed(2).UID("worker-j-uid").Obj()
	pod := wrappers.MakeIndexPod(copyOfJ, "j-"+string(rune('0'+idx)), idx).Succeeded(finished, msg).Obj()
	return *multikueue.NewRecord(pod, workload, "j", idx, finished)
}

// reconcile reconciles acct reading the worker records w tells, and returns acct as
// written.
func (d *dispatchedJobSet) reconcile(t *testing.T, w fakeWorkers) *v1alpha1.BatchAccount {
	t.Helper()
	return d.f.reconcileWorkers(t, d.r, w)
}

// end gives the JobSet the condition typ (JobSetCompleted, JobSetFailed), as Kueue copies
// the worker's JobSet's end back.
func (d *dispatchedJobSet) end(t *testing.T, typ jobsetapi.JobSetConditionType, reason string) {
	t.Helper()
	if err := d.f.c.Get(context.Background(), client.ObjectKeyFromObject(d.js), d.js); err != nil {
		t.Fatal(err)
	}
	endJobSet(d.js, typ, reason)
	if err := d.f.c.Update(context.Background(), d.js); err != nil {
		t.Fatal(err)
	}
}

// updateWorkload changes the Workload's status with change.
func (d *dispatchedJobSet) updateWorkload(t *testing.T, change func(*kueue.Workload)) {
	t.Helper()
	var w kueue.Workload
	if err := d.f.c.Get(context.Background(), client.ObjectKeyFromObject(d.wl), &w); err != nil {
		t.Fatal(err)
	}
	change(&w)
	if err := d.f.c.Status().Update(context.Background(), &w); err != nil {
		t.Fatal(err)
	}
}
