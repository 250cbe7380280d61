package jobset_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestCurrentChildOfAJobSetBeingDeleted: the JobSet controller leaves a JobSet being
// deleted alone and creates no child for it. A namespace editor can keep a JobSet whose
// batch fails from going with a finalizer of their own, delete it, delete its child (let
// go once its end is recorded) and create a Job of the child's name, labels and
// controller reference (the JobSet's UID) that completes with results passing the rule:
// it is no child, and the target does not follow it. A child created before the deletion
// started, even in that second, is still followed.
func TestCurrentChildOfAJobSetBeingDeleted(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	ref := v1alpha1.TargetRef{JobSet: "t", ReplicatedJob: "w"}
	js := wrappers.MakeJobSet("t", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
	js.UID = "t-uid"
	deleting := js.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	deleting.Finalizers = []string{"example.com/keep"}
	childAt := func(uid string, attempt int, created time.Time) batchv1.Job {
		j := wrappers.MakeJob(jobset.ChildJobName("t", "w", 0), "ns").UID(uid).JobSetChild(js, "w", 0, attempt).Obj()
		j.CreationTimestamp = metav1.Time{Time: created}
		return *j
	}
	before := childAt("real-uid", 0, t0.Add(-time.Hour))
	sameSecond := childAt("same-second-uid", 1, t0)
	forged := childAt("forged-uid", 0, t0.Add(time.Second))
	forgedLater := childAt("forged-later-uid", 1, t0.Add(time.Minute))
	for _, tc := range []struct {
		name  string
		owner *jobsetapi.JobSet
		jobs  []batchv1.Job
		want  types.UID
	}{
		{"running: a child is followed", js, []batchv1.Job{forged}, "forged-uid"},
		{"being deleted: its child from before is followed", deleting, []batchv1.Job{before}, "real-uid"},
		{"being deleted: a child created in the second it started is followed", deleting, []batchv1.Job{before, sameSecond}, "same-second-uid"},
		{"being deleted: a Job of the child's name created since is no child", deleting, []batchv1.Job{forged}, ""},
		{"being deleted: nor one of a later attempt", deleting, []batchv1.Job{before, forgedLater}, "real-uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := jobset.CurrentChild(ref.JobSet, ref, tc.owner, tc.jobs)
			var uid types.UID
			if got != nil {
				uid = got.UID
			}
			if uid != tc.want {
				t.Errorf("CurrentChild = %q, want %q", uid, tc.want)
			}
		})
	}
}

// TestCurrentChildOfAChildTheJobSetLacks: a JobSet makes children only of its
// replicatedJobs, up to their replicas, which JobSet's webhook keeps immutable. A Job of
// a child's name, labels and controller reference (the JobSet's UID, readable by anyone)
// for a replicatedJob it does not have, or a jobIndex beyond its replicas, is anyone's:
// the target does not follow it.
func TestCurrentChildOfAChildTheJobSetLacks(t *testing.T) {
	js := wrappers.MakeJobSet("t", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("w").Replicas(2).Obj()).Obj()
	js.UID = "t-uid"
	child := func(rj string, idx int) batchv1.Job {
		return *wrappers.MakeJob(jobset.ChildJobName("t", rj, idx), "ns").UID("x-uid").JobSetChild(js, rj, idx, 0).Obj()
	}
	for _, tc := range []struct {
		name string
		ref  v1alpha1.TargetRef
		job  batchv1.Job
		want types.UID
	}{
		{"a replicatedJob it has, a jobIndex within its replicas", v1alpha1.TargetRef{JobSet: "t", ReplicatedJob: "w", JobIndex: ptr.To(int32(1))}, child("w", 1), "x-uid"},
		{"a jobIndex beyond its replicas", v1alpha1.TargetRef{JobSet: "t", ReplicatedJob: "w", JobIndex: ptr.To(int32(2))}, child("w", 2), ""},
		{"a replicatedJob it does not have", v1alpha1.TargetRef{JobSet: "t", ReplicatedJob: "launcher"}, child("launcher", 0), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := jobset.CurrentChild("t", tc.ref, js, []batchv1.Job{tc.job})
			var uid types.UID
			if got != nil {
				uid = got.UID
			}
			if uid != tc.want {
				t.Errorf("CurrentChild = %q, want %q", uid, tc.want)
			}
		})
	}
}

