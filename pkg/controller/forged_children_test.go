package controller

import (
	"context"
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
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestForgedHeldChildNotFollowed: JobSet ts Failed, and its child ts-workers-0 covered
// 0-2 of 0-3; the account recorded it and is not Accepted. A namespace editor deletes the
// child (its end is recorded, so it goes at once) and makes a Job of their own that
// carries the child's labels, a later restart attempt, a controller reference to a
// JobSet named ts and the record finalizer, lets it complete 0-3 and deletes it. Such a
// Job being deleted is followed only when it is a child the JobSet could have made: of
// the child's name, controlled by the JobSet's UID. The account stays not Accepted, and
// the record controller does not hold the Job for it.
func TestForgedHeldChildNotFollowed(t *testing.T) {
	js := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
	js.UID = "ts-uid"
	js.Status.Conditions = []metav1.Condition{{Type: string(jobset.JobSetFailed), Status: metav1.ConditionTrue, Reason: "Test",
		LastTransitionTime: metav1.NewTime(testNow.Add(-time.Hour))}}
	madeUp := js.DeepCopy()
	madeUp.UID = "made-up"
	forged := func(name string, owner *jobset.JobSet) *batchv1.Job {
		return wrappers.MakeJob(name, "ns").Indexed(4).UID(name+"-forged").JobSetChild(owner, "workers", 0, 99).
			Completed("0-3", 4).Complete(testNow.Add(-time.Minute)).Finalizers(v1alpha1.RecordFinalizer).Deleting(testNow.Add(-time.Second)).Obj()
	}
	cases := []struct {
		name string
		job  *batchv1.Job
	}{
		{"another name, the JobSet's UID", forged("anything", js)},
		{"another name, a made-up UID", forged("anything", madeUp)},
		{"the child's name, a made-up UID", forged("ts-workers-0", madeUp)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("train", "ns").ShardCount("s", 4).AssignJobSet("ts", "workers", 0, "0-3", "0-3").
				TargetStatus(v1alpha1.TargetStatus{Name: "jobset/ts/workers/0", Job: "ts-workers-0", UID: "real-child-uid", Found: true,
					Completions: 4, CompletedIndexes: "0-2", Terminal: "Failed", Required: "0-3"}).Obj()
			f := newFixture(t, hooks{}, js, tc.job, ba)
			if _, err := f.reconcile("train"); err != nil {
				t.Fatal(err)
			}
			rec := &JobRecorder{Client: f.c, Now: func() time.Time { return testNow }}
			if _, err := rec.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.job)}); err != nil {
				t.Fatal(err)
			}
			var j batchv1.Job
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(tc.job), &j); err == nil {
				t.Errorf("the record controller holds the forged Job (finalizers %v)", j.Finalizers)
			}
			if _, err := f.reconcile("train"); err != nil {
				t.Fatal(err)
			}
			checkNotFollowed(t, f.account(t, "train"), tc.job.UID, "the forged Job")
		})
	}
}

