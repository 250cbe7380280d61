package batchledger

import (
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestJobDeletedWhileTheManagerIsDownKeepsItsRecord: the manager is stopped while a Job
// with ttlSecondsAfterFinished: 0 runs its last index; the real TTL controller deletes it
// the moment it completes. batchledger's record finalizer, given to the Job by the webhook
// at creation, keeps it Terminating with its final status until the manager is back: the
// account records it Complete, not "deleted before it terminated", then the finalizer
// goes and so does the Job. A Job no account names never gets the finalizer.
func TestJobDeletedWhileTheManagerIsDownKeepsItsRecord(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	f.Create(wrappers.MakeBatchAccount("down", f.Namespace).Shards("A", "B").AssignJob("j", "0-1", "A", "B").Obj())
	waitAccount(t, f, "down", "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool { return len(ba.Status.Conditions) > 0 })
	job := wrappers.MakeJob("j", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
	job.Spec.TTLSecondsAfterFinished = ptr.To(int32(0))
	f.Create(job)
	// Nobody names this one: it runs as if batchledger were not installed.
	free := wrappers.MakeJob("free", f.Namespace).Indexed(1).Queue("default").GPU(1).Obj()
	f.Create(free)
	job = jobStatus(t, f, "j")
	if !slices.Contains(job.Finalizers, v1alpha1.RecordFinalizer) {
		t.Fatalf("job j finalizers %v: the Job webhook did not give it %s", job.Finalizers, v1alpha1.RecordFinalizer)
	}
	framework.RunningPods(t, job, 2)
	framework.FinishIndexPod(t, job, 0, 0, "")
	waitAccount(t, f, "down", "index 0 covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 1 })

	framework.StopBatchledger(t)
	framework.FinishIndexPod(t, job, 1, 0, "")
	framework.WaitFor(t, job, framework.DefaultTimeout, "Complete and deleted by its TTL, held Terminating", func(j *batchv1.Job) bool {
		return j.DeletionTimestamp != nil && apimeta.IsStatusConditionTrue(jobConds(j), string(batchv1.JobComplete))
	})
	// Long enough for a Job without the finalizer to be gone for good.
	time.Sleep(2 * time.Second)
	if err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}); err != nil {
		t.Fatalf("job j while the manager is down: %v; want it held Terminating", err)
	}
	framework.StartBatchledger(t)

	framework.Eventually(t, framework.DefaultTimeout, "job j released and gone", func() (bool, string, error) {
		var j batchv1.Job
		err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(job), &j)
		if err == nil {
			return false, "still there, finalizers " + joinFinalizers(j.Finalizers), nil
		}
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	got := waitAccount(t, f, "down", "the deleted Job's record", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/j")
		return tg != nil && tg.Deleted
	})
	tg := target(got, "job/j")
	if tg.UID != job.UID || tg.Terminal != string(batchv1.JobComplete) || tg.CompletedIndexes != "0,1" || got.Status.Shards.Covered != 2 {
		t.Errorf("record: uid %s terminal %q completed %q, covered %d; want %s, Complete, 0,1, 2", tg.UID, tg.Terminal, tg.CompletedIndexes, got.Status.Shards.Covered, job.UID)
	}
	if ok, state := condIs(got.Status.Conditions, v1alpha1.ConditionTerminated, metav1.ConditionTrue, ""); !ok {
		t.Errorf("Terminated after the restart: %s; want True, not TargetDeleted", state)
	}
	if ok, state := condIs(got.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted); !ok {
		t.Errorf("after the restart: %s", state)
	}

	f.Get(free)
	if slices.Contains(free.Finalizers, v1alpha1.RecordFinalizer) {
		t.Errorf("job free, named by no account, carries %s: %v", v1alpha1.RecordFinalizer, free.Finalizers)
	}
}

// TestJobUnlabelledWhileTheManagerIsDownIsNotHeldForGood: while the manager is stopped,
// a held Job's scope label is taken off, the account naming it is deleted and so is the
// Job: the record finalizer keeps it Terminating. The manager's cache holds only labelled
// Jobs and no account is left to name it, so no event brings it to the next leader: the
// leader, as it starts, finds the held Jobs without the label and releases this one, and
// the Job goes.
func TestJobUnlabelledWhileTheManagerIsDownIsNotHeldForGood(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	acct := wrappers.MakeBatchAccount("unlabelled", f.Namespace).Shards("A", "B").AssignJob("j", "0-1", "A", "B").Obj()
	f.Create(acct)
	waitAccount(t, f, "unlabelled", "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool { return len(ba.Status.Conditions) > 0 })
	job := wrappers.MakeJob("j", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
	f.Create(job)
	job = jobStatus(t, f, "j")
	if !slices.Contains(job.Finalizers, v1alpha1.RecordFinalizer) {
		t.Fatalf("job j finalizers %v: the Job webhook did not give it %s", job.Finalizers, v1alpha1.RecordFinalizer)
	}

	framework.StopBatchledger(t)
	unlabel := []byte(`{"metadata":{"labels":{"` + v1alpha1.LabelScope + `":null}}}`)
	if err := f.Client.Patch(f.Ctx, job.DeepCopy(), client.RawPatch("application/merge-patch+json", unlabel)); err != nil {
		t.Fatal(err)
	}
	if err := f.Client.Delete(f.Ctx, acct); err != nil {
		t.Fatal(err)
	}
	if err := f.Client.Delete(f.Ctx, job.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	// Long enough for a Job without the finalizer to be gone for good.
	time.Sleep(2 * time.Second)
	var held batchv1.Job
	if err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(job), &held); err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("job j while the manager is down: %v, deletion %v; want it held Terminating", err, held.DeletionTimestamp)
	}
	framework.StartBatchledger(t)

	framework.Eventually(t, framework.DefaultTimeout, "job j released and gone", func() (bool, string, error) {
		var j batchv1.Job
		err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(job), &j)
		if err == nil {
			return false, "still there, finalizers " + joinFinalizers(j.Finalizers) + ", labels " + fmt.Sprint(j.Labels), nil
		}
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
}

// TestJobSetRestartWhileTheManagerIsDownKeepsTheChildsCoverage: a JobSet child covers
// index 0 while the manager runs and index 1 once it is stopped; then its sibling fails
// and the JobSet restarts, deleting both. The record finalizer holds them Terminating (the
// restart waits to recreate them) until the manager is back and observes them: history
// keeps the child's final coverage 0-1, not the 0 it had seen, and the new attempt comes.
func TestJobSetRestartWhileTheManagerIsDownKeepsTheChildsCoverage(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "16")
	worker := wrappers.MakeJob("", "").Indexed(4).Parallelism(4).GPU(1).BackoffLimit(0).Obj()
	js := wrappers.MakeJobSet("train", f.Namespace).Queue("default").MaxRestarts(1).
		ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Job(worker).Obj()).Obj()
	f.Create(js)
	f.Create(wrappers.MakeBatchAccount("train", f.Namespace).ShardCount("s", 8).
		AssignJobSet("train", "workers", 0, "0-3", "0-3").AssignJobSet("train", "workers", 1, "0-3", "4-7").Obj())
	w0, w1 := childJob(t, f, "train-workers-0", ""), childJob(t, f, "train-workers-1", "")
	// The children may come before their account: the controller gives them the finalizer
	// when the account comes (the webhook did when the account was first).
	for _, w := range []*batchv1.Job{w0, w1} {
		framework.WaitFor(t, w, framework.DefaultTimeout, "held for its record", func(j *batchv1.Job) bool {
			return slices.Contains(j.Finalizers, v1alpha1.RecordFinalizer)
		})
	}
	framework.RunningPods(t, w0, 4)
	framework.RunningPods(t, w1, 4)
	framework.FinishIndexPod(t, w0, 0, 0, "")
	waitAccount(t, f, "train", "1/8 covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 1 })

	framework.StopBatchledger(t)
	framework.FinishIndexPod(t, w0, 1, 0, "")
	framework.WaitFor(t, w0, framework.DefaultTimeout, "workers-0 counted index 1", func(j *batchv1.Job) bool { return j.Status.CompletedIndexes == "0,1" })
	framework.FinishIndexPod(t, w1, 0, 1, "") // backoffLimit 0: workers-1 fails, the JobSet restarts
	framework.WaitFor(t, w0, framework.DefaultTimeout, "workers-0 deleted by the restart, held", func(j *batchv1.Job) bool { return j.DeletionTimestamp != nil })
	framework.StartBatchledger(t)

	ba := waitAccount(t, f, "train", "workers-0's old identity in history", func(ba *v1alpha1.BatchAccount) bool {
		return slices.ContainsFunc(ba.Status.History, func(h v1alpha1.SupersededIdentity) bool { return h.UID == w0.UID })
	})
	for _, h := range ba.Status.History {
		if h.UID == w0.UID && h.CompletedIndexes != "0,1" {
			t.Errorf("history keeps workers-0 with %q; want its final 0,1", h.CompletedIndexes)
		}
	}
	childJob(t, f, "train-workers-0", w0.UID) // the restart went on
}

func joinFinalizers(f []string) string {
	if len(f) == 0 {
		return "none"
	}
	out := f[0]
	for _, s := range f[1:] {
		out += ", " + s
	}
	return out
}

// TestChildOfAReplacedJobSetIsReleased: a JobSet is deleted with background propagation
// and applied again at once (as kubectl replace --force does) while its child runs, and
// the child completes one more index than the account last recorded. The account now
// follows the new JobSet's children only and never records the old child's end, so the
// record finalizer must not hold it (for MaxHold, an hour): the old child goes within
// seconds of the manager's start, the new JobSet creates the child of that name, and the
// account follows it.
//
// The manager is stopped from the index's completion to the replacement so that the
// account cannot record the old child's final indexes first, which would release it
// anyway: the scenario is a replacement the account has not caught up with.
func TestChildOfAReplacedJobSetIsReleased(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	makeJobSet := func() *jobset.JobSet {
		worker := wrappers.MakeJob("", "").Indexed(3).Parallelism(3).GPU(1).BackoffLimit(0).Obj()
		return wrappers.MakeJobSet("rep", f.Namespace).Queue("default").
			ReplicatedJob(wrappers.MakeReplicatedJob("w").Job(worker).Obj()).Obj()
	}
	f.Create(wrappers.MakeBatchAccount("rep", f.Namespace).ShardCount("s", 3).AssignJobSet("rep", "w", 0, "0-2", "0-2").Obj())
	waitAccount(t, f, "rep", "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool { return len(ba.Status.Conditions) > 0 })
	js := makeJobSet()
	f.Create(js)
	old := childJob(t, f, "rep-w-0", "")
	framework.WaitFor(t, old, framework.DefaultTimeout, "held for its record", func(j *batchv1.Job) bool {
		return slices.Contains(j.Finalizers, v1alpha1.RecordFinalizer)
	})
	framework.RunningPods(t, old, 3)
	framework.FinishIndexPod(t, old, 0, 0, "")
	waitAccount(t, f, "rep", "index 0 of the old child recorded", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "jobset/rep/w/0")
		return tg != nil && tg.UID == old.UID && tg.CompletedIndexes == "0"
	})

	framework.StopBatchledger(t)
	framework.FinishIndexPod(t, old, 1, 0, "")
	framework.WaitFor(t, old, framework.DefaultTimeout, "old child counted index 1", func(j *batchv1.Job) bool { return j.Status.CompletedIndexes == "0,1" })
	if err := f.Client.Delete(f.Ctx, js, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	replacement := makeJobSet()
	framework.Eventually(t, framework.DefaultTimeout, "JobSet rep applied again", func() (bool, string, error) {
		err := f.Client.Create(f.Ctx, replacement)
		if apierrors.IsAlreadyExists(err) {
			return false, "the old JobSet is still there", nil
		}
		return err == nil, "", err
	})
	// The garbage collector deletes the old child; the record finalizer keeps it.
	framework.WaitFor(t, old, framework.DefaultTimeout, "old child deleted, held", func(j *batchv1.Job) bool { return j.DeletionTimestamp != nil })
	framework.StartBatchledger(t)

	started := time.Now()
	framework.Eventually(t, 30*time.Second, "old child released and gone", func() (bool, string, error) {
		var j batchv1.Job
		err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(old), &j)
		if err == nil && j.UID == old.UID {
			return false, "still there, finalizers " + joinFinalizers(j.Finalizers), nil
		}
		return err == nil || apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	t.Logf("old child gone %v after the manager started", time.Since(started).Round(100*time.Millisecond))

	child := childJob(t, f, "rep-w-0", old.UID)
	if !metav1.IsControlledBy(child, replacement) {
		t.Fatalf("child rep-w-0 %s is controlled by %v; want the replacement JobSet %s", child.UID, child.OwnerReferences, replacement.UID)
	}
	waitAccount(t, f, "rep", "the account follows the new child", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "jobset/rep/w/0")
		return tg != nil && tg.UID == child.UID
	})
}
