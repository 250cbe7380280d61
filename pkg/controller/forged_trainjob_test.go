package controller

import (
	"context"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	jobsetkind "batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestForgedChildOfTrainJobGetsNoWorkload: TrainJob vic is queued (its Workload,
// controlled by the TrainJob, admitted), and Trainer has rendered its JobSet vic or not
// yet. A namespace editor makes a Job vic-node-0, named and labelled as child 0 of
// replicatedJob node of a JobSet vic, with a controller reference to a JobSet vic that
// carries the TrainJob's UID (readable; an apiVersion the garbage collector cannot
// resolve keeps the Job), runs it outside Kueue and names it in an account of their own
// by its Job name. A JobSet and its TrainJob share a name, never a UID: the Job is no
// child of anything of vic's, so vic's Workload is none of the account's and must carry
// no verdict of it.
func TestForgedChildOfTrainJobGetsNoWorkload(t *testing.T) {
	for _, tc := range []struct {
		name     string
		label    bool
		rendered bool
	}{
		{name: "the Workload from the cache"},
		// Kueue labels every Workload it makes with its owner's UID: the read of the API
		// server for a Workload not cached yet must not take it either.
		{name: "the Workload labelled with vic's UID, read from the API server", label: true},
		{name: "Trainer rendered JobSet vic since", rendered: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vic := wrappers.MakeTrainJob("vic", "ns", "torch-distributed").UID("vic-uid").Obj()
			w := wrappers.MakeWorkload("trainjob-vic", "ns").UID("vic-wl").
				ControlledBy(vic, trainJobGVK).Admitted("h100-queue", testNow.Add(-time.Hour))
			if tc.label {
				w = w.Label(kueueconstants.JobUIDLabel, string(vic.UID))
			}
			wl := w.Obj()
			// The JobSet vic the editor's reference names does not exist, and its UID is
			// the TrainJob's.
			x := forgedChild("vic", "node", vic.UID, v1alpha1.ScopeCoverage, testNow)
			ba := wrappers.MakeBatchAccount("mine", "ns").Shards("A", "B").AssignJob(x.Name, "0-1", "A", "B").Obj()
			objs := []client.Object{vic, wl, x, ba}
			if tc.rendered {
				objs = append(objs, jobSetOf(vic, "vic-js-uid").ReplicatedJob(wrappers.MakeReplicatedJob("node").Obj()).Obj())
			}
			f := newFixture(t, hooks{}, objs...)
			checkWorkloadNotTaken(t, f, reconcileTwice(t, f, "mine"), wl)
		})
	}
}

// TestChildOfAnAbsentOwnerNotFollowed: an account names child 0 of replicatedJob node of
// JobSet vic (or of the JobSet TrainJob vic renders), neither of which exists yet. A
// namespace editor makes a Job vic-node-0 with the child's labels and a controller
// reference to a JobSet vic (an apiVersion the garbage collector cannot resolve keeps
// it), which the Job controller runs to completion with outputs that pass the rule, so
// its pods are marked. Nothing of vic ran: the account does not follow the Job, is not
// Accepted, and waits for vic.
func TestChildOfAnAbsentOwnerNotFollowed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		trainJob bool
	}{
		{name: "JobSet"},
		{name: "TrainJob", trainJob: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := forgedChild("vic", "node", "unknown-uid", v1alpha1.ScopeResults, testNow.Add(-time.Minute))
			ba := wrappers.MakeBatchAccount("train", "ns").ShardCount("s", 2).RequireResults("result.valid == result.records")
			if tc.trainJob {
				ba = ba.AssignTrainJob("vic", "node", 0, "0-1", "0-1")
			} else {
				ba = ba.AssignJobSet("vic", "node", 0, "0-1", "0-1")
			}
			objs := []client.Object{x, ba.Obj()}
			objs = append(objs, reportedPods(t, x, 2, testNow.Add(-2*time.Minute))...)
			f := newFixture(t, hooks{}, objs...)
			got := reconcileTwice(t, f, "train")
			checkNotFollowed(t, got, x.UID, "a Job of the child's name of an owner never there")
			if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionShardsCovered); c == nil || c.Reason != v1alpha1.ReasonTargetsNotFound {
				t.Errorf("ShardsCovered = %+v, want the account waiting for vic (%s)", c, v1alpha1.ReasonTargetsNotFound)
			}
		})
	}
}

