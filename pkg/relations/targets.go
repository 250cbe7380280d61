package relations

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/all"
)

// KindOf is the kind of target ref names (pkg/kinds/all); nil for a target of none.
func KindOf(ref v1alpha1.TargetRef) kinds.Kind { return all.Kinds.For(ref) }

// NamesJob reports whether the target ref names job, under any of its identities: a Job
// target by its name, a child target when job is its child (any restart attempt).
func NamesJob(ref v1alpha1.TargetRef, job metav1.Object) bool { return all.Kinds.NamesJob(ref, job) }

// ResolveTarget finds the Job a target names in namespace, and its restart attempt
// (Kind.Resolve). It returns nil when no such Job exists, when the target names another
// namespace, or names no kind. It answers for an account that follows no identity yet:
// the reconciler and the Job recorder resolve through ResolveFollowed, told the one the
// account follows, so that they never disagree about which Job an account is following.
func ResolveTarget(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (*batchv1.Job, int32, error) {
	k := KindOf(ref)
	if k == nil || (ref.Namespace != "" && ref.Namespace != namespace) {
		return nil, 0, nil
	}
	return k.Resolve(ctx, r, namespace, ref)
}

// ResolveFollowed is ResolveTarget for an account that follows the identity followed for
// ref (the zero value: none), for the kinds whose answer depends on it (their
// ResolveObserved: a Job made about its owner's end is followed only as a later child
// than the one followed, jobset.MayBeFollowed). The reconciler observes through it, and
// the Job recorder asks it whether the account will record a Job being deleted: held for
// an account that never follows it, the Job would wait MaxHold for a record no one
// writes. It may return a kinds.CacheLagError, which the caller waits out.
func ResolveFollowed(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef, followed kinds.Followed) (*batchv1.Job, int32, error) {
	k, ok := KindOf(ref).(followedResolver)
	if !ok || ref.Namespace != "" && ref.Namespace != namespace {
		return ResolveTarget(ctx, r, namespace, ref)
	}
	return k.ResolveObserved(ctx, r, namespace, ref, followed)
}

// followedResolver is a kind whose resolution of a target depends on the identity the
// account follows for it (jobset.Kind.ResolveObserved, trainjob.Kind.ResolveObserved).
type followedResolver interface {
	ResolveObserved(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef, observed kinds.Followed) (*batchv1.Job, int32, error)
}

// TargetEnded says why the owner of a child target will create no more Jobs for it
// (Kind.Ended); always "" for a Job target.
func TargetEnded(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (string, error) {
	k := KindOf(ref)
	if k == nil {
		return "", nil
	}
	return k.Ended(ctx, r, namespace, ref)
}

// JobsFrom is a reader of Jobs from jobs and of everything else from rest: the
// reconciler resolves a target its cache does not hold (a Job without the scope label on
// its metadata) from the API server, with the JobSet or TrainJob above it still read
// from the cache.
func JobsFrom(jobs, rest client.Reader) client.Reader { return jobsReader{jobs: jobs, rest: rest} }

type jobsReader struct{ jobs, rest client.Reader }

func (r jobsReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*batchv1.Job); ok {
		return r.jobs.Get(ctx, key, obj, opts...)
	}
	return r.rest.Get(ctx, key, obj, opts...)
}

func (r jobsReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*batchv1.JobList); ok {
		return r.jobs.List(ctx, list, opts...)
	}
	return r.rest.List(ctx, list, opts...)
}
