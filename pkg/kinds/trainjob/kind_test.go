package trainjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

const ns = "ml-team"

var (
	t0      = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ref     = v1alpha1.TargetRef{TrainJob: "llm", ReplicatedJob: "node", JobIndex: ptr.To[int32](0)}
	tjGVK   = trainer.GroupVersion.WithKind(trainer.TrainJobKind)
	trainJb = func() *wrappers.TrainJobWrapper {
		return wrappers.MakeTrainJob("llm", ns, "torch-distributed").NumNodes(2).UID("llm-uid")
	}
)

// rendered is the JobSet the TrainJob tj renders (its name, controlled by it).
func rendered(tj *trainer.TrainJob, uid string) *jobsetapi.JobSet {
	return wrappers.MakeJobSet(tj.Name, ns).ReplicatedJob(wrappers.MakeReplicatedJob("node").Replicas(2).Obj()).ControlledBy(tj, tjGVK, uid).Obj()
}

// node is child Job 0 of js's "node" replicatedJob at restart attempt.
func node(js *jobsetapi.JobSet, attempt int, uid string) *batchv1.Job {
	j := wrappers.MakeJob(js.Name+"-node-0", ns).Indexed(2).JobSetChild(js, "node", 0, attempt).Obj()
	j.UID = types.UID(uid)
	return j
}

// workloadOf is the Kueue Workload of the TrainJob tj (controlled and labelled by its UID),
// finished at at with reason (Succeeded, Failed).
func workloadOf(tj *trainer.TrainJob, reason string, at time.Time) *kueue.Workload {
	return wrappers.MakeWorkload("trainjob-llm-1a2b3", ns).ControlledBy(tj, tjGVK).Label(kueueconstants.JobUIDLabel, string(tj.UID)).
		Condition(metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(at)}).Obj()
}

func reader(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(objs...).Build()
}

// resolveCase is a case of a Resolve table: the objects read, the identity the account
// follows (nil: Resolve is called, else ResolveObserved with it), and the UID of the
// child Job wanted ("": none; afterLag: a kinds.CacheLagError answering it).
type resolveCase struct {
	name     string
	objs     []client.Object
	observed *kinds.Followed
	want     types.UID
}

// afterLag is the want of a resolveCase answered a kinds.CacheLagError whose answer, the
// caches taken as they are, is the child of uid.
func afterLag(uid types.UID) types.UID { return "after the caches' lag: " + uid }

// runResolve runs each case as a subtest.
func runResolve(t *testing.T, cases []resolveCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, call := reader(t, tc.objs...), "Resolve"
			var job *batchv1.Job
			var err error
			if tc.observed == nil {
				job, _, err = Kind{}.Resolve(context.Background(), r, ns, ref)
			} else {
				call = fmt.Sprintf("ResolveObserved(%+v)", *tc.observed)
				job, _, err = Kind{}.ResolveObserved(context.Background(), r, ns, ref, *tc.observed)
			}
			got := uidOf(job)
			if lag := (*kinds.CacheLagError)(nil); errors.As(err, &lag) {
				got, err = afterLag(uidOf(lag.Job)), nil
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%s = %q, want %q", call, got, tc.want)
			}
		})
	}
}