// TestResolveObservedAboutTheJobSetsEnd: JobSet t ended (Failed, or its deletion
// started) at t0 after restart attempt 1, and CurrentChild takes a Job created up to
// kinds.ClockSkewAllowance later for a child. In that minute a namespace editor can delete
// the child the account follows (let go once its end is recorded) and create a Job of its
// name, labels and controller reference (t's UID), with any restart-attempt label: it
// is followed only as a child of t's last attempt, later than the one followed. A Job
// created before the end (beyond the allowance) is judged as while t ran.
func TestResolveObservedAboutTheJobSetsEnd(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	ref := v1alpha1.TargetRef{JobSet: "t", ReplicatedJob: "w"}
	running := wrappers.MakeJobSet("t", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
	running.UID, running.Status.Restarts = "t-uid", 1
	failed := running.DeepCopy()
	failed.Status.Conditions = []metav1.Condition{{Type: string(jobsetapi.JobSetFailed), Status: metav1.ConditionTrue, Reason: "Test",
		LastTransitionTime: metav1.NewTime(t0)}}
	deleting := running.DeepCopy()
	deleting.DeletionTimestamp, deleting.Finalizers = &metav1.Time{Time: t0}, []string{"example.com/keep"}
	childAt := func(uid string, attempt int, created time.Time) *batchv1.Job {
		j := wrappers.MakeJob(jobset.ChildJobName("t", "w", 0), "ns").UID(uid).JobSetChild(running, "w", 0, attempt).Obj()
		j.CreationTimestamp = metav1.NewTime(created)
		return j
	}
	inWindow := t0.Add(30 * time.Second)
	last := kinds.Followed{UID: "real-uid", RestartAttempt: 1}
	earlier := kinds.Followed{UID: "real-uid", RestartAttempt: 0}
	for _, tc := range []struct {
		name     string
		owner    *jobsetapi.JobSet
		job      *batchv1.Job
		observed kinds.Followed
		want     types.UID
	}{
		{"running: a Job of the child's name is followed", running, childAt("x-uid", 1, inWindow), last, "x-uid"},
		{"Failed: the child followed", failed, childAt("real-uid", 1, t0.Add(-time.Hour)), last, "real-uid"},
		{"Failed: a Job created before the end, the account not told of it", failed, childAt("x-uid", 1, t0.Add(-time.Hour)), last, "x-uid"},
		{"Failed: a Job made about the end, of the attempt followed", failed, childAt("x-uid", 1, inWindow), last, ""},
		{"Failed: a Job made about the end, of an earlier attempt", failed, childAt("x-uid", 0, inWindow), last, ""},
		{"Failed: a Job made about the end, of an attempt the JobSet never reached", failed, childAt("x-uid", 2, inWindow), earlier, ""},
		{"Failed: a Job made about the end, of an attempt never reached, nothing followed", failed, childAt("x-uid", 2, inWindow), kinds.Followed{}, ""},
		{"Failed: the last attempt's child, made about the end, an earlier one followed", failed, childAt("next-uid", 1, t0.Add(-10*time.Second)), earlier, "next-uid"},
		{"Failed: the last attempt's child, made about the end, nothing followed", failed, childAt("next-uid", 1, inWindow), kinds.Followed{}, "next-uid"},
		{"being deleted: a Job made in the second it started, of the attempt followed", deleting, childAt("x-uid", 1, t0), last, ""},
		{"being deleted: the last attempt's child, made in that second, an earlier one followed", deleting, childAt("next-uid", 1, t0), earlier, "next-uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(tc.owner, tc.job).Build()
			got, _, err := jobset.Kind{}.ResolveObserved(context.Background(), c, "ns", ref, tc.observed)
			if err != nil {
				t.Fatal(err)
			}
			var uid types.UID
			if got != nil {
				uid = got.UID
			}
			if uid != tc.want {
				t.Errorf("ResolveObserved = %q, want %q", uid, tc.want)
			}
		})
	}
}

