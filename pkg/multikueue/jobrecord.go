package multikueue

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetconstants "sigs.k8s.io/jobset/pkg/constants"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// JobRecordName is the name of the WorkerJob of a worker's child Job: its UID, so that
// each Job has one record, a restart's new Job a new one.
func JobRecordName(job metav1.Object) string { return string(job.GetUID()) }

// Dispatch is what a worker's child Job of a dispatched JobSet was dispatched for: the
// manager Workload, the JobSet, and the TrainJob that rendered it ("" for none).
type Dispatch struct {
	Workload, JobSet, TrainJob string
}

// NewJobRecord is the WorkerJob of job, a child Job of a JobSet MultiKueue dispatched
// for d: where it stands in the JobSet (the labels JobSet puts on its children) and its
// status as the Job controller wrote it.
func NewJobRecord(job *batchv1.Job, d Dispatch) *v1alpha1.WorkerJob {
	l := job.Labels
	idx, _ := strconv.Atoi(l[jobsetapi.JobIndexKey])
	attempt, _ := strconv.Atoi(l[jobsetconstants.RestartsKey])
	rec := &v1alpha1.WorkerJob{
		ObjectMeta: metav1.ObjectMeta{Name: JobRecordName(job), Namespace: job.Namespace},
		Workload:   d.Workload, JobSet: d.JobSet, TrainJob: d.TrainJob,
		ReplicatedJob: l[jobsetapi.ReplicatedJobNameKey], JobIndex: int32(idx), RestartAttempt: int32(attempt),
		Job: job.Name, JobUID: job.UID,
		Completions:      ptr.To(ptr.Deref(job.Spec.Completions, 1)),
		Scope:            job.Spec.Template.Labels[v1alpha1.LabelScope],
		Succeeded:        job.Status.Succeeded,
		CompletedIndexes: job.Status.CompletedIndexes,
		FailedIndexes:    job.Status.FailedIndexes,
	}
	// As the account reads a Job: an unset completionMode is NonIndexed.
	rec.NotIndexed = ptr.Deref(job.Spec.CompletionMode, batchv1.NonIndexedCompletion) != batchv1.IndexedCompletion
	if sp := job.Spec.SuccessPolicy; sp != nil {
		// Copied: job may be the cache's own.
		for _, r := range sp.DeepCopy().Rules {
			rec.SuccessRules = append(rec.SuccessRules, v1alpha1.WorkerJobSuccessRule{SucceededIndexes: r.SucceededIndexes, SucceededCount: r.SucceededCount})
		}
	}
	if t := job.CreationTimestamp; !t.IsZero() {
		rec.JobCreated = &t
	}
	if t := job.DeletionTimestamp; t != nil {
		rec.DeletedAt = t.DeepCopy()
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			rec.Terminal, rec.TerminalReason, rec.TerminalAt = string(c.Type), c.Reason, ptr.To(c.LastTransitionTime)
			break
		}
	}
	return rec
}

// SameJobRecord reports whether two records of a Job say the same: the worker role
// writes a record only when what it says changed.
func SameJobRecord(a, b *v1alpha1.WorkerJob) bool {
	strip := func(r *v1alpha1.WorkerJob) v1alpha1.WorkerJob {
		c := *r.DeepCopy()
		c.ObjectMeta, c.TypeMeta = metav1.ObjectMeta{}, metav1.TypeMeta{}
		// Serialized times keep seconds only.
		for _, t := range []**metav1.Time{&c.TerminalAt, &c.JobCreated, &c.DeletedAt} {
			if *t != nil {
				*t = ptr.To(metav1.NewTime((*t).Rfc3339Copy().Time))
			}
		}
		return c
	}
	return apiequality.Semantic.DeepEqual(strip(a), strip(b))
}

// AnnotationFromRecord marks the Jobs RecordJob makes (the value is the record's name):
// no such Job exists on the manager, so nothing may be written to it.
const AnnotationFromRecord = "batchledger.dev/worker-job"

// FromRecord reports whether job was made from a WorkerJob (RecordJob).
func FromRecord(job metav1.Object) bool {
	_, ok := job.GetAnnotations()[AnnotationFromRecord]
	return ok
}

// RecordJob is the child Job a WorkerJob records, as the manager accounts it: a Job
// dispatched by MultiKueue (spec.managedBy ManagedBy, so no pod of it is looked for on
// the manager), named and identified as the worker's Job (its UID is the identity), in
// namespace, labelled as JobSet labels its children, controlled by owner (the manager's
// JobSet, when it has one: Kueue's Workload of a JobSet is its owner's), with the
// completion mode (Indexed when the record does not say, as an earlier worker role's
// does not) and status the record holds.
func RecordJob(rec *v1alpha1.WorkerJob, owner *metav1.OwnerReference) *batchv1.Job {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: rec.Job, Namespace: rec.Namespace, UID: rec.JobUID, ResourceVersion: rec.ResourceVersion,
			Annotations: map[string]string{AnnotationFromRecord: rec.Name},
			Labels: map[string]string{
				jobsetapi.JobSetNameKey:        rec.JobSet,
				jobsetapi.ReplicatedJobNameKey: rec.ReplicatedJob,
				jobsetapi.JobIndexKey:          strconv.Itoa(int(rec.JobIndex)),
				jobsetconstants.RestartsKey:    strconv.Itoa(int(rec.RestartAttempt)),
			}},
		Spec: batchv1.JobSpec{
			ManagedBy:      ptr.To(ManagedBy),
			Completions:    rec.Completions,
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
		},
		Status: batchv1.JobStatus{CompletedIndexes: rec.CompletedIndexes, FailedIndexes: rec.FailedIndexes, Succeeded: rec.Succeeded},
	}
	if rec.NotIndexed {
		job.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	}
	if len(rec.SuccessRules) > 0 {
		job.Spec.SuccessPolicy = &batchv1.SuccessPolicy{}
		for i := range rec.SuccessRules {
			r := rec.SuccessRules[i].DeepCopy()
			job.Spec.SuccessPolicy.Rules = append(job.Spec.SuccessPolicy.Rules,
				batchv1.SuccessPolicyRule{SucceededIndexes: r.SucceededIndexes, SucceededCount: r.SucceededCount})
		}
	}
	if rec.Scope != "" {
		job.Spec.Template.Labels = map[string]string{v1alpha1.LabelScope: rec.Scope}
	}
	if owner != nil {
		job.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	if rec.Terminal != "" {
		cond := batchv1.JobCondition{Type: batchv1.JobConditionType(rec.Terminal), Status: corev1.ConditionTrue, Reason: rec.TerminalReason}
		if rec.TerminalAt != nil {
			cond.LastTransitionTime = *rec.TerminalAt
		}
		job.Status.Conditions = []batchv1.JobCondition{cond}
	}
	return job
}