// TestResolve: a TrainJob target follows the child of the JobSet the TrainJob renders,
// never that of a JobSet of its name it does not control.
func TestResolve(t *testing.T) {
	tj := trainJb().Obj()
	js := rendered(tj, "js-uid")
	foreign := wrappers.MakeJobSet("llm", ns).Obj()
	foreign.UID = "foreign-uid"
	other := trainJb().UID("other-uid").Obj()
	failed := trainJb().Condition(trainer.TrainJobFailed, t0).Obj()
	renderedAt := func(created time.Time) *jobsetapi.JobSet {
		js := rendered(tj, "js-uid")
		js.CreationTimestamp = metav1.NewTime(created)
		return js
	}
	// endedAt is the JobSet rendered at created that recorded its own end (typ) at ended.
	endedAt := func(created time.Time, typ string, ended time.Time) *jobsetapi.JobSet {
		js := renderedAt(created)
		js.Status.Conditions = []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(ended)}}
		return js
	}
	ranAndFailed := endedAt(t0.Add(-time.Hour), string(jobsetapi.JobSetFailed), t0.Add(-time.Second))
	runResolve(t, []resolveCase{
		{"the rendered JobSet's child", []client.Object{tj, js, node(js, 0, "n0")}, nil, "n0"},
		{"a JobSet of its name it does not control", []client.Object{tj, foreign, node(foreign, 0, "n0")}, nil, ""},
		{"a JobSet rendered by an earlier TrainJob of the name", []client.Object{tj, rendered(other, "js-uid"), node(rendered(other, "js-uid"), 0, "n0")}, nil, ""},
		{"the TrainJob gone: its JobSet's children still answer", []client.Object{js, node(js, 0, "n0")}, nil, "n0"},
		{"no child yet", []client.Object{tj, js}, nil, ""},
		// Trainer renders a JobSet again for a TrainJob whose failure it took off once the
		// failed JobSet was gone; Kueue finished the Workload at t0.
		{"its JobSet rendered again after its Workload finished: no child", []client.Object{tj, renderedAt(t0.Add(time.Second)), node(renderedAt(t0.Add(time.Second)), 0, "n1"), workloadOf(tj, kueue.WorkloadFinishedReasonFailed, t0)}, nil, ""},
		{"its JobSet rendered again in the second its Workload finished: no child", []client.Object{tj, renderedAt(t0), node(renderedAt(t0), 0, "n1"), workloadOf(tj, kueue.WorkloadFinishedReasonFailed, t0)}, nil, ""},
		// The cache may show Kueue's finish before the TrainJob's condition, which Trainer
		// copied from the JobSet's own end, recorded before either.
		{"its JobSet that failed, the TrainJob not seen Failed yet: the child", []client.Object{tj, ranAndFailed, node(ranAndFailed, 0, "n0"), workloadOf(tj, kueue.WorkloadFinishedReasonFailed, t0)}, nil, "n0"},
		{"its JobSet that completed, the TrainJob not seen Complete yet: the child", []client.Object{tj, endedAt(t0.Add(-time.Hour), string(jobsetapi.JobSetCompleted), t0.Add(-time.Second)),
			node(renderedAt(t0.Add(-time.Hour)), 0, "n0"), workloadOf(tj, kueue.WorkloadFinishedReasonSucceeded, t0)}, nil, "n0"},
		// Kueue read the TrainJob's failure from its cache and finished the Workload only
		// after Trainer took the failure off and rendered the JobSet again: the JobSet
		// rendered again is created before the Workload finished, and has no end of its own
		// (or one after the Workload's).
		{"its JobSet rendered again before Kueue finished its Workload: no child", []client.Object{tj, renderedAt(t0.Add(-2 * time.Second)), node(renderedAt(t0.Add(-2*time.Second)), 0, "n1"), workloadOf(tj, kueue.WorkloadFinishedReasonFailed, t0)}, nil, ""},
		{"its JobSet rendered again before Kueue finished its Workload, failed since: no child", []client.Object{tj, endedAt(t0.Add(-2*time.Second), string(jobsetapi.JobSetFailed), t0.Add(time.Hour)),
			node(renderedAt(t0.Add(-2*time.Second)), 0, "n1"), workloadOf(tj, kueue.WorkloadFinishedReasonFailed, t0)}, nil, ""},
		// Trainer takes the failure off in the same reconcile that renders the JobSet
		// again: the cache may show the new JobSet (and its child) while the TrainJob is
		// still Failed, with or without its Workload's end.
		{"its JobSet rendered again after its failure, the TrainJob still Failed: no child", []client.Object{failed, renderedAt(t0.Add(time.Second)), node(renderedAt(t0.Add(time.Second)), 0, "n1")}, nil, ""},
		{"its JobSet rendered again in the second it failed, the TrainJob still Failed: no child", []client.Object{failed, renderedAt(t0), node(renderedAt(t0), 0, "n1"), workloadOf(tj, kueue.WorkloadFinishedReasonFailed, t0)}, nil, ""},
		{"the TrainJob Failed, its JobSet that ran still there: the child", []client.Object{failed, renderedAt(t0.Add(-time.Hour)), node(renderedAt(t0.Add(-time.Hour)), 0, "n0")}, nil, "n0"},
		{"the TrainJob Complete, its JobSet that ran still there: the child", []client.Object{trainJb().Condition(trainer.TrainJobComplete, t0).Obj(), renderedAt(t0.Add(-time.Hour)), node(renderedAt(t0.Add(-time.Hour)), 0, "n0")}, nil, "n0"},
		// The JobSet rendered again after the failure Trainer took off failed in turn (its
		// child's pods failed before Kueue suspended it, or pods made by hand that the Job
		// controller counts), and Trainer copied that failure onto the TrainJob: the batch
		// ended at the Workload's finish, before.
		{"its JobSet rendered again after its Workload finished failed, the TrainJob Failed since: no child", []client.Object{trainJb().Condition(trainer.TrainJobFailed, t0.Add(time.Hour)).Obj(),
			endedAt(t0.Add(time.Second), string(jobsetapi.JobSetFailed), t0.Add(time.Hour)), node(renderedAt(t0.Add(time.Second)), 0, "n1"), workloadOf(tj, kueue.WorkloadFinishedReasonFailed, t0)}, nil, ""},
		{"the TrainJob Failed, its JobSet that ran still there, its Workload finished: the child", []client.Object{failed, ranAndFailed, node(ranAndFailed, 0, "n0"), workloadOf(tj, kueue.WorkloadFinishedReasonFailed, t0)}, nil, "n0"},
	})
}

