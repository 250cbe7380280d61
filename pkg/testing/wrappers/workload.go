package wrappers

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// WorkloadWrapper builds a Kueue Workload as Kueue's job reconciler creates it for a Job or
// JobSet, and, through its status setters, as Kueue's scheduler and workload controller
// then write it.
type WorkloadWrapper struct{ kueue.Workload }

// MakeWorkload starts a Workload with no owner and an empty status.
func MakeWorkload(name, ns string) *WorkloadWrapper {
	return &WorkloadWrapper{kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}}
}

// UID sets the Workload's UID.
func (w *WorkloadWrapper) UID(uid string) *WorkloadWrapper {
	w.ObjectMeta.UID = types.UID(uid)
	return w
}

// ResourceVersion sets the Workload's resourceVersion.
func (w *WorkloadWrapper) ResourceVersion(rv string) *WorkloadWrapper {
	w.ObjectMeta.ResourceVersion = rv
	return w
}

// Generation sets metadata.generation.
func (w *WorkloadWrapper) Generation(g int64) *WorkloadWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// Creation sets the creation timestamp: of two Workloads of one owner, the newest is live.
func (w *WorkloadWrapper) Creation(t time.Time) *WorkloadWrapper {
	w.CreationTimestamp = metav1.NewTime(t)
	return w
}

// Label sets a label on the Workload (Kueue's kueue.x-k8s.io/job-uid, a label it copies
// from its job by labelKeysToCopy).
func (w *WorkloadWrapper) Label(k, v string) *WorkloadWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// ControlledBy sets a controller owner reference to owner of kind gvk.
func (w *WorkloadWrapper) ControlledBy(owner metav1.Object, gvk schema.GroupVersionKind) *WorkloadWrapper {
	w.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)}
	return w
}

// ForJob makes job the Workload's controller owner, as for a Job queued on its own.
func (w *WorkloadWrapper) ForJob(job *batchv1.Job) *WorkloadWrapper {
	return w.ControlledBy(job, batchv1.SchemeGroupVersion.WithKind("Job"))
}

// ForJobSet makes js the Workload's controller owner: one Workload for all its Jobs.
func (w *WorkloadWrapper) ForJobSet(js *jobset.JobSet) *WorkloadWrapper {
	return w.ControlledBy(js, jobset.SchemeGroupVersion.WithKind("JobSet"))
}

// Status setters.

// Condition sets a status condition (replacing one of the same type), as
// apimeta.SetStatusCondition does.
func (w *WorkloadWrapper) Condition(c metav1.Condition) *WorkloadWrapper {
	apimeta.SetStatusCondition(&w.Status.Conditions, c)
	return w
}

// Admitted records an admission by ClusterQueue cq at t: status.admission and the
// QuotaReserved and Admitted conditions. FlavorAssigned adds flavors to it.
func (w *WorkloadWrapper) Admitted(cq string, at time.Time) *WorkloadWrapper {
	w.Status.Admission = &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(cq)}
	t := metav1.NewTime(at)
	w.Condition(metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", LastTransitionTime: t})
	return w.Condition(metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: t})
}

// FlavorAssigned records that the admission gave podSet resource res of flavor; the
// Workload must be Admitted.
func (w *WorkloadWrapper) FlavorAssigned(podSet string, res corev1.ResourceName, flavor string) *WorkloadWrapper {
	adm := w.Status.Admission
	for i := range adm.PodSetAssignments {
		if psa := &adm.PodSetAssignments[i]; string(psa.Name) == podSet {
			psa.Flavors[res] = kueue.ResourceFlavorReference(flavor)
			return w
		}
	}
	adm.PodSetAssignments = append(adm.PodSetAssignments, kueue.PodSetAssignment{
		Name:    kueue.PodSetReference(podSet),
		Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{res: kueue.ResourceFlavorReference(flavor)},
	})
	return w
}

// Evicted records an eviction for reason (e.g. Preempted) at t: Evicted True, Admitted
// False.
func (w *WorkloadWrapper) Evicted(reason string, at time.Time) *WorkloadWrapper {
	t := metav1.NewTime(at)
	w.Condition(metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: t})
	return w.Condition(metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "NoReservation", LastTransitionTime: t})
}

// DispatchedTo records that MultiKueue dispatched the Workload to worker cluster
// (status.clusterName), clearing the nominated clusters as Kueue does.
func (w *WorkloadWrapper) DispatchedTo(cluster string) *WorkloadWrapper {
	w.Status.ClusterName, w.Status.NominatedClusterNames = &cluster, nil
	return w
}

// Nominated records the worker clusters MultiKueue is dispatching the Workload to
// (status.nominatedClusterNames).
func (w *WorkloadWrapper) Nominated(clusters ...string) *WorkloadWrapper {
	w.Status.NominatedClusterNames = clusters
	return w
}

// Finished records that the owner finished at t: Finished True.
func (w *WorkloadWrapper) Finished(at time.Time) *WorkloadWrapper {
	return w.Condition(metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: metav1.NewTime(at)})
}

// Obj returns the Workload.
func (w *WorkloadWrapper) Obj() *kueue.Workload { return &w.Workload }
