package relations

import (
	"context"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds/all"
)

// WorkloadOwner is the object a Workload belongs to, of a kind of target (a Job, a JobSet,
// a TrainJob): its controller when that is of such a kind, else its first owner
// reference of such a kind; nil when it has none.
func WorkloadOwner(wl metav1.Object) *metav1.OwnerReference {
	if ref := metav1.GetControllerOf(wl); ref != nil && all.Kinds.Owning(*ref) != nil {
		return ref
	}
	refs := wl.GetOwnerReferences()
	for i := range refs {
		if ref := &refs[i]; all.Kinds.Owning(*ref) != nil {
			return ref
		}
	}
	return nil
}

// NewestWorkload is the live one of the Workloads of one owner: Kueue may briefly hold
// an old and a new Workload (while it replaces one), and the newest by creation wins; of
// equal creation times the last in wls. It sorts wls in place and returns nil when wls
// is empty.
func NewestWorkload(wls []kueue.Workload) *kueue.Workload {
	if len(wls) == 0 {
		return nil
	}
	slices.SortStableFunc(wls, func(a, b kueue.Workload) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return &wls[len(wls)-1]
}

// NewestWorkloadsByOwner maps each owner UID (WorkloadOwner) to its NewestWorkload, for
// a list of a whole namespace's Workloads. It sorts wls in place.
func NewestWorkloadsByOwner(wls []kueue.Workload) map[types.UID]*kueue.Workload {
	slices.SortStableFunc(wls, func(a, b kueue.Workload) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	out := map[types.UID]*kueue.Workload{}
	for i := range wls {
		if ref := WorkloadOwner(&wls[i]); ref != nil {
			out[ref.UID] = &wls[i]
		}
	}
	return out
}

// WorkloadOfTarget reads the Workload job, the Job target ref resolved to, runs under:
// the NewestWorkload owned by the object its kind names (Kind.WorkloadOwner), through
// IndexOwnerUID; nil when there is none.
//
// The Workload is read-only: from the cache it is its own object, not a copy
// (UnsafeDisableDeepCopy). Every reconcile reads the Workload of each target, and only
// reads it: conditions are published with an apply configuration of their own.
func WorkloadOfTarget(ctx context.Context, r client.Reader, ref v1alpha1.TargetRef, job *batchv1.Job) (*kueue.Workload, error) {
	k := KindOf(ref)
	if k == nil {
		return nil, nil
	}
	owner, err := k.WorkloadOwner(ctx, r, ref, job)
	if err != nil || owner == "" {
		return nil, err
	}
	var wls kueue.WorkloadList
	if err := r.List(ctx, &wls, client.InNamespace(job.Namespace), client.MatchingFields{IndexOwnerUID: string(owner)},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return NewestWorkload(wls.Items), nil
}