// TestJobMadeBeforeItsTrainJobNotFollowed: a namespace editor makes Job vic-node-0, with
// the labels of child 0 of replicatedJob node of a JobSet vic and a controller reference
// to a JobSet vic (an apiVersion the garbage collector cannot resolve keeps it), and the
// Job controller runs it to completion with outputs that pass the rule. An hour later
// TrainJob vic is created, and an account names its child; Trainer has not rendered
// JobSet vic (it cannot create its child under a name taken), and vic is deleted in the
// end. No child of vic exists before vic does: the account never follows the Job and is
// not Accepted, while vic exists or once it is gone.
func TestJobMadeBeforeItsTrainJobNotFollowed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		deleted bool
	}{
		{name: "TrainJob vic waiting for its JobSet"},
		{name: "TrainJob vic deleted since", deleted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vic := wrappers.MakeTrainJob("vic", "ns", "torch-distributed").UID("vic-uid").Obj()
			vic.CreationTimestamp = metav1.NewTime(testNow.Add(-10 * time.Minute))
			x := forgedChild("vic", "node", "unknown-uid", v1alpha1.ScopeResults, testNow.Add(-time.Hour))
			x.CreationTimestamp = metav1.NewTime(testNow.Add(-2 * time.Hour))
			ba := wrappers.MakeBatchAccount("train", "ns").ShardCount("s", 2).RequireResults("result.valid == result.records").
				AssignTrainJob("vic", "node", 0, "0-1", "0-1").Obj()
			objs := []client.Object{vic, x, ba}
			objs = append(objs, reportedPods(t, x, 2, testNow.Add(-90*time.Minute))...)
			f := newFixture(t, hooks{}, objs...)
			got := reconcileTwice(t, f, "train")
			if tc.deleted {
				if err := f.c.Delete(context.Background(), vic); err != nil {
					t.Fatal(err)
				}
				got = reconcileTwice(t, f, "train")
			}
			checkNotFollowed(t, got, x.UID, "a Job made before its TrainJob")
		})
	}
}

// TestJobOfAChildNameAboutItsTrainJobsEnd: TrainJob tj Failed an hour ago, as its JobSet
// did (Trainer copies the JobSet's failure), its child tj-node-0 covering index 0 of
// 0-1; the account recorded it, not Accepted. A namespace editor deletes the child (its
// end is recorded, so it goes at once) and, 30 s after the end (within
// kinds.ClockSkewAllowance, which a child's creation is allowed after its JobSet's end),
// creates a Job of its name, labels and controller reference (the JobSet's UID), at the
// child's restart attempt or one the JobSet never reached, which completes every index
// with outputs that pass the rule. The JobSet that ended makes no child: the account
// does not follow the Job and is not Accepted, with or without tj's Workload.
func TestJobOfAChildNameAboutItsTrainJobsEnd(t *testing.T) {
	ended := testNow.Add(-time.Hour)
	for _, tc := range []struct {
		name     string
		attempt  string
		workload bool
	}{
		{name: "the child's attempt", attempt: "0"},
		{name: "the child's attempt, tj's Workload admitted", attempt: "0", workload: true},
		{name: "an attempt the JobSet never reached", attempt: "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRenderedTrainJob()
			r.tj.Status.Conditions = []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.NewTime(ended)}}
			js := r.jobSet("js-uid", testNow.Add(-3*time.Hour))
			js.Status.Conditions = []metav1.Condition{{Type: string(jobsetapi.JobSetFailed), Status: metav1.ConditionTrue, Reason: "Test",
				LastTransitionTime: metav1.NewTime(ended)}}
			ba := wrappers.MakeBatchAccount("train", "ns").ShardCount("s", 2).AssignTrainJob("tj", "node", 0, "0-1", "0-1").
				RequireResults("result.valid == result.records").
				TargetStatus(v1alpha1.TargetStatus{Name: "trainjob/tj/node/0", Job: "tj-node-0", UID: "real-child-uid", Found: true,
					Completions: 2, CompletedIndexes: "0", Terminal: "Failed", Required: "0-1"}).Obj()
			forged := nodeChild(js, "forged-uid").Label(jobsetkind.LabelRestartAttempt, tc.attempt).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).
				Completed("0-1", 2).Complete(testNow.Add(-time.Minute)).Obj()
			forged.CreationTimestamp = metav1.NewTime(ended.Add(30 * time.Second))
			objs := []client.Object{r.tj, js, ba, forged}
			if tc.workload {
				objs = append(objs, r.workload().Admitted("gpu", testNow.Add(-2*time.Hour)).Obj())
			}
			objs = append(objs, reportedPods(t, forged, 2, testNow.Add(-2*time.Minute))...)
			f := newFixture(t, hooks{}, objs...)
			checkNotFollowed(t, reconcileTwice(t, f, "train"), forged.UID, "a Job made about its TrainJob's end")
		})
	}
}