// TestForgedChildGetsNoWorkload: an account names a namespace editor's own Job x, which
// carries JobSet vic's name label and a controller reference to vic (its UID is
// readable). x is no child of vic (JobSet would name it vic-<replicatedJob>-<index>):
// the account reports no admission of vic's as its own and publishes nothing on vic's
// Workload.
func TestForgedChildGetsNoWorkload(t *testing.T) {
	vic := wrappers.MakeJobSet("vic", "ns").Obj()
	vic.UID = "vic-uid"
	wl := wrappers.MakeWorkload("jobset-vic", "ns").UID("vic-wl").ForJobSet(vic).Admitted("h100-queue", testNow.Add(-time.Hour)).Obj()
	x := wrappers.MakeJob("x", "ns").Indexed(2).UID("x-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
		Label(jobset.JobSetNameKey, "vic").Label(jobset.ReplicatedJobNameKey, "zzz").Label(jobset.JobIndexKey, "0").
		ControlledBy(vic, jobset.SchemeGroupVersion.WithKind("JobSet")).Completed("0-1", 2).Complete(testNow).Obj()
	ba := wrappers.MakeBatchAccount("mine", "ns").Shards("A", "B").AssignJob("x", "0-1", "A", "B").Obj()
	f := newFixture(t, hooks{}, vic, wl, x, ba)
	checkWorkloadNotTaken(t, f, reconcileTwice(t, f, "mine"), wl)
}

// TestJobOfAChildNameAfterItsJobSetEnded: JobSet ts Failed, its child ts-workers-0
// covering 0-2 of 0-3, and the account is not Accepted. A namespace editor deletes the
// child (its end is recorded, so it goes at once) and creates a Job of its name, with its
// labels and a controller reference to ts's real UID (readable), which completes every
// index with outputs that pass the rule: the Job controller made its pods, so they are
// marked. A JobSet that ended creates no Job: the account never follows it, and neither
// the account nor the JobSet's Workload turns Accepted; also when the Job is made within
// kinds.ClockSkewAllowance of the end, which a child's creation may be taken for before
// it, at the restart attempt of the child followed or one the JobSet never reached.
func TestJobOfAChildNameAfterItsJobSetEnded(t *testing.T) {
	ended := testNow.Add(-time.Hour)
	for _, tc := range []struct {
		name    string
		created time.Time
		attempt int
	}{
		{"half an hour after the end", ended.Add(30 * time.Minute), 0},
		{"within the clock skew allowance of the end", ended.Add(30 * time.Second), 0},
		{"within the clock skew allowance, of an attempt the JobSet never reached", ended.Add(30 * time.Second), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
			js.UID = "ts-uid"
			js.Status.Conditions = []metav1.Condition{{Type: string(jobset.JobSetFailed), Status: metav1.ConditionTrue, Reason: "Test",
				LastTransitionTime: metav1.NewTime(ended)}}
			wl := wrappers.MakeWorkload("jobset-ts", "ns").UID("wl-uid").ForJobSet(js).Admitted("gpu", testNow.Add(-2*time.Hour)).Obj()
			ba := wrappers.MakeBatchAccount("train", "ns").ShardCount("s", 4).AssignJobSet("ts", "workers", 0, "0-3", "0-3").
				RequireResults("result.valid == result.records").
				TargetStatus(v1alpha1.TargetStatus{Name: "jobset/ts/workers/0", Job: "ts-workers-0", UID: "real-child-uid", Found: true,
					Completions: 4, CompletedIndexes: "0-2", Terminal: "Failed", Required: "0-3"}).Obj()
			forged := wrappers.MakeJob("ts-workers-0", "ns").Indexed(4).UID("forged-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).
				JobSetChild(js, "workers", 0, tc.attempt).Completed("0-3", 4).Complete(testNow.Add(-time.Minute)).Obj()
			forged.CreationTimestamp = metav1.NewTime(tc.created)
			objs := []client.Object{js, wl, ba, forged}
			objs = append(objs, reportedPods(t, forged, 4, testNow.Add(-2*time.Minute))...)
			f := newFixture(t, hooks{}, objs...)
			checkNotFollowed(t, reconcileTwice(t, f, "train"), forged.UID, "the Job created after its JobSet ended")
			var w kueue.Workload
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(wl), &w); err != nil {
				t.Fatal(err)
			}
			if c := apimeta.FindStatusCondition(w.Status.Conditions, v1alpha1.WorkloadConditionAccepted); c != nil && c.Status == metav1.ConditionTrue {
				t.Errorf("the JobSet's Workload shows %s=True: %s", c.Type, c.Message)
			}
		})
	}
}

