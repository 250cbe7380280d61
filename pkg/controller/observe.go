package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// observed is one target's observation plus the Workload object it runs under, which
// the reconciler publishes conditions on.
type observed struct {
	obs      account.Observation
	workload *kueue.Workload
	pods     []corev1.Pod
	// identity is the Job whose pods' results the account records: the observed Job, or,
	// once that Job was deleted, a stand-in carrying the UID the account recorded
	// (recordedIdentity), whose held pods are still captured.
	identity *batchv1.Job
}

// observeTarget reads a target's current Job, its successful pods and its Workload from
// the cache. A target that does not exist yields an empty observation.
func (r *Reconciler) observeTarget(ctx context.Context, namespace string, t account.Target) (observed, error) {
	job, attempt, err := ResolveTarget(ctx, r.Client, namespace, t.Ref)
	if err != nil || job == nil {
		return observed{}, err
	}
	var o observed
	o.obs.Job, o.identity = job, job
	o.obs.RestartAttempt = attempt
	// The pods are only read: listing them without a deep copy saves a copy of every pod
	// of the Job on every reconcile (the largest cost in the load benchmark's profile).
	var pods corev1.PodList
	if job.Spec.Template.Labels[v1alpha1.LabelScope] != "" || r.APIReader == nil {
		if err := r.List(ctx, &pods, client.InNamespace(namespace), client.MatchingFields{IndexOwnerUID: string(job.UID)}, client.UnsafeDisableDeepCopy); err != nil {
			return o, err
		}
	} else {
		// A Job outside the opt-in scope (it started before its account existed): its pods
		// are not in the cache. Only succeeded pods count (attempts, results), so only
		// those are read, straight from the API server.
		if err := r.APIReader.List(ctx, &pods, client.InNamespace(namespace),
			client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)},
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("status.phase", string(corev1.PodSucceeded))}); err != nil {
			return o, err
		}
	}
	o.pods = pods.Items
	o.obs.PodsListed = true
	o.obs.SuccessfulPods = account.SuccessfulAttempts(job, pods.Items)
	// A Job's Workload is owned by the Job; a JobSet child's by the JobSet.
	owner := job.UID
	if ref := metav1.GetControllerOf(job); ref != nil && ref.Kind == "JobSet" {
		owner = ref.UID
	}
	var wls kueue.WorkloadList
	if err := r.List(ctx, &wls, client.InNamespace(namespace), client.MatchingFields{IndexOwnerUID: string(owner)}); err != nil {
		return o, err
	}
	if len(wls.Items) > 0 {
		// Kueue may briefly hold an old and a new Workload; the newest is the live one.
		slices.SortFunc(wls.Items, func(a, b kueue.Workload) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
		o.workload = &wls.Items[len(wls.Items)-1]
		o.obs.Workload = workloadObservation(o.workload)
	}
	return o, nil
}

// ResolveTarget finds the Job a target names, and its JobSet restart attempt. For a JobSet
// target it is the child Job with the replicatedJob and job-index labels and the highest
// restart attempt that is not being deleted: during a restart the old children linger
// while they are deleted. It returns nil when no such Job exists. The reconciler (what it
// observes and captures) and the pod releaser (what it holds) resolve targets with it, so
// that they never disagree about which Job an account is following.
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
	idx := int32(0)
	if ref.JobIndex != nil {
		idx = *ref.JobIndex
	}
	var jobs batchv1.JobList
	if err := r.List(ctx, &jobs, client.InNamespace(namespace), client.MatchingLabels{
		jobsetapi.JobSetNameKey:        ref.JobSet,
		jobsetapi.ReplicatedJobNameKey: ref.ReplicatedJob,
		jobsetapi.JobIndexKey:          strconv.Itoa(int(idx)),
	}); err != nil {
		return nil, 0, err
	}
	var best *batchv1.Job
	bestAttempt := int32(-1)
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if j.DeletionTimestamp != nil {
			continue
		}
		a, _ := strconv.Atoi(j.Labels[LabelRestartAttempt])
		if int32(a) > bestAttempt {
			best, bestAttempt = j, int32(a)
		}
	}
	if best == nil {
		return nil, 0, nil
	}
	return best, bestAttempt, nil
}

// workloadObservation reads admission, eviction and finish from a Kueue Workload.
func workloadObservation(wl *kueue.Workload) *v1alpha1.WorkloadObservation {
	w := &v1alpha1.WorkloadObservation{
		Name:                    wl.Name,
		UID:                     wl.UID,
		Admitted:                apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted),
		Evicted:                 apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted),
		Finished:                apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished),
		ObservedResourceVersion: wl.ResourceVersion,
	}
	if ev := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue {
		w.EvictionReason = ev.Reason
	}
	if adm := wl.Status.Admission; adm != nil {
		w.ClusterQueue = string(adm.ClusterQueue)
		for _, ps := range adm.PodSetAssignments {
			res := make([]string, 0, len(ps.Flavors))
			for name := range ps.Flavors {
				res = append(res, string(name))
			}
			slices.Sort(res)
			for _, name := range res {
				w.Flavors = append(w.Flavors, fmt.Sprintf("%s=%s:%s", ps.Name, name, ps.Flavors[corev1.ResourceName(name)]))
			}
		}
	}
	return w
}