// TestCacheTransformKeepsWhatBatchledgerReads: a cached JobSet loses its replicatedJobs'
// templates' pod specs and its managed fields, and keeps the rest: the templates' labels
// (the opt-in scope) and annotations, the rest of its spec, and its status.
func TestCacheTransformKeepsWhatBatchledgerReads(t *testing.T) {
	job := wrappers.MakeJob("train", "team-a").Indexed(4).Parallelism(2).BackoffLimitPerIndex(1).
		PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).PodAnnotation("a", "b").
		Container("worker", "registry.example/worker:1").Sidecar("proxy", "registry.example/proxy:1").
		GPU(1).NodeSelector("gpu-type", "h100").Obj()
	js := wrappers.MakeJobSet("infer", "team-a").
		ReplicatedJob(wrappers.MakeReplicatedJob("leader").Job(job.DeepCopy()).Obj()).
		ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Job(job.DeepCopy()).Obj()).
		Condition(string(jobsetapi.JobSetCompleted), time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)).Obj()
	js.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	want := js.DeepCopy()
	want.ManagedFields = nil
	for i := range want.Spec.ReplicatedJobs {
		want.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec = corev1.PodSpec{}
	}
	got, err := jobset.Kind{}.CacheTransform(js)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CacheTransform (-want +got):\n%s", diff)
	}
	if l := got.(*jobsetapi.JobSet).Spec.ReplicatedJobs[1].Template.Spec.Template.Labels[v1alpha1.LabelScope]; l != v1alpha1.ScopeResults {
		t.Errorf("template scope label = %q, want %q", l, v1alpha1.ScopeResults)
	}
}

// TestChildSelector: the selector of a JobSet's children selects every child, of every
// replicatedJob and restart attempt, and no child of another JobSet; of what it selects,
// JobKeys takes only the Jobs the JobSet controls for its children, not a Job that
// copies a child's labels.
func TestChildSelector(t *testing.T) {
	js, other := wrappers.MakeJobSet("t", "ns").Obj(), wrappers.MakeJobSet("u", "ns").Obj()
	js.UID, other.UID = "t-uid", "u-uid"
	child := func(js *jobsetapi.JobSet, rj string, i, attempt int) *batchv1.Job {
		return wrappers.MakeJob(jobset.ChildJobName(js.Name, rj, i), "ns").JobSetChild(js, rj, i, attempt).Obj()
	}
	lookalike := child(js, "w", 1, 0)
	lookalike.Name, lookalike.OwnerReferences = "copied", nil
	selector := labels.SelectorFromSet(jobset.Kind{}.ChildSelector("t"))
	owner := kinds.Key(v1alpha1.TargetKindJobSet, "t")
	for _, tc := range []struct {
		name              string
		job               *batchv1.Job
		selected, isChild bool
	}{
		{"a child", child(js, "w", 0, 0), true, true},
		{"a child of another replicatedJob and attempt", child(js, "leader", 0, 3), true, true},
		{"a Job with a child's labels", lookalike, true, false},
		{"a child of another JobSet", child(other, "w", 0, 0), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := selector.Matches(labels.Set(tc.job.Labels)); got != tc.selected {
				t.Errorf("selected = %v, want %v", got, tc.selected)
			}
			if got := slices.Contains(jobset.Kind{}.JobKeys(tc.job), owner); got != tc.isChild {
				t.Errorf("JobKeys has %s = %v, want %v", owner, got, tc.isChild)
			}
		})
	}
}

