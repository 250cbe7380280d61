package relations

import (
	"context"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetconstants "sigs.k8s.io/jobset/pkg/constants"

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
// every restart attempt.
func ChildLabels(ref v1alpha1.TargetRef) map[string]string {
	return map[string]string{
		jobsetapi.JobSetNameKey:        ref.JobSet,
		jobsetapi.ReplicatedJobNameKey: ref.ReplicatedJob,
		jobsetapi.JobIndexKey:          jobIndex(ref),
	}
}

// NamesJob reports whether the target ref names the Job of that name and labels: a Job
// target by its name, a JobSet target by the child labels (any restart attempt).
func NamesJob(ref v1alpha1.TargetRef, name string, labels map[string]string) bool {
	if ref.Job != "" && ref.Job == name {
		return true
	}
	return ref.JobSet != "" && labels[jobsetapi.JobSetNameKey] == ref.JobSet &&
		labels[jobsetapi.ReplicatedJobNameKey] == ref.ReplicatedJob &&
		labels[jobsetapi.JobIndexKey] == jobIndex(ref)
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

// CurrentChild picks, among the child Jobs of one JobSet target, the one the target
// follows: the highest restart attempt that is not being deleted (during a restart the
// old children linger while they are deleted). Among equal attempts the first wins. It
// returns nil when every child is being deleted.
func CurrentChild(jobs []batchv1.Job) (*batchv1.Job, int32) {
	var best *batchv1.Job
	bestAttempt := int32(-1)
	for i := range jobs {
		j := &jobs[i]
		if j.DeletionTimestamp != nil {
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
// with its ChildLabels. It returns nil when no such Job exists, or when the target names
// another namespace. The reconciler (what it observes and captures), the pod releaser
// (what it holds) and the CLI resolve targets with it, so that they never disagree about
// which Job an account is following.
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
	var jobs batchv1.JobList
	if err := r.List(ctx, &jobs, client.InNamespace(namespace), client.MatchingLabels(ChildLabels(ref))); err != nil {
		return nil, 0, err
	}
	job, attempt := CurrentChild(jobs.Items)
	return job, attempt, nil
}