// TestJobOfAChildNameAfterItsJobSetWasDeleted: JobSet ts Failed, its child ts-workers-0
// covering 0-2 of 0-3, and the account recorded it, not Accepted; then ts was deleted. A
// namespace editor creates a Job of the child's name, with its labels and a controller
// reference to a JobSet named ts (an apiVersion the garbage collector cannot resolve keeps
// it from deleting the Job), which completes every index with outputs that pass the rule:
// the Job controller made its pods, so they are marked. A JobSet that is gone creates no
// Job: the account keeps the child's record and does not turn Accepted.
func TestJobOfAChildNameAfterItsJobSetWasDeleted(t *testing.T) {
	js := wrappers.MakeJobSet("ts", "ns").Obj()
	js.UID = "ts-uid"
	ba := wrappers.MakeBatchAccount("train", "ns").ShardCount("s", 4).AssignJobSet("ts", "workers", 0, "0-3", "0-3").
		RequireResults("result.valid == result.records").
		TargetStatus(v1alpha1.TargetStatus{Name: "jobset/ts/workers/0", Job: "ts-workers-0", UID: "real-child-uid", Found: true,
			Completions: 4, CompletedIndexes: "0-2", Terminal: "Failed", Required: "0-3"}).Obj()
	forged := wrappers.MakeJob("ts-workers-0", "ns").Indexed(4).UID("forged-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).
		JobSetChild(js, "workers", 0, 0).Completed("0-3", 4).Complete(testNow.Add(-time.Minute)).Obj()
	forged.CreationTimestamp = metav1.NewTime(testNow.Add(-30 * time.Minute))
	objs := []client.Object{ba, forged}
	objs = append(objs, reportedPods(t, forged, 4, testNow.Add(-2*time.Minute))...)
	f := newFixture(t, hooks{}, objs...)
	checkNotFollowed(t, reconcileTwice(t, f, "train"), forged.UID, "the Job created after its JobSet was deleted")
}

// TestFailedChildWaitsForItsJobSet: a JobSet child that Failed while its JobSet runs (the
// JobSet's failure policy may restart it) leaves the batch AwaitingTermination, so that
// retention does not take an account whose next attempt may cover its shards, also once
// the restart deleted the child and has not created the next; once the JobSet records
// Failed, the child's failure stands.
func TestFailedChildWaitsForItsJobSet(t *testing.T) {
	js := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).MaxRestarts(3).Obj()
	js.UID = "ts-uid"
	child := wrappers.MakeJob("ts-workers-0", "ns").Indexed(4).UID("child-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
		JobSetChild(js, "workers", 0, 0).Completed("0-1", 2).Failed("BackoffLimitExceeded", testNow.Add(-time.Minute)).Obj()
	ba := wrappers.MakeBatchAccount("train", "ns").ShardCount("s", 4).AssignJobSet("ts", "workers", 0, "0-3", "0-3").Obj()
	f := newFixture(t, hooks{}, ba, js, child)
	if _, err := f.reconcile("train"); err != nil {
		t.Fatal(err)
	}
	term := apimeta.FindStatusCondition(f.account(t, "train").Status.Conditions, v1alpha1.ConditionTerminated)
	if term == nil || term.Status != metav1.ConditionFalse || term.Reason != v1alpha1.ReasonAwaitingTermination {
		t.Fatalf("Terminated while the JobSet may restart its failed child = %+v; want False/%s", term, v1alpha1.ReasonAwaitingTermination)
	}

	// A restart deletes the failed child before it creates the next: its failure is no
	// more final while the JobSet runs.
	if err := f.c.Delete(context.Background(), child); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reconcile("train"); err != nil {
		t.Fatal(err)
	}
	term = apimeta.FindStatusCondition(f.account(t, "train").Status.Conditions, v1alpha1.ConditionTerminated)
	if term == nil || term.Status != metav1.ConditionFalse || term.Reason != v1alpha1.ReasonAwaitingTermination {
		t.Fatalf("Terminated once the running JobSet deleted its failed child = %+v; want False/%s", term, v1alpha1.ReasonAwaitingTermination)
	}

	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(js), js); err != nil {
		t.Fatal(err)
	}
	js.Status.Conditions = []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue, Reason: "ReachedMaxRestarts", LastTransitionTime: metav1.NewTime(testNow)}}
	if err := f.c.Update(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reconcile("train"); err != nil {
		t.Fatal(err)
	}
	term = apimeta.FindStatusCondition(f.account(t, "train").Status.Conditions, v1alpha1.ConditionTerminated)
	if term == nil || term.Status != metav1.ConditionTrue || term.Reason != v1alpha1.ReasonTargetFailed {
		t.Errorf("Terminated once the JobSet Failed = %+v; want True/%s", term, v1alpha1.ReasonTargetFailed)
	}
}