// TestJobOfAChildNameOnceItsTrainJobsJobSetIsGone: TrainJob tj Failed at its deadline an
// hour ago and Trainer deleted its JobSet; the account recorded the child tj-node-0
// (index 0 of 0-1 covered), not Accepted. A namespace editor's Job of the child's name
// and labels, whose controller reference names a JobSet tj (a made-up UID, an apiVersion
// the garbage collector cannot resolve), completes every index with outputs that pass
// the rule: made 30 s after the end, or while the JobSet ran, in the name the editor
// took from the child by deleting it. With the JobSet gone no UID tells its children
// apart: the account follows only the child it followed, and is not Accepted.
func TestJobOfAChildNameOnceItsTrainJobsJobSetIsGone(t *testing.T) {
	ended := testNow.Add(-time.Hour)
	for _, tc := range []struct {
		name    string
		created time.Time
	}{
		{"made 30 s after the end", ended.Add(30 * time.Second)},
		{"made while the JobSet ran", ended.Add(-30 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ba := failedAtDeadline(ended)
			forged := forgedChild("tj", "node", "made-up-uid", v1alpha1.ScopeResults, testNow.Add(-time.Minute))
			forged.CreationTimestamp = metav1.NewTime(tc.created)
			objs := []client.Object{r.tj, ba, forged}
			objs = append(objs, reportedPods(t, forged, 2, testNow.Add(-2*time.Minute))...)
			f := newFixture(t, hooks{}, objs...)
			checkNotFollowed(t, reconcileTwice(t, f, "train"), forged.UID, "a Job of the child's name once the JobSet is gone")
		})
	}
}

// failedAtDeadline is TrainJob tj, Failed at its deadline at ended (its JobSet gone, as
// Trainer deletes it then), and account train, results required, that recorded tj's
// attempt-0 child real-child-uid Failed with index 0 of 0-1 covered.
func failedAtDeadline(ended time.Time) (renderedTrainJob, *v1alpha1.BatchAccount) {
	r := newRenderedTrainJob()
	r.tj.Status.Conditions = []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue, Reason: "DeadlineExceeded", LastTransitionTime: metav1.NewTime(ended)}}
	r.tj.Status.JobsStatus = []trainer.JobStatus{{Name: "node", Failed: ptr.To[int32](1)}}
	return r, wrappers.MakeBatchAccount("train", "ns").ShardCount("s", 2).AssignTrainJob("tj", "node", 0, "0-1", "0-1").
		RequireResults("result.valid == result.records").
		TargetStatus(v1alpha1.TargetStatus{Name: "trainjob/tj/node/0", Job: "tj-node-0", UID: "real-child-uid", Found: true,
			Completions: 2, CompletedIndexes: "0", Terminal: "Failed", Required: "0-1"}).Obj()
}

// TestRestartChildOnceItsTrainJobsJobSetIsGone: TrainJob tj's JobSet restarted after the
// account recorded the failed child of attempt 0 (index 0 of 0-1 covered), and the
// manager did not reconcile the account again until after tj Failed at its deadline and
// Trainer deleted the JobSet: the garbage collector deletes the child of attempt 1, which
// the record finalizer holds, with every index complete and reported. That child was
// made while the JobSet ran, under the controller reference JobSet writes: the account
// follows it, and its results are recorded, not lost.
func TestRestartChildOnceItsTrainJobsJobSetIsGone(t *testing.T) {
	ended := testNow.Add(-time.Hour)
	r, ba := failedAtDeadline(ended)
	restarted := nodeChild(r.jobSet("js-uid", testNow.Add(-3*time.Hour)), "restarted-uid").Label(jobsetkind.LabelRestartAttempt, "1").
		PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).Created(ended.Add(-30*time.Minute)).
		Completed("0-1", 2).Complete(ended.Add(-10 * time.Minute)).Finalizers(v1alpha1.RecordFinalizer).Deleting(ended).Obj()
	objs := []client.Object{r.tj, ba, restarted}
	objs = append(objs, reportedPods(t, restarted, 2, ended.Add(-10*time.Minute))...)
	f := newFixture(t, hooks{}, objs...)
	got := reconcileTwice(t, f, "train")
	if tg := got.Status.Targets[0]; tg.UID != restarted.UID || tg.CompletedIndexes != "0,1" {
		t.Errorf("target follows %s with %q completed; want the restart's child %s with 0,1", tg.UID, tg.CompletedIndexes, restarted.UID)
	}
	if res := got.Status.Results; res.Recorded != 2 || res.Rejected != 0 || res.Missing != 0 {
		t.Errorf("results %+v; want both of the restart's child recorded, none rejected", res)
	}
}