// TestResolveObserved: at an end read from the TrainJob's Workload alone, a JobSet that
// has not recorded its own end is the one that ran with the cache yet to show its end, or
// one Trainer rendered again: its child is followed only when it is the Job the account
// follows; a TrainJob's own end or a JobSet's own end answers as Resolve does.
func TestResolveObserved(t *testing.T) {
	tj := trainJb().Obj()
	ranAt := func(created time.Time) *jobsetapi.JobSet {
		js := rendered(tj, "js-uid")
		js.CreationTimestamp = metav1.NewTime(created)
		return js
	}
	ran, again, after := ranAt(t0.Add(-time.Hour)), ranAt(t0.Add(-2*time.Second)), ranAt(t0.Add(time.Second))
	// restartedAt is the JobSet made at created, restarted once.
	restartedAt := func(created time.Time) *jobsetapi.JobSet {
		js := ranAt(created)
		js.Status.Restarts = 1
		return js
	}
	restarted, againRestarted, afterRestarted := restartedAt(t0.Add(-time.Hour)), restartedAt(t0.Add(-2*time.Second)), restartedAt(t0.Add(time.Second))
	finished := workloadOf(tj, kueue.WorkloadFinishedReasonSucceeded, t0)
	// nodeAt is node, created at created.
	nodeAt := func(js *jobsetapi.JobSet, attempt int, uid string, created time.Time) *batchv1.Job {
		j := node(js, attempt, uid)
		j.CreationTimestamp = metav1.NewTime(created)
		return j
	}
	followed := func(uid string, attempt int32) *kinds.Followed {
		return &kinds.Followed{UID: types.UID(uid), RestartAttempt: attempt}
	}
	runResolve(t, []resolveCase{
		{"the JobSet's end not seen yet, its child the one followed", []client.Object{tj, ran, node(ran, 0, "n0"), finished}, followed("n0", 0), "n0"},
		// The JobSet restarted (attempt 1) and failed before the account saw the new child:
		// a restart keeps the JobSet, whose attempts only grow.
		{"the JobSet's end not seen yet, a restart since the child followed: the later attempt", []client.Object{tj, restarted, node(restarted, 1, "n0b"), finished}, followed("n0", 0), "n0b"},
		{"its JobSet rendered again before Kueue finished its Workload, the failed run's child followed", []client.Object{tj, again, node(again, 0, "n1"), finished}, followed("n0", 0), ""},
		{"its JobSet rendered again before Kueue finished its Workload, a restart's child followed", []client.Object{tj, again, node(again, 0, "n1"), finished}, followed("n0b", 1), ""},
		// A JobSet rendered again holds no admission, but its child may be of a later
		// attempt: a restart before Kueue suspended it, a Job made again under the child's
		// name, or a restart-attempt label raised by anyone who may update Jobs. It is
		// none of the JobSet that ran, whose children were all made before the Workload
		// finished.
		{"its JobSet rendered again after Kueue finished its Workload, a later attempt: none", []client.Object{tj, afterRestarted, nodeAt(afterRestarted, 1, "n1b", t0.Add(2*time.Second)), finished}, followed("n0", 0), ""},
		{"its JobSet rendered again before Kueue finished its Workload, restarted since: none", []client.Object{tj, againRestarted, nodeAt(againRestarted, 1, "n1b", t0.Add(2*time.Minute)), finished}, followed("n0", 0), ""},
		{"the JobSet's end not seen yet, a restart before the Workload finished: the later attempt", []client.Object{tj, restarted, nodeAt(restarted, 1, "n0b", t0.Add(-time.Minute)), finished}, followed("n0", 0), "n0b"},
		// JobSet labels a child with the restarts its status counted before: a label beyond
		// them is a JobSet the cache shows late, or a label raised by hand on the child of a
		// JobSet rendered again, made before Kueue finished the Workload. Past the caches'
		// lag it is no child.
		{"its JobSet rendered again before Kueue finished its Workload, its child's attempt label raised: none", []client.Object{tj, again, nodeAt(again, 1, "n1", t0.Add(-time.Second)), finished}, followed("n0", 0), afterLag("")},
		{"the JobSet's end not seen yet, nor its restart: not before the caches agree", []client.Object{tj, ran, nodeAt(ran, 1, "n0b", t0.Add(-time.Minute)), finished}, followed("n0", 0), afterLag("")},
		{"its JobSet rendered again after the TrainJob's end, its child followed: none, as Resolve", []client.Object{trainJb().Condition(trainer.TrainJobFailed, t0).Obj(), after, node(after, 0, "n1")}, followed("n1", 0), ""},
		// Another child at the attempt followed: of a JobSet made again, for a new run or
		// after a failure whose Workload's finish is not seen yet.
		{"no end: another child at the attempt followed", []client.Object{tj, ran, node(ran, 0, "n1")}, followed("n0", 0), afterLag("n1")},
		{"no end: another child at an attempt before the one followed", []client.Object{tj, ran, node(ran, 0, "n1")}, followed("n0", 1), afterLag("n1")},
		{"no end: the child followed", []client.Object{tj, ran, node(ran, 0, "n0")}, followed("n0", 0), "n0"},
		{"no end: a restart since the child followed", []client.Object{tj, restarted, node(restarted, 1, "n0b")}, followed("n0", 0), "n0b"},
		// A later attempt its JobSet does not count: the JobSet shown late, or the label
		// raised by hand on the child of a JobSet made again, which waits as any other.
		{"no end: a later attempt its JobSet does not count", []client.Object{tj, ran, node(ran, 1, "n1")}, followed("n0", 0), afterLag("n1")},
		{"no end, nothing followed: its child", []client.Object{tj, ran, node(ran, 0, "n1")}, &kinds.Followed{}, "n1"},
	})
}

// TestResolveObservedCacheLag: an account that follows nothing yet, shown a TrainJob whose
// Workload finished and a JobSet of it without an end, cannot tell the JobSet that ran
// (its end not seen yet) from one Trainer rendered again before Kueue finished the
// Workload: it is told the caches may lag, since the Workload's finish. Resolve, which
// follows no account, answers none, as before; the JobSet that shows its end is answered.
func TestResolveObservedCacheLag(t *testing.T) {
	tj := trainJb().Obj()
	ranAt := func(created time.Time, end string) *jobsetapi.JobSet {
		js := rendered(tj, "js-uid")
		js.CreationTimestamp = metav1.NewTime(created)
		if end != "" {
			js.Status.Conditions = []metav1.Condition{{Type: end, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Second))}}
		}
		return js
	}
	ran, again, ended := ranAt(t0.Add(-time.Hour), ""), ranAt(t0.Add(-2*time.Second), ""), ranAt(t0.Add(-time.Hour), string(jobsetapi.JobSetFailed))
	finished := workloadOf(tj, kueue.WorkloadFinishedReasonFailed, t0)
	for _, tc := range []struct {
		name      string
		objs      []client.Object
		wantLag   bool
		wantChild types.UID
	}{
		{name: "the JobSet that ran, its end not seen yet", objs: []client.Object{tj, ran, node(ran, 0, "n0"), finished}, wantLag: true},
		{name: "a JobSet rendered again before Kueue finished the Workload", objs: []client.Object{tj, again, node(again, 0, "n1"), finished}, wantLag: true},
		{name: "the JobSet that ran, its end seen", objs: []client.Object{tj, ended, node(ended, 0, "n0"), finished}, wantChild: "n0"},
		{name: "the Workload's finish not seen yet", objs: []client.Object{tj, ran, node(ran, 0, "n0")}, wantChild: "n0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := reader(t, tc.objs...)
			job, _, err := Kind{}.ResolveObserved(context.Background(), r, ns, ref, kinds.Followed{})
			var lag *kinds.CacheLagError
			switch {
			case tc.wantLag && !errors.As(err, &lag):
				t.Fatalf("ResolveObserved(nothing followed) = %v, %v; want a CacheLagError", job, err)
			case tc.wantLag && lag.Job != nil:
				t.Errorf("CacheLagError answers child %q as the caches show it, want none", lag.Job.UID)
			case tc.wantLag && !lag.Since.Equal(t0):
				t.Errorf("CacheLagError.Since = %v, want the Workload's finish %v", lag.Since, t0)
			case !tc.wantLag && err != nil:
				t.Fatal(err)
			case !tc.wantLag && (job == nil || job.UID != tc.wantChild):
				t.Errorf("ResolveObserved(nothing followed) = %v, want child %q", job, tc.wantChild)
			}
			plain, _, err := Kind{}.Resolve(context.Background(), r, ns, ref)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if got := uidOf(plain); got != tc.wantChild {
				t.Errorf("Resolve = %q, want %q", got, tc.wantChild)
			}
		})
	}
}