// TestForgedChildOfAbsentJobSetGetsNoWorkload: a namespace editor makes a Job evil-w-0,
// named and labelled as child 0 of replicatedJob w of a JobSet evil that does not exist,
// with a controller reference to JobSet evil that carries the UID of JobSet vic (readable;
// an apiVersion the garbage collector cannot resolve keeps it), runs it outside Kueue and
// names it in an account of their own; or a Job claiming a child vic lacks, its reference
// naming vic itself. Nothing of vic ran. The account's Job is no child of vic, so vic's
// Workload is none of the account's: it must carry no verdict of it, least of all
// Accepted=True.
func TestForgedChildOfAbsentJobSetGetsNoWorkload(t *testing.T) {
	// absent is the editor's Job evil-w-0: child 0 of replicatedJob w of a JobSet evil that
	// does not exist, its controller reference naming evil with vic's UID.
	absent := func(vic *jobset.JobSet) *batchv1.Job {
		return forgedChild("evil", "w", vic.UID, v1alpha1.ScopeCoverage, testNow)
	}
	// lacking is the editor's Job vic-zzz-0: child 0 of a replicatedJob zzz vic does not
	// have, its controller reference naming vic by its real name and UID (both readable).
	// vic lacks that child (jobset.Lacks), so the Job is none of vic's.
	lacking := func(vic *jobset.JobSet) *batchv1.Job {
		return wrappers.MakeJob("vic-zzz-0", "ns").Indexed(2).UID("x-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
			Label(jobset.JobSetNameKey, "vic").Label(jobset.ReplicatedJobNameKey, "zzz").Label(jobset.JobIndexKey, "0").
			ControlledBy(vic, jobset.SchemeGroupVersion.WithKind("JobSet")).Completed("0-1", 2).Complete(testNow).Obj()
	}
	for _, tc := range []struct {
		name   string
		forged func(vic *jobset.JobSet) *batchv1.Job
		label  bool
	}{
		{name: "the Workload from the cache", forged: absent},
		// As Kueue labels every Workload it makes (kueue.x-k8s.io/job-uid): the Workload
		// the cache's filter refused must not come back through the read of the API
		// server that looks for a Workload not cached yet.
		{name: "the Workload labelled with vic's UID, read from the API server", forged: absent, label: true},
		{name: "a child vic lacks, its reference naming vic itself", forged: lacking},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vic := wrappers.MakeJobSet("vic", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
			vic.UID = "vic-uid"
			w := wrappers.MakeWorkload("jobset-vic", "ns").UID("vic-wl").ForJobSet(vic).Admitted("h100-queue", testNow.Add(-time.Hour))
			if tc.label {
				w = w.Label(kueueconstants.JobUIDLabel, string(vic.UID))
			}
			wl := w.Obj()
			x := tc.forged(vic)
			ba := wrappers.MakeBatchAccount("mine", "ns").Shards("A", "B").AssignJob(x.Name, "0-1", "A", "B").Obj()
			f := newFixture(t, hooks{}, vic, wl, x, ba)
			checkWorkloadNotTaken(t, f, reconcileTwice(t, f, "mine"), wl)
		})
	}
}

// reconcileTwice reconciles the account name twice, the second pass publishing on a
// Workload what the first recorded, and returns the account as it stands then.
func reconcileTwice(t *testing.T, f *fixture, name string) *v1alpha1.BatchAccount {
	t.Helper()
	for range 2 {
		if _, err := f.reconcile(name); err != nil {
			t.Fatal(err)
		}
	}
	return f.account(t, name)
}

// forgedJobSet is a namespace editor's JobSet of TrainJob tj's name, of UID
// forged-js-uid and controlled by tj's real UID, with no replicatedJob: add them on the
// wrapper.
func forgedJobSet(tj *trainer.TrainJob) *wrappers.JobSetWrapper {
	return jobSetOf(tj, "forged-js-uid")
}

