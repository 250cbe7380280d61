package job

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/shortform"
)

// Kind is the batch/v1 Job named by a target {job: NAME}: one identity per Job object
// of that name (a Job deleted and created again under the name is a new identity).
type Kind struct{}

var _ kinds.Kind = Kind{}

// Name implements kinds.Kind.
func (Kind) Name() string { return v1alpha1.TargetKindJob }

// Object implements kinds.Kind.
func (Kind) Object() schema.GroupVersionKind { return batchv1.SchemeGroupVersion.WithKind("Job") }

// OptionalAPI implements kinds.Kind: batch/v1 is always served.
func (Kind) OptionalAPI() bool { return false }

// NewObject implements kinds.Kind.
func (Kind) NewObject() client.Object { return &batchv1.Job{} }

// JobKeys implements kinds.Kind: a Job answers to its name.
func (Kind) JobKeys(job metav1.Object) []kinds.IndexKey {
	return []kinds.IndexKey{kinds.Key(v1alpha1.TargetKindJob, job.GetName())}
}

// PodTarget implements kinds.Kind: a Job's index pod is its Job target's.
func (Kind) PodTarget(job string, _ map[string]string) (v1alpha1.TargetRef, bool) {
	return v1alpha1.TargetRef{Job: job}, true
}

// NamesJob implements kinds.Kind: by name.
func (Kind) NamesJob(ref v1alpha1.TargetRef, job metav1.Object) bool { return ref.Job == job.GetName() }

// CandidateLabels implements kinds.Kind: a Job by name has no candidates to select.
func (Kind) CandidateLabels(v1alpha1.TargetRef) map[string]string { return nil }

// RestartAttempt implements kinds.Kind: a Job is not restarted by an owner.
func (Kind) RestartAttempt(metav1.Object) int32 { return 0 }

// Resolve implements kinds.Kind: the Job of that name.
func (Kind) Resolve(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (*batchv1.Job, int32, error) {
	var job batchv1.Job
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Job}, &job)
	if apierrors.IsNotFound(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return &job, 0, nil
}

// Ended implements kinds.Kind: no owner recreates a Job by name.
func (Kind) Ended(context.Context, client.Reader, string, v1alpha1.TargetRef) (string, error) {
	return "", nil
}

// WorkloadOwner implements kinds.Kind: Kueue makes a plain Job's Workload the Job's.
func (Kind) WorkloadOwner(_ context.Context, _ client.Reader, _ v1alpha1.TargetRef, job *batchv1.Job) (types.UID, error) {
	return job.UID, nil
}

// StampScope implements kinds.Kind: a Job has no template beyond its own.
func (Kind) StampScope(context.Context, client.Client, string, v1alpha1.TargetRef, string) (int, error) {
	return 0, nil
}

// FinishedAt implements kinds.Kind: when the Job recorded Complete or Failed.
func (Kind) FinishedAt(obj client.Object) (time.Time, bool) {
	if job, ok := obj.(*batchv1.Job); ok {
		for _, c := range job.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				return c.LastTransitionTime.Time, true
			}
		}
	}
	return time.Time{}, false
}

// ShortForm implements kinds.Kind: indexes 0..n-1 onto the n shards, in order. A shard
// count that differs from completions is left for the account to report
// (UnmappedIndexes / IndexOutOfRange), not silently adjusted.
func (Kind) ShortForm(obj client.Object) (v1alpha1.BatchAccountSpec, error) {
	spec, n, err := shortform.Common(obj.GetAnnotations())
	if err != nil {
		return spec, err
	}
	spec.Assignments = []v1alpha1.Assignment{{
		Target:        v1alpha1.TargetRef{Job: obj.GetName()},
		Indexes:       indexset.Range(0, n-1).String(),
		ShardOrdinals: indexset.Range(0, n-1).String(),
	}}
	return spec, nil
}
