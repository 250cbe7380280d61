package relations

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

const ns = "ml-team"

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// job is an Indexed Job with a UID.
func job(name string) *batchv1.Job {
	j := wrappers.MakeJob(name, ns).Indexed(4).Obj()
	j.UID = types.UID(name + "-uid")
	return j
}

// child is JobSet child Job index idx of replicatedJob rj, created for restart attempt.
func child(jobSet, rj string, idx, attempt int) *batchv1.Job {
	j := job(jobSet + "-" + rj + "-" + string(rune('0'+idx)) + "-a" + string(rune('0'+attempt)))
	j.Labels = jobset.ChildLabels(jobSet, v1alpha1.TargetRef{JobSet: jobSet, ReplicatedJob: rj, JobIndex: ptr.To(int32(idx))})
	j.Labels[jobset.LabelRestartAttempt] = string(rune('0' + attempt))
	j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: jobSet, UID: types.UID(jobSet + "-uid"), Controller: ptr.To(true)}}
	return j
}

// namedChild is child as JobSet names it: <jobSet>-<replicatedJob>-<idx>, in every
// restart attempt (child's names tell attempts apart, so that a fake client holds them
// side by side).
func namedChild(jobSet, rj string, idx, attempt int) *batchv1.Job {
	j := child(jobSet, rj, idx, attempt)
	j.Name = jobset.ChildJobName(jobSet, rj, idx)
	return j
}

// impostor is a Job made by hand with the labels of JobSet child idx of replicatedJob rj
// at restart attempt: no controller, or the controller given.
func impostor(name, jobSet, rj string, idx, attempt int, controller ...metav1.OwnerReference) *batchv1.Job {
	j := child(jobSet, rj, idx, attempt)
	j.Name, j.UID = name, types.UID(name+"-uid")
	j.OwnerReferences = controller
	return j
}

// jobSetOwner is a controller reference to a JobSet of apiVersion and uid.
func jobSetOwner(apiVersion, name, uid string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: "JobSet", Name: name, UID: types.UID(uid), Controller: ptr.To(true)}
}

// withWorkloads is a copy of ba whose status observed one target under each Workload
// named ("" none).
func withWorkloads(ba *v1alpha1.BatchAccount, names ...string) *v1alpha1.BatchAccount {
	ba = ba.DeepCopy()
	for _, name := range names {
		ts := v1alpha1.TargetStatus{Name: "t"}
		if name != "" {
			ts.Workload = &v1alpha1.WorkloadObservation{Name: name}
		}
		ba.Status.Targets = append(ba.Status.Targets, ts)
	}
	return ba
}