// checkNotFollowed fails t when ba follows the Job of uid (job names it in the error)
// or is Accepted=True.
func checkNotFollowed(t *testing.T, ba *v1alpha1.BatchAccount, uid types.UID, job string) {
	t.Helper()
	for _, ts := range ba.Status.Targets {
		if ts.UID == uid {
			t.Errorf("the account follows %s: %+v", job, ts)
		}
	}
	if c := apimeta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionAccepted); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("Accepted=True (%s) from a Job the JobSet never created", c.Message)
	}
}

// checkWorkloadNotTaken fails t when ba, of one target, took the JobSet vic's Workload wl
// for its Job's, or wl carries ba's verdict (Accepted, ShardsCovered).
func checkWorkloadNotTaken(t *testing.T, f *fixture, ba *v1alpha1.BatchAccount, wl *kueue.Workload) {
	t.Helper()
	if st := ba.Status; len(st.Targets) != 1 || st.Targets[0].Workload != nil {
		t.Errorf("the account took vic's Workload for its Job's: %+v", st.Targets)
	}
	var got kueue.Workload
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(wl), &got); err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Status.Conditions {
		if c.Type == v1alpha1.WorkloadConditionAccepted || c.Type == v1alpha1.WorkloadConditionShardsCovered {
			t.Errorf("vic's Workload carries the account's verdict: %s=%s %s", c.Type, c.Status, c.Message)
		}
	}
}

// TestJobOfAChildNameOfADispatchedOwner: JobSet js (or TrainJob tj) is dispatched by
// MultiKueue to worker-a, so no child Job of it exists on the manager, and its Workload
// is admitted there. A namespace editor of the manager creates, while it runs on the
// worker, a Job of a child's name with the child's labels and a controller reference to
// the JobSet's real UID (for the TrainJob, to a JobSet of their own that names the
// TrainJob's real UID as its controller), which the manager's Job controller runs to
// completion with outputs that pass the rule, before the owner's end is copied back.
// Nothing on the manager is a child of a dispatched owner: the account follows the children the worker recorded, never that
// Job, and neither it nor the owner's Workload turns Accepted.
func TestJobOfAChildNameOfADispatchedOwner(t *testing.T) {
	for _, tc := range []struct {
		name     string
		trainJob bool
	}{
		{name: "JobSet"},
		{name: "TrainJob", trainJob: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("train", "ns").ShardCount("s", 2).RequireResults("result.valid == result.records")
			var objs []client.Object
			var owner *jobset.JobSet
			var wl *kueue.Workload
			if tc.trainJob {
				tj := makeTJ().Obj()
				wl = trainJobDispatchedToWorkerA(tj).Obj()
				owner = forgedJobSet(tj).Obj()
				ba = ba.AssignTrainJob("tj", "workers", 0, "0-1", "0-1")
				objs = append(objs, tj, owner)
			} else {
				owner = wrappers.MakeJobSet("js", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(1).Obj()).Obj()
				owner.UID, owner.Spec.ManagedBy = "js-uid", ptr.To(multikueue.ManagedBy)
				// Its end on the worker, which Kueue copies back.
				owner.Status.Conditions = []metav1.Condition{{Type: string(jobset.JobSetCompleted), Status: metav1.ConditionTrue, Reason: "AllJobsCompleted",
					LastTransitionTime: metav1.NewTime(testNow)}}
				wl = wrappers.MakeWorkload("jobset-js", "ns").UID("wl-uid").ForJobSet(owner).Admitted("gpu", testNow.Add(-time.Hour)).DispatchedTo("worker-a").Obj()
				ba = ba.AssignJobSet("js", "workers", 0, "0-1", "0-1")
				objs = append(objs, owner)
			}
			forged := wrappers.MakeJob(owner.Name+"-workers-0", "ns").Indexed(2).UID("forged-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).
				JobSetChild(owner, "workers", 0, 0).Completed("0-1", 2).Complete(testNow.Add(-time.Minute)).Obj()
			forged.CreationTimestamp = metav1.NewTime(testNow.Add(-30 * time.Minute))
			objs = append(objs, wl, ba.Obj(), forged)
			objs = append(objs, reportedPods(t, forged, 2, testNow.Add(-2*time.Minute))...)
			f := newFixture(t, hooks{}, objs...)
			r := f.reconciler()
			r.WorkerResults = fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": {Configured: true, Synced: true}}}
			for range 2 {
				if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "train"}}); err != nil {
					t.Fatal(err)
				}
			}
			checkNotFollowed(t, f.account(t, "train"), forged.UID, "a Job on the manager of a dispatched owner's child name")
			var w kueue.Workload
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(wl), &w); err != nil {
				t.Fatal(err)
			}
			if c := apimeta.FindStatusCondition(w.Status.Conditions, v1alpha1.WorkloadConditionAccepted); c != nil && c.Status == metav1.ConditionTrue {
				t.Errorf("the dispatched owner's Workload shows %s=True: %s", c.Type, c.Message)
			}
		})
	}
}

