package relations

import (
	"context"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
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

// WorkloadChildKeys are the keys of the child Jobs, by their Job names, of the owner a
// Workload belongs to (kinds.Owner: a JobSet, the TrainJob whose JobSet they are), as c
// holds them: an account naming an owner's child by its Job name answers to them, since
// Kueue gives the child no Workload of its own and the account has not observed the
// owner's before it first does. None for the Workload of a plain Job.
func WorkloadChildKeys(ctx context.Context, c client.Reader, wl client.Object) ([]IndexKey, error) {
	ref := WorkloadOwner(wl)
	if ref == nil {
		return nil, nil
	}
	k, ok := all.Kinds.Owning(*ref).(kinds.Owner)
	if !ok {
		return nil, nil
	}
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace(wl.GetNamespace()), client.MatchingLabels(k.ChildSelector(ref.Name)),
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	// Labels are anyone's to write: only the Jobs the owner's kind takes for its
	// children (Kind.JobKeys) are.
	owner := kinds.Key(k.Name(), ref.Name)
	var keys []IndexKey
	for i := range jobs.Items {
		if slices.Contains(k.JobKeys(&jobs.Items[i]), owner) {
			keys = append(keys, JobKey(jobs.Items[i].Name))
		}
	}
	return keys, nil
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
	owner, err := WorkloadOwnerUID(ctx, r, ref, job)
	if err != nil || owner == "" {
		return nil, err
	}
	var wls kueue.WorkloadList
	if err := r.List(ctx, &wls, client.InNamespace(job.Namespace), client.MatchingFields{IndexOwnerUID: string(owner)},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	// The UID came from a controller reference anyone who may create the Job wrote: a
	// Job named and labelled as the child of a JobSet that does not exist can carry the
	// UID of another JobSet (or TrainJob) of the namespace. Kueue's Workload names its
	// owner by name and UID, and the owner a Job runs under has the name the Job's
	// controller reference gives (a TrainJob renders the JobSet of its own name).
	return NewestWorkload(ownedBy(wls.Items, owner, job)), nil
}

// ownedBy keeps of wls those that the object of UID owner controls, under the name
// WorkloadOwnerName gives job. When owner is the UID of job's own controller reference,
// which whoever created the Job wrote, the Workload's controller must also be of that
// reference's kind: a JobSet and the TrainJob that renders it share a name, so name and
// UID alone let a Job claiming a JobSet of the TrainJob's UID take the TrainJob's
// Workload. The owner a kind resolves through an object read (a JobSet's TrainJob) is
// of another kind than the Job's reference, and is not held to it.
func ownedBy(wls []kueue.Workload, owner types.UID, job *batchv1.Job) []kueue.Workload {
	name := WorkloadOwnerName(job)
	claimed := metav1.GetControllerOfNoCopy(job)
	if claimed != nil && claimed.UID != owner {
		claimed = nil
	}
	return slices.DeleteFunc(wls, func(wl kueue.Workload) bool {
		ref := metav1.GetControllerOfNoCopy(&wl)
		return ref == nil || ref.UID != owner || ref.Name != name || claimed != nil && !sameKind(ref, claimed)
	})
}

// sameKind reports whether two owner references name the same kind of the same API
// group, of any version.
func sameKind(a, b *metav1.OwnerReference) bool {
	ga, errA := schema.ParseGroupVersion(a.APIVersion)
	gb, errB := schema.ParseGroupVersion(b.APIVersion)
	return errA == nil && errB == nil && a.Kind == b.Kind && ga.Group == gb.Group
}

// WorkloadOwnerName is the name of the object whose Workload job runs under: its
// controller's when that is of a kind of owner (kinds.Owner: a JobSet, or a TrainJob; a
// TrainJob renders the JobSet of its own name, so a JobSet's name is its TrainJob's too),
// else the Job's own.
func WorkloadOwnerName(job *batchv1.Job) string {
	if ref := metav1.GetControllerOfNoCopy(job); ref != nil {
		if _, ok := all.Kinds.Owning(*ref).(kinds.Owner); ok {
			return ref.Name
		}
	}
	return job.Name
}

// WorkloadOwnerUID is the UID of the object whose Workload job, the Job target ref
// resolved to, runs under (Kind.WorkloadOwner); "" for a target of no kind. Kueue gives a
// child Job of an object that controls it (a JobSet's) no Workload of its own, so a child
// named by its Job name runs under its controller's (kinds.Controller), as one named as
// the child does.
func WorkloadOwnerUID(ctx context.Context, r client.Reader, ref v1alpha1.TargetRef, job *batchv1.Job) (types.UID, error) {
	k := KindOf(ref)
	if k == nil {
		return "", nil
	}
	if !ref.IsChild() {
		if uid, ok, err := all.Kinds.ChildWorkloadOwner(ctx, r, job); ok || err != nil {
			return uid, err
		}
	}
	return k.WorkloadOwner(ctx, r, ref, job)
}

// OwnerReplaced reports whether the owner controlling job (a JobSet, kinds.Controller)
// was replaced by an object of its name created after job: no target follows job any
// more.
func OwnerReplaced(ctx context.Context, r client.Reader, job *batchv1.Job) (bool, error) {
	return all.Kinds.OwnerReplaced(ctx, r, job)
}

// LiveWorkloadOf reads from r (the API server) the NewestWorkload of the object of UID
// owner (WorkloadOwnerUID of job) in job's namespace, selected by the label Kueue puts on
// every Workload it makes for a job (kueueconstants.JobUIDLabel), and kept only when
// that object controls it, as WorkloadOfTarget keeps them; nil when there is none.
func LiveWorkloadOf(ctx context.Context, r client.Reader, owner types.UID, job *batchv1.Job) (*kueue.Workload, error) {
	var wls kueue.WorkloadList
	if err := r.List(ctx, &wls, client.InNamespace(job.Namespace), client.MatchingLabels{kueueconstants.JobUIDLabel: string(owner)}); err != nil {
		return nil, err
	}
	// The label is anyone's to set: only the Workloads owner controls count, and, as in
	// WorkloadOfTarget, only under the name (and kind) the Job's controller reference gives.
	return NewestWorkload(ownedBy(wls.Items, owner, job)), nil
}