// uidOf is job's UID; "" for none.
func uidOf(job *batchv1.Job) types.UID {
	if job == nil {
		return ""
	}
	return job.UID
}

// TestWorkloadOwner: a TrainJob target's Job runs under the Workload of the TrainJob its
// JobSet descends from, by UID, never under a TrainJob that only has its name now.
func TestWorkloadOwner(t *testing.T) {
	tj := trainJb().Obj()
	js := rendered(tj, "js-uid")
	earlier := trainJb().UID("earlier-uid").Obj()
	earlierJS := rendered(earlier, "earlier-js-uid")
	standIn := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tj, tjGVK)}}}
	cases := []struct {
		name string
		objs []client.Object
		job  *batchv1.Job
		want types.UID
	}{
		{"the child of the TrainJob's JobSet", []client.Object{tj, js}, node(js, 0, "n0"), "llm-uid"},
		{"a dispatched TrainJob's stand-in Job", []client.Object{tj}, standIn, "llm-uid"},
		{"the child of an earlier TrainJob of the name, its JobSet gone", []client.Object{tj}, node(earlierJS, 0, "n0"), "earlier-js-uid"},
		{"the child of an earlier TrainJob of the name, the new JobSet rendered", []client.Object{tj, js}, node(earlierJS, 0, "n0"), "earlier-js-uid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Kind{}.WorkloadOwner(context.Background(), reader(t, tc.objs...), ref, tc.job)
			if err != nil || got != tc.want {
				t.Errorf("WorkloadOwner = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestEnded: the owner of a TrainJob target ends with the TrainJob, with the finish of the
// Workload it controls, or with its JobSet's terminal condition; a TrainJob whose JobSet
// is gone will render it again. A dispatched TrainJob ends with itself or its Workload
// alone: a JobSet of its name here is not its own.
func TestEnded(t *testing.T) {
	tj := trainJb().Obj()
	deleting := trainJb().Obj()
	deleting.DeletionTimestamp, deleting.Finalizers = &metav1.Time{Time: t0}, []string{"x"}
	js := rendered(tj, "js-uid")
	failedJS := rendered(tj, "js-uid")
	failedJS.Status.Conditions = []metav1.Condition{{Type: string(jobsetapi.JobSetFailed), Status: metav1.ConditionTrue}}
	foreignWL := workloadOf(trainJb().UID("other-uid").Obj(), kueue.WorkloadFinishedReasonFailed, t0)
	foreignWL.Labels[kueueconstants.JobUIDLabel] = string(tj.UID)
	dispatchedTj := dispatchedTJ(trainJb().Obj())
	admittedWL := wrappers.MakeWorkload("trainjob-llm-1a2b3", ns).ControlledBy(dispatchedTj, tjGVK).
		Label(kueueconstants.JobUIDLabel, string(dispatchedTj.UID)).Admitted("cq", t0).DispatchedTo("worker-1").Obj()
	foreignJS := rendered(dispatchedTj, "js-uid")
	foreignJS.Status.Conditions = failedJS.Status.Conditions
	cases := []struct {
		name string
		objs []client.Object
		want string
	}{
		{"gone", nil, account.OwnerDeleted},
		{"being deleted", []client.Object{deleting}, account.OwnerBeingDeleted},
		{"complete", []client.Object{trainJb().Condition(trainer.TrainJobComplete, t0).Obj(), js}, trainer.TrainJobComplete},
		{"its JobSet failed", []client.Object{tj, failedJS}, string(jobsetapi.JobSetFailed)},
		{"running", []client.Object{tj, js}, ""},
		{"its runtime renders no such replicatedJob", []client.Object{tj, wrappers.MakeJobSet(tj.Name, ns).
			ReplicatedJob(wrappers.MakeReplicatedJob("launcher").Obj()).ControlledBy(tj, tjGVK, "js-uid").Obj()},
			`has no replicatedJob "node" (it has launcher)`},
		{"its JobSet not rendered yet", []client.Object{tj}, ""},
		// Trainer takes a JobSet's failure off the TrainJob once that JobSet is gone, and
		// renders it again: Kueue's Workload keeps the end.
		{"its failure taken off, its JobSet rendered again: its Workload failed", []client.Object{tj, js, workloadOf(tj, kueue.WorkloadFinishedReasonFailed, t0)}, trainer.TrainJobFailed},
		{"its failure taken off, its JobSet not rendered again yet", []client.Object{tj, workloadOf(tj, kueue.WorkloadFinishedReasonFailed, t0)}, trainer.TrainJobFailed},
		{"its Workload succeeded", []client.Object{tj, js, workloadOf(tj, kueue.WorkloadFinishedReasonSucceeded, t0)}, trainer.TrainJobComplete},
		{"a finished Workload labelled with its UID that another TrainJob controls", []client.Object{tj, js, foreignWL}, ""},
		// A JobSet rendered again after the batch that fails in turn has its failure
		// copied onto the TrainJob: the batch ended first, as ResolveObserved takes it.
		{"its Workload succeeded before a failure copied from a JobSet rendered again", []client.Object{
			trainJb().Condition(trainer.TrainJobFailed, t0.Add(time.Minute)).Obj(), js,
			workloadOf(tj, kueue.WorkloadFinishedReasonSucceeded, t0)}, trainer.TrainJobComplete},
		// MultiKueue copies the worker's TrainJob status back as Kueue finishes the
		// Workload; Trainer on the worker may have taken the failure off by then.
		{"dispatched, its condition not copied back: its Workload succeeded", []client.Object{dispatchedTj, workloadOf(dispatchedTj, kueue.WorkloadFinishedReasonSucceeded, t0)}, trainer.TrainJobComplete},
		{"dispatched, its failure taken off on the worker: its Workload failed", []client.Object{dispatchedTj, workloadOf(dispatchedTj, kueue.WorkloadFinishedReasonFailed, t0)}, trainer.TrainJobFailed},
		{"dispatched, a finished Workload labelled with its UID that another TrainJob controls", []client.Object{dispatchedTj, foreignWL}, ""},
		{"dispatched, its Workload running: a failed JobSet of its name here is not its end", []client.Object{dispatchedTj, foreignJS, admittedWL}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Kind{}.Ended(context.Background(), reader(t, tc.objs...), ns, ref)
			if err != nil || got != tc.want {
				t.Errorf("Ended = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestStampScope: the scope goes into batchledger's runtime patch of a suspended
// TrainJob, is only raised, and leaves a running TrainJob and others' patches alone.
func TestStampScope(t *testing.T) {
	kueuePatch := trainer.RuntimePatch{Manager: "kueue.x-k8s.io/manager"}
	cases := []struct {
		name      string
		tj        *trainer.TrainJob
		scope     string
		stamped   int
		wantScope string
	}{
		{"suspended: stamped", trainJb().Suspend(true).Obj(), v1alpha1.ScopeResults, 1, v1alpha1.ScopeResults},
		{"running: left alone", trainJb().Suspend(false).Obj(), v1alpha1.ScopeResults, 0, ""},
		{"never lowered", func() *trainer.TrainJob {
			tj := trainJb().Suspend(true).Obj()
			setScopePatch(tj, "node", v1alpha1.ScopeResults)
			return tj
		}(), v1alpha1.ScopeCoverage, 0, v1alpha1.ScopeResults},
		{"raised", func() *trainer.TrainJob {
			tj := trainJb().Suspend(true).Obj()
			setScopePatch(tj, "node", v1alpha1.ScopeCoverage)
			return tj
		}(), v1alpha1.ScopeResults, 1, v1alpha1.ScopeResults},
		{"dispatched, the pod template alone stamped (an earlier version): the Job template too", func() *trainer.TrainJob {
			tj := dispatchedTJ(trainJb().Suspend(true).Obj())
			setScopePatch(tj, "node", v1alpha1.ScopeResults)
			delete(tj.Spec.RuntimePatches[0].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Template.Metadata.Labels, v1alpha1.LabelScope)
			return tj
		}(), v1alpha1.ScopeResults, 1, v1alpha1.ScopeResults},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.tj.Spec.RuntimePatches = append([]trainer.RuntimePatch{kueuePatch}, tc.tj.Spec.RuntimePatches...)
			c := reader(t, tc.tj)
			n, err := Kind{}.StampScope(context.Background(), c, ns, ref, tc.scope)
			if err != nil || n != tc.stamped {
				t.Fatalf("StampScope = %d, %v; want %d", n, err, tc.stamped)
			}
			var got trainer.TrainJob
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(tc.tj), &got); err != nil {
				t.Fatal(err)
			}
			if s := patchedScope(&got, "node"); s != tc.wantScope {
				t.Errorf("scope in the runtime patches = %q, want %q", s, tc.wantScope)
			}
			if got.Spec.RuntimePatches[0].Manager != kueuePatch.Manager {
				t.Errorf("Kueue's runtime patch was not kept first: %+v", got.Spec.RuntimePatches)
			}
			for _, p := range got.Spec.RuntimePatches[1:] {
				if p.Manager != ScopePatchManager {
					t.Errorf("runtime patch of manager %q, want only %q beside Kueue's", p.Manager, ScopePatchManager)
				}
			}
		})
	}
}

// dispatchedTJ is tj as MultiKueue dispatches it.
func dispatchedTJ(tj *trainer.TrainJob) *trainer.TrainJob {
	tj.Spec.ManagedBy = ptr.To(kueue.MultiKueueControllerName)
	return tj
}

// TestStampReachesTheChildJobs: merged into the runtime's Job template as Trainer does
// (a strategic merge), batchledger's runtime patch gives the scope to the pod template,
// and, for a TrainJob MultiKueue dispatches, to the Job template too, whose labels JobSet
// puts on each child Job on the worker (which the worker's Job webhook and record select
// on). A TrainJob run here keeps its Job template as the runtime has it: Trainer applies
// its JobSet again while suspended, and JobSet refuses a Job template change then.
func TestStampReachesTheChildJobs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tj      *trainer.TrainJob
		wantJob string
	}{
		{"dispatched", dispatchedTJ(trainJb().Suspend(true).Obj()), v1alpha1.ScopeResults},
		{"run here", trainJb().Suspend(true).Obj(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := reader(t, tc.tj)
			if _, err := (Kind{}).StampScope(context.Background(), c, ns, ref, v1alpha1.ScopeResults); err != nil {
				t.Fatal(err)
			}
			var got trainer.TrainJob
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(tc.tj), &got); err != nil {
				t.Fatal(err)
			}
			tmpl := batchv1.JobTemplateSpec{}
			tmpl.Labels = map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
			for _, p := range got.Spec.RuntimePatches {
				for _, rj := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
					if rj.Name != "node" || rj.Template == nil {
						continue
					}
					src, _ := json.Marshal(tmpl)
					patch, _ := json.Marshal(rj.Template)
					merged, err := strategicpatch.StrategicMergePatch(src, patch, batchv1.JobTemplateSpec{})
					if err != nil {
						t.Fatal(err)
					}
					tmpl = batchv1.JobTemplateSpec{}
					if err := json.Unmarshal(merged, &tmpl); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tmpl.Labels[v1alpha1.LabelScope] != tc.wantJob || tmpl.Labels["trainer.kubeflow.org/trainjob-ancestor-step"] != "trainer" ||
				tmpl.Spec.Template.Labels[v1alpha1.LabelScope] != v1alpha1.ScopeResults {
				t.Errorf("Job template labels %v, pod template labels %v; want scope %q on the Job template, results on the pod template, the runtime's kept",
					tmpl.Labels, tmpl.Spec.Template.Labels, tc.wantJob)
			}
		})
	}
}

// TestShortForm: node i takes shard i; numNodes and the shard count must agree.
func TestShortForm(t *testing.T) {
	ann := func(w *wrappers.TrainJobWrapper, shards string) *trainer.TrainJob {
		return w.Annotation(v1alpha1.AnnotationInputRev, "D").Annotation(v1alpha1.AnnotationModelRev, "m").
			Annotation(v1alpha1.AnnotationShards, shards).Obj()
	}
	spec, err := Kind{}.ShortForm(ann(trainJb(), "A,B"))
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Assignments) != 1 || spec.Assignments[0].Target.Key() != "trainjob/llm/node/0" ||
		spec.Assignments[0].Indexes != "0,1" || spec.Assignments[0].ShardOrdinals != "0,1" {
		t.Errorf("assignments %+v, want trainjob/llm/node/0 indexes 0,1 onto shards 0,1", spec.Assignments)
	}
	if _, err := (Kind{}).ShortForm(ann(trainJb(), "A,B,C")); err == nil || !strings.Contains(err.Error(), "numNodes 2") {
		t.Errorf("3 shards on 2 nodes: %v, want an error naming numNodes", err)
	}
	other := ann(trainJb().Annotation(v1alpha1.AnnotationReplicatedJob, "evaluator"), "A,B,C")
	if spec, err := (Kind{}).ShortForm(other); err != nil || spec.Assignments[0].Target.ReplicatedJob != "evaluator" {
		t.Errorf("a named replicatedJob: %+v, %v", spec.Assignments, err)
	}
}

// TestPodTargetAndKeys: a JobSet child's pod and Job answer to the TrainJob of the
// JobSet's name; the JobSet is the TrainJob's only when the TrainJob controls it.
func TestPodTargetAndKeys(t *testing.T) {
	tj := trainJb().Obj()
	js := rendered(tj, "js-uid")
	job := node(js, 0, "n0")
	if got, ok := (Kind{}).PodTarget(job.Name, job.Labels); !ok || got.Key() != "trainjob/llm/node/0" {
		t.Errorf("PodTarget = %s, %v", got.Key(), ok)
	}
	if keys := (Kind{}).JobKeys(job); len(keys) != 1 || keys[0] != "trainjob/llm" {
		t.Errorf("JobKeys = %v", keys)
	}
	if name, ok := (Kind{}).JobSetOwner(js); !ok || name != "llm" {
		t.Errorf("JobSetOwner(rendered) = %q, %v", name, ok)
	}
	if _, ok := (Kind{}).JobSetOwner(wrappers.MakeJobSet("llm", ns).Obj()); ok {
		t.Error("a JobSet no TrainJob controls has a TrainJob owner")
	}
	if !(Kind{}).NamesJob(ref, job) || (Kind{}).NamesJob(v1alpha1.TargetRef{TrainJob: "other", ReplicatedJob: "node"}, job) {
		t.Error("NamesJob does not follow the JobSet child's labels")
	}
}

// TestResolveWithoutItsJobSet: while a TrainJob's JobSet does not exist, no UID tells its
// children. A namespace editor makes Job llm-node-0 after the TrainJob, with the child's
// labels and a controller reference to a JobSet llm that is not there (an apiVersion the
// garbage collector cannot resolve keeps it), and lets it complete with results that pass
// the rule: while Trainer has yet to render the JobSet, or never will (a runtime it cannot
// render fails the TrainJob), it is no child, nor once the TrainJob ended. Only a TrainJob
// that ended after a JobSet of it ran (Trainer deletes it at the deadline) leaves
// children behind, created before it ended, and of those only the child the account
// follows once it follows one; once the TrainJob is gone too, a child of its JobSet's
// name still answers (the account follows none it first sees then).
func TestResolveWithoutItsJobSet(t *testing.T) {
	tj := func() *wrappers.TrainJobWrapper {
		w := trainJb()
		w.CreationTimestamp = metav1.NewTime(t0)
		return w
	}
	ran := func(w *wrappers.TrainJobWrapper) *trainer.TrainJob {
		w.Status.JobsStatus = []trainer.JobStatus{{Name: "node"}}
		return w.Obj()
	}
	gone := wrappers.MakeJobSet("llm", ns).Obj()
	gone.UID = "gone-uid"
	childAt := func(uid string, created time.Time) *batchv1.Job {
		j := node(gone, 0, uid)
		j.OwnerReferences[0].APIVersion = "jobset.x-k8s.io/v9"
		j.CreationTimestamp = metav1.NewTime(created)
		return j
	}
	left := childAt("left", t0.Add(time.Minute))
	restarted := node(gone, 1, "restarted")
	restarted.CreationTimestamp = metav1.NewTime(t0.Add(30 * time.Minute))
	restarted.DeletionTimestamp, restarted.Finalizers = &metav1.Time{Time: t0.Add(time.Hour)}, []string{v1alpha1.RecordFinalizer}
	// A namespace editor's Jobs of the child's name, as the garbage collector leaves them
	// once the JobSet is gone, held too: one made while the JobSet ran, which survived it
	// only through an apiVersion the garbage collector cannot resolve (with that of
	// JobSet's API and another UID than the JobSet's, it collects it while the JobSet is
	// there), and one made about the end.
	unresolvable := restarted.DeepCopy()
	unresolvable.UID, unresolvable.OwnerReferences[0].APIVersion = "unresolvable", "jobset.x-k8s.io/v9"
	collected := restarted.DeepCopy()
	collected.UID, collected.DeletionTimestamp = "collected", &metav1.Time{Time: t0.Add(30*time.Minute + time.Second)}
	aboutTheEnd := restarted.DeepCopy()
	aboutTheEnd.UID, aboutTheEnd.CreationTimestamp = "about-the-end", metav1.NewTime(t0.Add(time.Hour-30*time.Second))
	made := childAt("made", t0.Add(2*time.Hour))
	// Trainer writes the deadline's Failed condition by its own clock, then deletes the
	// JobSet: a restart JobSet made meanwhile, or by the API server's clock a little
	// ahead, is created after that condition.
	late := childAt("late", t0.Add(time.Hour+10*time.Second))
	runResolve(t, []resolveCase{
		{"not rendered yet: a Job made since is no child", []client.Object{tj().Obj(), made}, nil, ""},
		{"Failed unrendered: no child either", []client.Object{tj().Condition(trainer.TrainJobFailed, t0).Obj(), made}, nil, ""},
		{"Failed an hour in, never rendered: a Job made before is no child", []client.Object{tj().Condition(trainer.TrainJobFailed, t0.Add(time.Hour)).Obj(), left}, nil, ""},
		{"running, its JobSet gone: no child", []client.Object{ran(tj()), left}, nil, ""},
		{"Failed at its deadline, its JobSet deleted: the child left behind", []client.Object{ran(tj().Condition(trainer.TrainJobFailed, t0.Add(time.Hour))), left}, nil, "left"},
		{"Failed at its deadline: a child its JobSet made as Trainer read the deadline is followed", []client.Object{ran(tj().Condition(trainer.TrainJobFailed, t0.Add(time.Hour))), late}, nil, "late"},
		{"Failed at its deadline: a Job made since is no child", []client.Object{ran(tj().Condition(trainer.TrainJobFailed, t0.Add(time.Hour))), made}, nil, ""},
		// Once the account follows a child, no other Job answers: the JobSet's UID went with
		// it, and a namespace editor may make one of the child's name once it is let go.
		{"Failed at its deadline, its JobSet deleted: the child followed, left behind", []client.Object{ran(tj().Condition(trainer.TrainJobFailed, t0.Add(time.Hour))), left},
			&kinds.Followed{UID: "left"}, "left"},
		{"Failed at its deadline, its JobSet deleted: another Job than the child followed", []client.Object{ran(tj().Condition(trainer.TrainJobFailed, t0.Add(time.Hour))), left},
			&kinds.Followed{UID: "real"}, ""},
		{"Failed at its deadline: another Job than the child followed, made as Trainer read the deadline", []client.Object{ran(tj().Condition(trainer.TrainJobFailed, t0.Add(time.Hour))), late},
			&kinds.Followed{UID: "real"}, ""},
		// Another child than the one followed, which the JobSet made before it ended
		// (beyond the allowance) under the controller reference JobSet writes: the JobSet
		// restarted (attempt 1) after the account followed the failed child of attempt 0,
		// and the account did not reconcile again until Trainer had deleted the JobSet at
		// the deadline; the garbage collector deletes the child, the record finalizer
		// holds it.
		{"Failed at its deadline, its JobSet deleted: the held child of a later restart, the earlier attempt's followed",
			[]client.Object{ran(tj().Condition(trainer.TrainJobFailed, t0.Add(time.Hour))), restarted}, &kinds.Followed{UID: "real", RestartAttempt: 0}, "restarted"},
		{"Failed at its deadline, its JobSet deleted: a Job that survived it by an apiVersion the garbage collector cannot resolve",
			[]client.Object{ran(tj().Condition(trainer.TrainJobFailed, t0.Add(time.Hour))), unresolvable}, &kinds.Followed{UID: "real", RestartAttempt: 0}, ""},
		{"Failed at its deadline, its JobSet deleted: a Job under another UID, collected while the JobSet ran, still held",
			[]client.Object{ran(tj().Condition(trainer.TrainJobFailed, t0.Add(time.Hour))), collected}, &kinds.Followed{UID: "real", RestartAttempt: 0}, ""},
		{"Failed at its deadline, its JobSet deleted: a Job made about the end, another followed",
			[]client.Object{ran(tj().Condition(trainer.TrainJobFailed, t0.Add(time.Hour))), aboutTheEnd}, &kinds.Followed{UID: "real", RestartAttempt: 0}, ""},
		{"its failure taken off, its JobSet gone: the child left behind before its Workload finished", []client.Object{ran(tj()), left, workloadOf(tj().Obj(), kueue.WorkloadFinishedReasonFailed, t0.Add(time.Hour))}, nil, "left"},
		{"its failure taken off: a Job made since its Workload finished is no child", []client.Object{ran(tj()), made, workloadOf(tj().Obj(), kueue.WorkloadFinishedReasonFailed, t0.Add(time.Hour))}, nil, ""},
		{"the TrainJob gone: a child of its JobSet's name still answers", []client.Object{made}, nil, "made"},
	})
}

// TestChildSelector: the selector of a TrainJob's children selects the children of the
// JobSet it renders, and of those JobKeys takes each for the TrainJob's, as the
// Workload of the TrainJob is theirs.
func TestChildSelector(t *testing.T) {
	tj := trainJb().Obj()
	job := node(rendered(tj, "js-uid"), 1, "n0")
	if !labels.SelectorFromSet(Kind{}.ChildSelector("llm")).Matches(labels.Set(job.Labels)) {
		t.Errorf("ChildSelector(llm) = %v does not select child labels %v", Kind{}.ChildSelector("llm"), job.Labels)
	}
	if labels.SelectorFromSet(Kind{}.ChildSelector("other")).Matches(labels.Set(job.Labels)) {
		t.Error("ChildSelector(other) selects a child of llm's JobSet")
	}
	if !slices.Contains(Kind{}.JobKeys(job), kinds.Key(v1alpha1.TargetKindTrainJob, "llm")) {
		t.Errorf("JobKeys = %v, want trainjob/llm", Kind{}.JobKeys(job))
	}
}

// TestRecordKey: a worker's record of a child of the JobSet a TrainJob rendered wakes the
// accounts naming the TrainJob; one of a JobSet queued itself wakes none of this kind.
func TestRecordKey(t *testing.T) {
	if key, ok := (Kind{}).RecordKey(&v1alpha1.WorkerJob{JobSet: "llm", TrainJob: "llm"}); !ok || key != "trainjob/llm" {
		t.Errorf("RecordKey(TrainJob's child) = %q, %v; want trainjob/llm", key, ok)
	}
	if key, ok := (Kind{}).RecordKey(&v1alpha1.WorkerJob{JobSet: "js"}); ok {
		t.Errorf("RecordKey(JobSet's child) = %q, want none", key)
	}
}

// TestCachedTrainJobKeepsWhatIsRead: the manager reads TrainJobs from its cache, through
// CacheTransform. What Resolve and DispatchedOwnerRan read of a TrainJob's status
// (status.jobsStatus: a JobSet of it ran) must survive the transform, or the child a
// TrainJob left behind at its deadline is lost, and a preempted dispatched TrainJob
// looks as if it never ran.
func TestCachedTrainJobKeepsWhatIsRead(t *testing.T) {
	cached := func(objs ...client.Object) client.Client {
		t.Helper()
		for i, o := range objs {
			if tj, ok := o.(*trainer.TrainJob); ok {
				got, err := Kind{}.CacheTransform(tj.DeepCopy())
				if err != nil {
					t.Fatal(err)
				}
				objs[i] = got.(*trainer.TrainJob)
			}
		}
		return reader(t, objs...)
	}
	ended := trainJb().Condition(trainer.TrainJobFailed, t0.Add(time.Hour))
	ended.CreationTimestamp = metav1.NewTime(t0)
	ended.Status.JobsStatus = []trainer.JobStatus{{Name: "node", Failed: ptr.To[int32](1)}}
	gone := wrappers.MakeJobSet("llm", ns).Obj()
	gone.UID = "gone-uid"
	left := node(gone, 0, "left")
	left.OwnerReferences[0].APIVersion = "jobset.x-k8s.io/v9"
	left.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	preempted := dispatchedTJ(trainJb().Suspend(true).Obj())
	preempted.Status.JobsStatus = []trainer.JobStatus{{Name: "node", Succeeded: ptr.To[int32](1)}}
	for _, tc := range []struct {
		name  string
		check func(client.Client) (bool, error)
		objs  []client.Object
	}{
		{"Failed at its deadline, its JobSet deleted: the child left behind", func(c client.Client) (bool, error) {
			job, _, err := Kind{}.Resolve(context.Background(), c, ns, ref)
			return job != nil && job.UID == "left", err
		}, []client.Object{ended.Obj(), left}},
		{"dispatched, preempted after its Jobs ran: it ran", func(c client.Client) (bool, error) {
			return Kind{}.DispatchedOwnerRan(context.Background(), c, ns, ref)
		}, []client.Object{preempted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := tc.check(cached(tc.objs...))
			if err != nil || !ok {
				t.Errorf("read from the cache: %v, %v; want true", ok, err)
			}
		})
	}
}

// TestShortFormNodeCount: the node replicatedJob runs numNodes indexes under the torch
// runtime, and numNodes-1 under an MPI runtime that runs its launcher as a node (Trainer's
// deepspeed-distributed and mlx-distributed): a short form declaring either is taken, any
// other count is refused naming numNodes.
func TestShortFormNodeCount(t *testing.T) {
	for _, tc := range []struct {
		name     string
		numNodes int32
		shards   string
		wantErr  bool
	}{
		{"torch: one shard per node", 4, "A,B,C,D", false},
		{"MPI, the launcher a node: one shard per node pod", 4, "A,B,C", false},
		{"more shards than nodes", 4, "A,B,C,D,E", true},
		{"two nodes short", 4, "A,B", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tj := trainJb().NumNodes(tc.numNodes).Annotation(v1alpha1.AnnotationInputRev, "D").Annotation(v1alpha1.AnnotationModelRev, "m").
				Annotation(v1alpha1.AnnotationShards, tc.shards).Obj()
			spec, err := Kind{}.ShortForm(tj)
			switch {
			case tc.wantErr && (err == nil || !strings.Contains(err.Error(), "numNodes 4")):
				t.Errorf("ShortForm = %v, want an error naming numNodes 4", err)
			case !tc.wantErr && err != nil:
				t.Errorf("ShortForm: %v", err)
			case !tc.wantErr && spec.Assignments[0].Indexes != fmt.Sprintf("0-%d", len(strings.Split(tc.shards, ","))-1):
				t.Errorf("indexes %q for shards %s", spec.Assignments[0].Indexes, tc.shards)
			}
		})
	}
}