// TestJobSetOfADispatchedTrainJobsNameEndsNothing: TrainJob tj is dispatched by MultiKueue
// to worker-a, where Trainer renders its JobSet and child workers[0] runs. A namespace
// editor of the manager creates a JobSet of tj's name controlled by tj's real UID, which
// lacks the replicatedJob (or has ended). Trainer renders a dispatched TrainJob's JobSet
// on the worker only: that JobSet says nothing of tj's children, which are neither never
// created nor deleted before they terminated while tj runs.
func TestJobSetOfADispatchedTrainJobsNameEndsNothing(t *testing.T) {
	tj := makeTJ().Obj()
	wl := trainJobDispatchedToWorkerA(tj).Obj()
	running := workerChild("tj", 0, 0, "0")
	d := multikueue.Dispatch{Workload: "trainjob-tj", JobSet: "tj", TrainJob: "tj"}
	for _, tc := range []struct {
		name    string
		js      *jobset.JobSet
		records []v1alpha1.WorkerJob
	}{
		{name: "lacking the replicatedJob, child not recorded yet", js: forgedJobSet(tj).Obj()},
		{name: "lacking the replicatedJob, child running", records: []v1alpha1.WorkerJob{*multikueue.NewJobRecord(running, d)},
			js: forgedJobSet(tj).Obj()},
		{name: "Failed, child running", records: []v1alpha1.WorkerJob{*multikueue.NewJobRecord(running, d)},
			js: func() *jobset.JobSet {
				js := forgedJobSet(tj).ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
				js.Status.Conditions = []metav1.Condition{{Type: string(jobset.JobSetFailed), Status: metav1.ConditionTrue, Reason: "Forged",
					LastTransitionTime: metav1.NewTime(testNow)}}
				return js
			}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("train", "ns").ShardCount("s", 2).AssignTrainJob("tj", "workers", 0, "0-1", "0-1").Obj()
			f := newFixture(t, hooks{}, tj.DeepCopy(), wl.DeepCopy(), tc.js, ba)
			r := f.reconciler()
			r.WorkerResults = fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": {Configured: true, Synced: true}},
				jobs: map[string][]v1alpha1.WorkerJob{"worker-a": tc.records}}
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "train"}}); err != nil {
				t.Fatal(err)
			}
			st := f.account(t, "train").Status
			if len(tc.records) > 0 && (len(st.Targets) != 1 || !st.Targets[0].Found || st.Targets[0].Deleted) {
				t.Errorf("targets %+v, want the running worker child followed as found", st.Targets)
			}
			for _, c := range st.Conditions {
				for _, lie := range []string{"never created", "deleted before it terminated", "deleted before terminating"} {
					if strings.Contains(c.Message, lie) {
						t.Errorf("%s=%s %s says %q: the TrainJob runs on worker-a", c.Type, c.Status, c.Reason, c.Message)
					}
				}
			}
		})
	}
}