// TestChildWorkloadOwner: a JobSet's child runs under its JobSet's Workload, which a
// target naming it by its Job name asks for too, or, when a TrainJob rendered the JobSet,
// the TrainJob's; a Job no JobSet controls is none of the kind's to answer for.
func TestChildWorkloadOwner(t *testing.T) {
	js := wrappers.MakeJobSet("t", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
	js.UID = "t-uid"
	tj := wrappers.MakeTrainJob("t", "ns", "torch-distributed").UID("tj-uid").Obj()
	rendered := wrappers.MakeJobSet("t", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).
		ControlledBy(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind), "t-uid").Obj()
	// Kueue gives the Workload to the TrainJob whatever version of Trainer's API the
	// reference spells; a TrainJob kind of another group is no Trainer's.
	renderedV1 := wrappers.MakeJobSet("t", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).
		ControlledBy(tj, schema.GroupVersionKind{Group: trainer.GroupVersion.Group, Version: "v1", Kind: trainer.TrainJobKind}, "t-uid").Obj()
	renderedElsewhere := wrappers.MakeJobSet("t", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).
		ControlledBy(tj, schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: trainer.TrainJobKind}, "t-uid").Obj()
	child := wrappers.MakeJob(jobset.ChildJobName("t", "w", 0), "ns").JobSetChild(js, "w", 0, 0).Obj()
	for _, tc := range []struct {
		name    string
		job     *batchv1.Job
		objs    []client.Object
		want    types.UID
		isChild bool
	}{
		{"a child", child, []client.Object{js}, "t-uid", true},
		{"a child, its JobSet gone", child, nil, "t-uid", true},
		{"a child of a TrainJob's JobSet", child, []client.Object{rendered}, "tj-uid", true},
		{"a child of a JobSet rendered by another version of TrainJob", child, []client.Object{renderedV1}, "tj-uid", true},
		{"a child of a JobSet a TrainJob of another group controls", child, []client.Object{renderedElsewhere}, "t-uid", true},
		{"a plain Job", wrappers.MakeJob("j", "ns").UID("j-uid").Obj(), []client.Object{js}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(tc.objs...).Build()
			got, ok, err := jobset.Kind{}.ChildWorkloadOwner(context.Background(), r, tc.job)
			if err != nil || got != tc.want || ok != tc.isChild {
				t.Errorf("ChildWorkloadOwner = %q, %v, %v; want %q, %v", got, ok, err, tc.want, tc.isChild)
			}
		})
	}
}

// TestRecordKey: a worker's record of a JobSet's child wakes the accounts naming the
// JobSet, also when a TrainJob rendered it (those accounts judge the record by
// RecordNames).
func TestRecordKey(t *testing.T) {
	for _, rec := range []v1alpha1.WorkerJob{{JobSet: "js"}, {JobSet: "js", TrainJob: "js"}} {
		if key, ok := (jobset.Kind{}).RecordKey(&rec); !ok || key != "jobset/js" {
			t.Errorf("RecordKey(%+v) = %q, %v; want jobset/js", rec, key, ok)
		}
	}
}

// TestOwnerReplaced: a child whose JobSet was deleted and applied again under its name
// (a newer object of another UID) is followed by no target any more; a JobSet of another
// UID created before the child is no successor (a cache that has not seen the child's
// own JobSet yet), and a JobSet gone or the child's own replaced nothing.
func TestOwnerReplaced(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	jobSetAt := func(uid types.UID, created time.Time) *jobsetapi.JobSet {
		js := wrappers.MakeJobSet("t", "ns").Obj()
		js.UID, js.CreationTimestamp = uid, metav1.NewTime(created)
		return js
	}
	own := jobSetAt("t-uid", t0.Add(-time.Minute))
	child := wrappers.MakeJob(jobset.ChildJobName("t", "w", 0), "ns").UID("child-uid").JobSetChild(own, "w", 0, 0).Obj()
	child.CreationTimestamp = metav1.NewTime(t0)
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		objs []client.Object
		// unserved: the API server does not serve JobSet's API (an optional API).
		unserved bool
		want     bool
	}{
		{name: "JobSet's API not served", job: child, unserved: true, want: false},
		{"its own JobSet", child, []client.Object{own}, false, false},
		{"its JobSet gone", child, nil, false, false},
		{"a JobSet of its name applied since", child, []client.Object{jobSetAt("new-uid", t0.Add(time.Minute))}, false, true},
		{"a JobSet of another UID created before it", child, []client.Object{jobSetAt("new-uid", t0.Add(-time.Hour))}, false, false},
		{"a Job no JobSet controls", wrappers.MakeJob("t-w-0", "ns").Obj(), []client.Object{jobSetAt("new-uid", t0.Add(time.Minute))}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(tc.objs...)
			if tc.unserved {
				b = b.WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					return &apimeta.NoKindMatchError{GroupKind: jobsetapi.SchemeGroupVersion.WithKind("JobSet").GroupKind()}
				}})
			}
			got, err := jobset.Kind{}.OwnerReplaced(context.Background(), b.Build(), tc.job)
			if err != nil || got != tc.want {
				t.Errorf("OwnerReplaced = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