// TestIndexKeys: accounts, Jobs, pods and Workloads meet on the same index keys, and a
// JobSet answers as a whole whatever child an account names.
func TestIndexKeys(t *testing.T) {
	ba := wrappers.MakeBatchAccount("a", ns).Shards("A", "B", "C", "D").
		AssignJob("j", "0", "A").AssignJob("j", "1", "B").
		AssignJobSet("train", "workers", 0, "0", "2").AssignJobSet("train", "workers", 1, "0", "3").Obj()
	ch := namedChild("train", "workers", 1, 0)
	cases := []struct {
		name string
		got  []IndexKey
		want []IndexKey
	}{
		{"account: each target's Job or JobSet once, in order", AccountKeys(ba), []IndexKey{"job/j", "jobset/train"}},
		{"account: the Jobs of spec.repairs too, after the assignments", AccountKeys(wrappers.MakeBatchAccount("r", ns).Shards("A").AssignJob("j", "0", "A").
			SpecRepair("j-repair-1", "0", "A").Repair("j-repair-2", "0", "A").Obj()), []IndexKey{"job/j", "job/j-repair-2", "job/j-repair-1"}},
		{"plain Job", JobKeys(job("j")), []IndexKey{"job/j"}},
		{"JobSet child: its name, its JobSet and the TrainJob that may render it", JobKeys(ch), []IndexKey{JobKey(ch.Name), "jobset/train", "trainjob/train"}},
		{"a Job with a child's labels that no JobSet controls: its name only", JobKeys(impostor("fake", "train", "workers", 1, 9)), []IndexKey{"job/fake"}},
		{"a Job with a child's labels that another JobSet controls: its name only",
			JobKeys(impostor("fake", "train", "workers", 1, 9, jobSetOwner("jobset.x-k8s.io/v1alpha2", "eval", "eval-uid"))), []IndexKey{"job/fake"}},
		{"pod of a Job", PodKeys(wrappers.MakeIndexPod(job("j"), "j-0", 0).Obj()), []IndexKey{"job/j"}},
		{"pod of a JobSet child", PodKeys(wrappers.MakeIndexPod(namedChild("train", "workers", 1, 0), "p", 0).Obj()), []IndexKey{"job/train-workers-1", "jobset/train", "trainjob/train"}},
		{"pod of a Job with a child's labels and another name: its Job only",
			PodKeys(wrappers.MakeIndexPod(impostor("fake", "train", "workers", 1, 9), "p", 0).Obj()), []IndexKey{"job/fake"}},
		{"pod of a Job with a manual selector, without the job-name label: its Job",
			PodKeys(wrappers.MakeIndexPod(job("j"), "j-0", 0).NoLabel(batchv1.JobNameLabel).NoLabel(batchv1.ControllerUidLabel).Obj()), []IndexKey{"job/j"}},
		{"pod of no Job", PodKeys(&corev1.Pod{}), nil},
		{"Workload: its own name, its Job and JobSet owners; other owners ignored", WorkloadKeys(&kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "wl",
			OwnerReferences: []metav1.OwnerReference{owner("Job", "j", false), owner("ConfigMap", "c", false), owner("JobSet", "train", false)}}}),
			[]IndexKey{"workload/wl", "job/j", "jobset/train"}},
		{"account followed: its targets, and each Workload its status observed once", FollowedKeys(withWorkloads(ba, "jobset-train", "", "jobset-train", "job-j")),
			[]IndexKey{"job/j", "jobset/train", "workload/jobset-train", "workload/job-j"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
	if got := accountIndex(ba); !cmp.Equal(got, []string{"job/j", "jobset/train"}) {
		t.Errorf("the account index stores %q", got)
	}
}

// TestPodTargets: a pod answers, under whichever identity, to the Job target of the Job
// that controls it and, as a JobSet child's pod, to its JobSet target; a pod no Job
// controls or without a well-formed completion index answers to none. A pod whose Job
// carries a child's labels under a name JobSet does not give its children is no child's
// pod, whatever its restart attempt.
func TestPodTargets(t *testing.T) {
	ch := namedChild("train", "workers", 1, 3)
	cases := []struct {
		name string
		pod  *corev1.Pod
		want []v1alpha1.TargetKey
	}{
		{"pod of a Job", wrappers.MakeIndexPod(job("j"), "j-0", 0).Obj(), []v1alpha1.TargetKey{"job/j"}},
		{"pod of a JobSet child, any restart attempt", wrappers.MakeIndexPod(ch, "p", 0).Obj(),
			[]v1alpha1.TargetKey{v1alpha1.JobTargetKey(ch.Name), "jobset/train/workers/1", "trainjob/train/workers/1"}},
		{"pod no Job controls", wrappers.MakeIndexPod(job("j"), "j-0", 0).NotByJobController().NoOwner().Obj(), nil},
		{"pod of a Job orphaned by its deletion: its mark and labels name the Job", wrappers.MakeIndexPod(job("j"), "j-0", 0).NoOwner().Obj(), []v1alpha1.TargetKey{"job/j"}},
		{"orphaned pod of a JobSet child", wrappers.MakeIndexPod(ch, "p", 0).NoOwner().Obj(),
			[]v1alpha1.TargetKey{v1alpha1.JobTargetKey(ch.Name), "jobset/train/workers/1", "trainjob/train/workers/1"}},
		{"orphaned pod whose controller-uid label is not its mark's", wrappers.MakeIndexPod(job("j"), "j-0", 0).NoOwner().Label(batchv1.ControllerUidLabel, "k-uid").Obj(), nil},
		{"marked pod of a Job another controller took over", func() *corev1.Pod {
			p := wrappers.MakeIndexPod(job("j"), "j-0", 0).Obj()
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}}
			return p
		}(), nil},
		{"malformed completion index", wrappers.MakeIndexPod(job("j"), "j-0", 0).Annotation(batchv1.JobCompletionIndexAnnotation, "0-1").Obj(), nil},
		{"JobSet labels with a malformed job index: the Job target only", wrappers.MakeIndexPod(ch, "p", 0).Label(jobsetapi.JobIndexKey, "x").Obj(),
			[]v1alpha1.TargetKey{v1alpha1.JobTargetKey(ch.Name)}},
		{"a hand-made Job with the child's labels, a later restart attempt: its Job target only",
			wrappers.MakeIndexPod(impostor("train-workers-1-retry", "train", "workers", 1, 7), "p", 0).Obj(), []v1alpha1.TargetKey{"job/train-workers-1-retry"}},
		{"a child's labels naming another job index than its Job's name: its Job target only",
			wrappers.MakeIndexPod(ch, "p", 0).Label(jobsetapi.JobIndexKey, "0").Obj(), []v1alpha1.TargetKey{v1alpha1.JobTargetKey(ch.Name)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PodTargets(tc.pod)); diff != "" {
				t.Errorf("PodTargets (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNamesJob: a Job target names its Job by name; a JobSet target names the child of
// its replicatedJob and job index (default 0), of any restart attempt, that its JobSet
// controls, and nothing else: the labels alone make no child.
func TestNamesJob(t *testing.T) {
	workers1 := v1alpha1.TargetRef{JobSet: "train", ReplicatedJob: "workers", JobIndex: ptr.To[int32](1)}
	workers0 := v1alpha1.TargetRef{JobSet: "train", ReplicatedJob: "workers"}
	cases := []struct {
		name string
		ref  v1alpha1.TargetRef
		job  *batchv1.Job
		want bool
	}{
		{"Job by name", v1alpha1.TargetRef{Job: "j"}, job("j"), true},
		{"Job of another name", v1alpha1.TargetRef{Job: "j"}, job("k"), false},
		{"child of its index", workers1, namedChild("train", "workers", 1, 0), true},
		{"child of a later restart attempt", workers1, namedChild("train", "workers", 1, 2), true},
		{"child of another index", workers1, namedChild("train", "workers", 0, 0), false},
		{"default index is 0", workers0, namedChild("train", "workers", 0, 0), true},
		{"child of another replicatedJob", workers1, namedChild("train", "leader", 1, 0), false},
		{"child of another JobSet", workers1, namedChild("eval", "workers", 1, 0), false},
		{"a JobSet target never names a plain Job", workers0, job("train"), false},
		{"the child's labels without a controller", workers1, impostor("fake", "train", "workers", 1, 9), false},
		{"the child's labels, controlled by another JobSet", workers1, impostor("fake", "train", "workers", 1, 9, jobSetOwner("jobset.x-k8s.io/v1alpha2", "eval", "eval-uid")), false},
		{"the child's labels, controlled by a JobSet of another API group", workers1, impostor("fake", "train", "workers", 1, 9, jobSetOwner("example.com/v1", "train", "train-uid")), false},
		{"the child's labels, owned by the JobSet but not as its controller", workers1,
			impostor("fake", "train", "workers", 1, 9, metav1.OwnerReference{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "train", UID: "train-uid"}), false},
		{"the child's labels, controlled by the JobSet at another API version", workers1, impostor("train-workers-1", "train", "workers", 1, 9, jobSetOwner("jobset.x-k8s.io/v1", "train", "train-uid")), true},
		{"the child's labels, controlled by the JobSet, another name", workers1, impostor("train-workers-1-retry", "train", "workers", 1, 9, jobSetOwner("jobset.x-k8s.io/v1alpha2", "train", "train-uid")), false},
		{"a Job target names a JobSet's child by name", v1alpha1.TargetRef{Job: "train-workers-1"}, namedChild("train", "workers", 1, 0), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NamesJob(tc.ref, tc.job); got != tc.want {
				t.Errorf("NamesJob = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCurrentChild: of the target's children (the JobSet controls them, by UID when the
// JobSet is known, and they have the name JobSet gives them), the highest restart attempt
// not being deleted is the one followed, else the highest the record finalizer holds while
// it is deleted; a Job with the child's labels that the JobSet
// does not control, or that has another name, is never followed, whatever its restart
// attempt; nor is one created after the JobSet recorded its end.
func TestCurrentChild(t *testing.T) {
	deleting := func(j *batchv1.Job) batchv1.Job {
		j.DeletionTimestamp = &metav1.Time{Time: t0}
		return *j
	}
	held := func(j *batchv1.Job) batchv1.Job {
		j.Finalizers = append(j.Finalizers, v1alpha1.RecordFinalizer)
		return deleting(j)
	}
	ref := v1alpha1.TargetRef{JobSet: "t", ReplicatedJob: "w"}
	// A slice, unlike a cluster, may hold attempts of one name side by side.
	a0, a1, a2 := namedChild("t", "w", 0, 0), namedChild("t", "w", 0, 1), namedChild("t", "w", 0, 2)
	handMade := impostor("t-w-0", "t", "w", 0, 9)
	otherName := impostor("t-w-0-retry", "t", "w", 0, 9, jobSetOwner("jobset.x-k8s.io/v1alpha2", "t", "t-uid"))
	ofOldJobSet := impostor("t-w-0", "t", "w", 0, 8, jobSetOwner("jobset.x-k8s.io/v1alpha2", "t", "t-old-uid"))
	running := &jobsetapi.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: ns, UID: "t-uid"},
		Spec: jobsetapi.JobSetSpec{ReplicatedJobs: []jobsetapi.ReplicatedJob{{Name: "w", Replicas: 1}}}}
	ended := running.DeepCopy()
	ended.Status.Conditions = []metav1.Condition{{Type: string(jobsetapi.JobSetFailed), Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
	afterItEnded := namedChild("t", "w", 0, 3)
	afterItEnded.CreationTimestamp = metav1.NewTime(t0.Add(kinds.ClockSkewAllowance + time.Second))
	// The JobSet controller's clock behind the API server's: its last child looks created
	// after it ended.
	skewed := namedChild("t", "w", 0, 3)
	skewed.CreationTimestamp = metav1.NewTime(t0.Add(5 * time.Second))
	cases := []struct {
		name        string
		owner       *jobsetapi.JobSet
		jobs        []batchv1.Job
		want        types.UID
		wantAttempt int32
	}{
		{"none", nil, nil, "", 0},
		{"one", nil, []batchv1.Job{*a0}, a0.UID, 0},
		{"the highest attempt, whatever the order", nil, []batchv1.Job{*a2, *a0, *a1}, a2.UID, 2},
		{"a child being deleted is passed over", nil, []batchv1.Job{*a0, *a1, deleting(a2.DeepCopy())}, a1.UID, 1},
		{"all being deleted", nil, []batchv1.Job{deleting(a0.DeepCopy())}, "", 0},
		{"all being deleted: the highest attempt the record finalizer holds", running,
			[]batchv1.Job{held(a0.DeepCopy()), held(a1.DeepCopy()), deleting(a2.DeepCopy())}, a1.UID, 1},
		{"a live child before a held one", nil, []batchv1.Job{held(a2.DeepCopy()), *a0}, a0.UID, 0},
		{"a held Job of another name is no child", running, []batchv1.Job{held(a0.DeepCopy()), held(otherName.DeepCopy())}, a0.UID, 0},
		{"a held Job of an earlier JobSet of the name is no child", running, []batchv1.Job{held(ofOldJobSet.DeepCopy())}, "", 0},
		{"a Job of a later attempt the JobSet does not control is no child", nil, []batchv1.Job{*a1, *handMade}, a1.UID, 1},
		{"only such a Job: no child", nil, []batchv1.Job{*handMade}, "", 0},
		{"a controlled Job of another name is no child", running, []batchv1.Job{*a1, *otherName}, a1.UID, 1},
		{"only a controlled Job of another name: no child", nil, []batchv1.Job{*otherName}, "", 0},
		{"the JobSet's UID unknown: a child of any JobSet of the name", nil, []batchv1.Job{*a1, *ofOldJobSet}, ofOldJobSet.UID, 8},
		{"the JobSet ended: a Job of a child's name created since is no child", ended, []batchv1.Job{*a1, *afterItEnded}, a1.UID, 1},
		{"the JobSet ended: its children before it are followed", ended, []batchv1.Job{*a0, *a1}, a1.UID, 1},
		{"the JobSet ended: a child created within the clock skew allowance is followed", ended, []batchv1.Job{*a1, *skewed}, skewed.UID, 3},
		{"the JobSet's UID known: a child of an earlier JobSet of the name is passed over", running, []batchv1.Job{*a1, *ofOldJobSet}, a1.UID, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, attempt := jobset.CurrentChild(ref.JobSet, ref, tc.owner, tc.jobs)
			var uid types.UID
			if got != nil {
				uid = got.UID
			}
			if uid != tc.want || attempt != tc.wantAttempt {
				t.Errorf("CurrentChild = %q attempt %d, want %q attempt %d", uid, attempt, tc.want, tc.wantAttempt)
			}
		})
	}
}

func workload(name string, created time.Time, owners ...metav1.OwnerReference) kueue.Workload {
	return kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name + "-uid"),
		CreationTimestamp: metav1.NewTime(created), OwnerReferences: owners}}
}

// ownerAPIVersions are the API versions of the owner kinds the tests use.
var ownerAPIVersions = map[string]string{"Job": "batch/v1", "JobSet": "jobset.x-k8s.io/v1alpha2", "TrainJob": "trainer.kubeflow.org/v1alpha1", "ConfigMap": "v1", "Pod": "v1"}

func owner(kind, name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: ownerAPIVersions[kind], Kind: kind, Name: name, UID: types.UID(name + "-uid"), Controller: ptr.To(controller)}
}

// TestWorkloadOwner: the controller when it is a Job or JobSet, else the first Job or
// JobSet owner, else none.
func TestWorkloadOwner(t *testing.T) {
	cases := []struct {
		name   string
		owners []metav1.OwnerReference
		want   string
	}{
		{"controlled by a Job", []metav1.OwnerReference{owner("Job", "j", true)}, "j"},
		{"controlled by a JobSet", []metav1.OwnerReference{owner("JobSet", "train", true)}, "train"},
		{"the controller before an earlier plain owner", []metav1.OwnerReference{owner("Job", "other", false), owner("Job", "j", true)}, "j"},
		{"no controller: the first Job or JobSet", []metav1.OwnerReference{owner("ConfigMap", "c", false), owner("JobSet", "train", false), owner("Job", "j", false)}, "train"},
		{"a controller of another kind is passed over", []metav1.OwnerReference{owner("Pod", "p", true), owner("Job", "j", false)}, "j"},
		{"no Job or JobSet", []metav1.OwnerReference{owner("Pod", "p", true)}, ""},
		{"no owner", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wl := workload("wl", t0, tc.owners...)
			got := ""
			if ref := WorkloadOwner(&wl); ref != nil {
				got = ref.Name
			}
			if got != tc.want {
				t.Errorf("WorkloadOwner = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestWorkloadOwnerUID: a plain Job's Workload is the Job's; a JobSet child's is its
// JobSet's, whether the target names it as a child or by its Job name; a child of a
// JobSet a TrainJob rendered runs under the TrainJob's; a JobSet gone (or replaced under
// its name) leaves the child's controller reference to say.
func TestWorkloadOwnerUID(t *testing.T) {
	asChild := v1alpha1.TargetRef{JobSet: "train", ReplicatedJob: "w", JobIndex: ptr.To(int32(0))}
	byName := v1alpha1.TargetRef{Job: jobset.ChildJobName("train", "w", 0)}
	tj := wrappers.MakeTrainJob("train", ns, "torch-distributed").UID("tj-uid").Obj()
	rendered := wrappers.MakeJobSet("train", ns).ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).ControlledBy(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind), "train-uid").Obj()
	plain := wrappers.MakeJobSet("train", ns).ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
	plain.UID = "train-uid"
	successor := wrappers.MakeJobSet("train", ns).ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).ControlledBy(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind), "successor-uid").Obj()
	for name, tc := range map[string]struct {
		ref  v1alpha1.TargetRef
		job  *batchv1.Job
		objs []client.Object
		want types.UID
	}{
		"plain Job":                             {ref: v1alpha1.TargetRef{Job: "j"}, job: job("j"), want: "j-uid"},
		"JobSet child":                          {ref: asChild, job: namedChild("train", "w", 0, 0), objs: []client.Object{plain}, want: "train-uid"},
		"JobSet child by its Job name":          {ref: byName, job: namedChild("train", "w", 0, 0), objs: []client.Object{plain}, want: "train-uid"},
		"JobSet child, the JobSet gone":         {ref: byName, job: namedChild("train", "w", 0, 0), want: "train-uid"},
		"child of a TrainJob's JobSet":          {ref: asChild, job: namedChild("train", "w", 0, 0), objs: []client.Object{rendered}, want: "tj-uid"},
		"child of a TrainJob's JobSet, by name": {ref: byName, job: namedChild("train", "w", 0, 0), objs: []client.Object{rendered}, want: "tj-uid"},
		"child of a JobSet replaced under its name": {ref: byName, job: namedChild("train", "w", 0, 0), objs: []client.Object{successor},
			want: "train-uid"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := WorkloadOwnerUID(context.Background(), reader(t, tc.objs...), tc.ref, tc.job)
			if err != nil || got != tc.want {
				t.Errorf("WorkloadOwnerUID = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestWorkloadOwnerName: a Job runs under the Workload of its controller when that is an
// owner of child Jobs (a JobSet, a TrainJob: kinds.Owner), under the name of that
// controller; under its own name otherwise, also when a Job controls it.
func TestWorkloadOwnerName(t *testing.T) {
	for _, tc := range []struct {
		name  string
		owner *metav1.OwnerReference
		want  string
	}{
		{"no controller", nil, "j"},
		{"a JobSet", ptr.To(owner("JobSet", "train", true)), "train"},
		{"a TrainJob", ptr.To(owner("TrainJob", "llm", true)), "llm"},
		{"a Job", ptr.To(owner("Job", "parent", true)), "j"},
		{"an object of no kind of target", &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "s", Controller: ptr.To(true)}, "j"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := job("j")
			if tc.owner != nil {
				j.OwnerReferences = []metav1.OwnerReference{*tc.owner}
			}
			if got := WorkloadOwnerName(j); got != tc.want {
				t.Errorf("WorkloadOwnerName = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNewestWorkload: of the Workloads of one owner the newest by creation is the live one.
func TestNewestWorkload(t *testing.T) {
	j := owner("Job", "j", true)
	cases := []struct {
		name string
		wls  []kueue.Workload
		want string
	}{
		{"none", nil, ""},
		{"one", []kueue.Workload{workload("a", t0, j)}, "a"},
		{"the newest, whatever the order", []kueue.Workload{workload("new", t0.Add(time.Minute), j), workload("old", t0, j)}, "new"},
		{"equal times: the last listed", []kueue.Workload{workload("first", t0, j), workload("second", t0, j)}, "second"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if wl := NewestWorkload(tc.wls); wl != nil {
				got = wl.Name
			}
			if got != tc.want {
				t.Errorf("NewestWorkload = %q, want %q", got, tc.want)
			}
		})
	}
	byOwner := NewestWorkloadsByOwner([]kueue.Workload{
		workload("j-new", t0.Add(time.Minute), j), workload("k", t0, owner("Job", "k", true)), workload("j-old", t0, j),
		workload("orphan", t0.Add(time.Hour)),
	})
	got := map[types.UID]string{}
	for uid, wl := range byOwner {
		got[uid] = wl.Name
	}
	if diff := cmp.Diff(map[types.UID]string{"j-uid": "j-new", "k-uid": "k"}, got); diff != "" {
		t.Errorf("NewestWorkloadsByOwner (-want +got):\n%s", diff)
	}
}

// TestIndexPods: which pods are (succeeded) index pods of which Job.
func TestIndexPods(t *testing.T) {
	j, other := job("j"), job("k")
	recreated := job("j")
	recreated.UID = "j-uid-2"
	succeeded := func(p *wrappers.PodWrapper) *corev1.Pod { return p.Succeeded(t0, "").Obj() }
	// Job j deleted with propagationPolicy Orphan, then created again with manualSelector:
	// the Job controller adopts j's pods.
	adopted := succeeded(wrappers.MakeIndexPod(j, "p", 1))
	adopted.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(recreated, batchv1.SchemeGroupVersion.WithKind("Job"))}
	cases := []struct {
		name string
		pod  *corev1.Pod
		job  *batchv1.Job
		// want: the index pod's index, or -1 for none; succeeded: SucceededIndexOf's answer.
		want      int
		succeeded bool
		// watched: IsSucceededIndexPod (the watch's cheap test, blind to the Job).
		watched bool
	}{
		{"running index pod", wrappers.MakeIndexPod(j, "p", 2).Phase(corev1.PodRunning).Obj(), j, 2, false, false},
		{"succeeded index pod", succeeded(wrappers.MakeIndexPod(j, "p", 3)), j, 3, true, true},
		{"failed index pod", wrappers.MakeIndexPod(j, "p", 3).Phase(corev1.PodFailed).Obj(), j, 3, false, false},
		{"pod of another Job", succeeded(wrappers.MakeIndexPod(other, "p", 1)), j, -1, false, true},
		{"pod of the Job's predecessor of the same name", succeeded(wrappers.MakeIndexPod(j, "p", 1)), recreated, -1, false, true},
		{"pod no Job controls", succeeded(wrappers.MakeIndexPod(j, "p", 1).NotByJobController().NoOwner()), j, -1, false, true},
		{"pod orphaned from the Job (its mark names it)", succeeded(wrappers.MakeIndexPod(j, "p", 1).NoOwner()), j, 1, true, true},
		{"malformed index", succeeded(wrappers.MakeIndexPod(j, "p", 1).Annotation(batchv1.JobCompletionIndexAnnotation, "1,2")), j, -1, false, true},
		{"pod adopted by the Job's successor: no pod of the successor", adopted, recreated, -1, false, true},
		{"pod adopted by the Job's successor: still the pod of the Job it ran under", adopted, j, 1, true, true},
		{"no Job to follow", succeeded(wrappers.MakeIndexPod(j, "p", 1)), nil, -1, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			idx, ok := IndexOf(tc.pod, tc.job)
			if (tc.want >= 0) != ok || (ok && idx != tc.want) {
				t.Errorf("IndexOf = %d, %v; want %d", idx, ok, tc.want)
			}
			if _, ok := SucceededIndexOf(tc.pod, tc.job); ok != tc.succeeded {
				t.Errorf("SucceededIndexOf = %v, want %v", ok, tc.succeeded)
			}
			if got := IsSucceededIndexPod(tc.pod); got != tc.watched {
				t.Errorf("IsSucceededIndexPod = %v, want %v", got, tc.watched)
			}
		})
	}
	pods := []corev1.Pod{
		*succeeded(wrappers.MakeIndexPod(j, "a", 0)), *wrappers.MakeIndexPod(j, "b", 1).Obj(),
		*succeeded(wrappers.MakeIndexPod(other, "c", 2)), *succeeded(wrappers.MakeIndexPod(j, "d", 3)),
	}
	want := []account.PodAttempt{{UID: "a-uid", Index: 0}, {UID: "d-uid", Index: 3}}
	if diff := cmp.Diff(want, SuccessfulAttempts(j, pods)); diff != "" {
		t.Errorf("SuccessfulAttempts (-want +got):\n%s", diff)
	}
	if IsSucceededIndexPod(job("j")) {
		t.Error("a Job is no pod")
	}
}

// TestScopes: scopes only rise; an account gives the scope its result requirement asks
// for (the short form's scope is TestShortFormScope's).
func TestScopes(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"", "", ""}, {"", v1alpha1.ScopeCoverage, v1alpha1.ScopeCoverage}, {v1alpha1.ScopeCoverage, "", v1alpha1.ScopeCoverage},
		{v1alpha1.ScopeCoverage, v1alpha1.ScopeResults, v1alpha1.ScopeResults}, {v1alpha1.ScopeResults, v1alpha1.ScopeCoverage, v1alpha1.ScopeResults},
	} {
		if got := StrongerScope(tc.a, tc.b); got != tc.want {
			t.Errorf("StrongerScope(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
	if got := AccountScope(wrappers.MakeBatchAccount("a", ns).Obj()); got != v1alpha1.ScopeCoverage {
		t.Errorf("an account counting coverage: %q", got)
	}
	if got := AccountScope(wrappers.MakeBatchAccount("a", ns).RequireResults("").Obj()); got != v1alpha1.ScopeResults {
		t.Errorf("an account requiring results: %q", got)
	}
}

// TestRecordedChildOfAWorker: of the Jobs a MultiKueue worker recorded for a JobSet
// target, only one named as JobSet names the child stands for it: the labels a record is
// read from are writable on the worker, so a child relabelled with another job index (and
// a later restart attempt) is not followed for that index.
func TestRecordedChildOfAWorker(t *testing.T) {
	ref := v1alpha1.TargetRef{JobSet: "js", ReplicatedJob: "workers", JobIndex: ptr.To[int32](1)}
	real := &v1alpha1.WorkerJob{JobSet: "js", ReplicatedJob: "workers", JobIndex: 1, Job: "js-workers-1", JobUID: "c1", CompletedIndexes: "0"}
	relabelled := &v1alpha1.WorkerJob{JobSet: "js", ReplicatedJob: "workers", JobIndex: 1, RestartAttempt: 9, Job: "js-workers-0", JobUID: "c0", CompletedIndexes: "0-1"}
	cases := []struct {
		name string
		recs []kinds.RecordedJob
		want types.UID
	}{
		{"the child of its name", []kinds.RecordedJob{{Record: real, Cluster: "worker-a"}}, "c1"},
		{"not another child relabelled with its index", []kinds.RecordedJob{{Record: real, Cluster: "worker-a"}, {Record: relabelled, Cluster: "worker-a"}}, "c1"},
		{"nor that one alone", []kinds.RecordedJob{{Record: relabelled, Cluster: "worker-a"}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got types.UID
			if rec := kinds.Recorded(jobset.Kind{}, ref, tc.recs); rec != nil {
				got = rec.Record.JobUID
			}
			if got != tc.want {
				t.Errorf("followed %q, want %q", got, tc.want)
			}
		})
	}
}
