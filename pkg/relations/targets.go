package relations

import (
	"context"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetconstants "sigs.k8s.io/jobset/pkg/constants"
	"sigs.k8s.io/jobset/pkg/util/placement"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// The owner kinds batchledger follows: a Workload's or a pod's controller, and the kind a
// short-form account was declared on.
const (
	KindJob    = "Job"
	KindJobSet = "JobSet"
)

// LabelRestartAttempt is the label JobSet puts on its child Jobs with the restart attempt
// that created them (JobSet keeps it with its controller's constants, not in its API).
const LabelRestartAttempt = jobsetconstants.RestartsKey

// jobIndex is a JobSet target's job index (default 0) as the label value JobSet writes.
func jobIndex(ref v1alpha1.TargetRef) string {
	idx := int32(0)
	if ref.JobIndex != nil {
		idx = *ref.JobIndex
	}
	return strconv.Itoa(int(idx))
}

// ChildLabels are the labels JobSet puts on every child Job a JobSet target means, of
// every restart attempt. They select the candidates only: anyone can put them on a Job,
// and only the Jobs the JobSet controls are its children (IsChildOf).
func ChildLabels(ref v1alpha1.TargetRef) map[string]string {
	return map[string]string{
		jobsetapi.JobSetNameKey:        ref.JobSet,
		jobsetapi.ReplicatedJobNameKey: ref.ReplicatedJob,
		jobsetapi.JobIndexKey:          jobIndex(ref),
	}
}

// ControllingJobSet is the name and UID of the JobSet that controls obj: its controller
// owner reference, when that is a JobSet of JobSet's API group (any version). It is read
// from obj alone, so the watches and the webhooks can ask it of every Job.
func ControllingJobSet(obj metav1.Object) (string, types.UID, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != KindJobSet {
		return "", "", false
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != jobsetapi.GroupVersion.Group {
		return "", "", false
	}
	return ref.Name, ref.UID, true
}

// IsJobSetChild reports whether job is a child Job of the JobSet its labels name: that
// JobSet controls it. A Job that only carries the labels (made by hand, or copied from a
// child) is no child of anything.
func IsJobSetChild(job metav1.Object) bool {
	js := job.GetLabels()[jobsetapi.JobSetNameKey]
	name, _, ok := ControllingJobSet(job)
	return ok && js != "" && name == js
}

// IsChildOf reports whether job is a child Job the JobSet target ref means, of any
// restart attempt: it carries the target's ChildLabels and the target's JobSet controls
// it. jobSetUID, when known (the JobSet object was read), must be the controller's UID:
// a Job left over from a deleted JobSet of the same name is no child of its successor.
func IsChildOf(ref v1alpha1.TargetRef, job metav1.Object, jobSetUID types.UID) bool {
	if ref.JobSet == "" {
		return false
	}
	l := job.GetLabels()
	if l[jobsetapi.JobSetNameKey] != ref.JobSet || l[jobsetapi.ReplicatedJobNameKey] != ref.ReplicatedJob || l[jobsetapi.JobIndexKey] != jobIndex(ref) {
		return false
	}
	name, uid, ok := ControllingJobSet(job)
	return ok && name == ref.JobSet && (jobSetUID == "" || uid == jobSetUID)
}

// NamesJob reports whether the target ref names job: a Job target by its name, a JobSet
// target when job is its child (IsChildOf, any restart attempt).
func NamesJob(ref v1alpha1.TargetRef, job metav1.Object) bool {
	if ref.Job != "" {
		return ref.Job == job.GetName()
	}
	return IsChildOf(ref, job, "")
}

// ChildJobName is the name JobSet gives the child Job of a replicatedJob and job index,
// in every restart attempt (JobSet's placement.GenJobName).
func ChildJobName(jobSet, replicatedJob string, jobIndex int) string {
	return placement.GenJobName(jobSet, replicatedJob, jobIndex)
}

// TargetPodLabels select the pods of every Job a target may resolve to: the Job's pods
// by its name, or every pod of the JobSet (the JobSet label is on all its children's pods).
func TargetPodLabels(ref v1alpha1.TargetRef) map[string]string {
	if ref.JobSet != "" {
		return map[string]string{jobsetapi.JobSetNameKey: ref.JobSet}
	}
	return map[string]string{batchv1.JobNameLabel: ref.Job}
}

// RestartAttempt is the JobSet restart attempt a child Job was created for (0 when the
// label is absent or unreadable).
func RestartAttempt(job *batchv1.Job) int32 {
	a, _ := strconv.Atoi(job.Labels[LabelRestartAttempt])
	return int32(a)
}

// CurrentChild picks, among candidate Jobs of one JobSet target (listed by its
// ChildLabels), the one the target follows: of the target's children (IsChildOf, with
// jobSetUID when known), the highest restart attempt that is not being deleted (a
// restart deletes the old children before it creates new ones, and a child being
// deleted is on its way out). Among equal attempts the first wins. A candidate the
// JobSet does not control is never followed, whatever its restart attempt. It returns
// nil when no child is left.
func CurrentChild(ref v1alpha1.TargetRef, jobSetUID types.UID, jobs []batchv1.Job) (*batchv1.Job, int32) {
	var best *batchv1.Job
	bestAttempt := int32(-1)
	for i := range jobs {
		j := &jobs[i]
		if j.DeletionTimestamp != nil || !IsChildOf(ref, j, jobSetUID) {
			continue
		}
		if a := RestartAttempt(j); a > bestAttempt {
			best, bestAttempt = j, a
		}
	}
	if best == nil {
		return nil, 0
	}
	return best, bestAttempt
}

// JobSetEnded says why the JobSet named name will create no more child Jobs: it is gone
// (account.JobSetDeleted), being deleted (account.JobSetBeingDeleted), or recorded its terminal
// condition (Completed, Failed); "" while it may still create or recreate children.
// JobSet deletes its active children when it finishes or fails, and a restart deletes
// them too: only this tells the one from the other.
func JobSetEnded(ctx context.Context, r client.Reader, namespace, name string) (string, error) {
	var js jobsetapi.JobSet
	switch err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &js); {
	case apierrors.IsNotFound(err):
		return account.JobSetDeleted, nil
	case err != nil:
		return "", err
	case js.DeletionTimestamp != nil:
		return account.JobSetBeingDeleted, nil
	}
	return JobSetTerminal(&js), nil
}

// JobSetTerminal is the JobSet's terminal condition type that is True (Completed,
// Failed), or "".
func JobSetTerminal(js *jobsetapi.JobSet) string {
	for _, c := range js.Status.Conditions {
		if c.Status == metav1.ConditionTrue && (c.Type == string(jobsetapi.JobSetCompleted) || c.Type == string(jobsetapi.JobSetFailed)) {
			return c.Type
		}
	}
	return ""
}

// ResolveTarget finds the Job a target names in namespace, and its JobSet restart
// attempt: a Job target's Job by name, else a JobSet target's CurrentChild among the Jobs
// with its ChildLabels, judged against the JobSet's UID when the JobSet exists. It
// returns nil when no such Job exists, or when the target names another namespace. The
// reconciler (what it observes and captures), the pod releaser (what it holds) and the
// CLI resolve targets with it, so that they never disagree about which Job an account is
// following.
//
// From the manager's cache the JobSet and the candidates are read without a copy: only
// their metadata is compared, and the Job returned is copied.
func ResolveTarget(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (*batchv1.Job, int32, error) {
	if ref.Namespace != "" && ref.Namespace != namespace {
		return nil, 0, nil
	}
	if ref.Job != "" {
		var job batchv1.Job
		err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Job}, &job)
		if apierrors.IsNotFound(err) {
			return nil, 0, nil
		}
		return &job, 0, err
	}
	var js jobsetapi.JobSet
	var jobSetUID types.UID
	switch err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.JobSet}, &js, client.UnsafeDisableDeepCopy); {
	case err == nil:
		jobSetUID = js.UID
	case !apierrors.IsNotFound(err):
		return nil, 0, err
	}
	var jobs batchv1.JobList
	if err := r.List(ctx, &jobs, client.InNamespace(namespace), client.MatchingLabels(ChildLabels(ref)), client.UnsafeDisableDeepCopy); err != nil {
		return nil, 0, err
	}
	job, attempt := CurrentChild(ref, jobSetUID, jobs.Items)
	if job != nil {
		job = job.DeepCopy()
	}
	return job, attempt, nil
}
