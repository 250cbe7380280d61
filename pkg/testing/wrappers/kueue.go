// Package wrappers provides fluent builders for the objects batchledger tests create or
// observe: Kueue queueing objects and Workloads (kueue.x-k8s.io/v1beta2), batch/v1 Jobs,
// JobSets (v1alpha2), Pods and BatchAccounts. They follow the style of Kueue's
// pkg/util/testing wrappers: Make<Kind>(...) returns a wrapper, each method sets one aspect
// and returns the wrapper, Obj() returns the object. Status setters (Job Completed,
// Complete, Failed; Workload Admitted, Evicted, Finished; Pod Succeeded; BatchAccount
// Condition) write what the owning controller would, so unit tests can stand in for it.
// Every package's tests share these builders: the package imports none of batchledger's
// own packages but the API, so the pure core's tests can use it too.
//
// Defaults are the ones GPU batch tests want, so a test spells out only what it is about:
// Jobs run one container "worker" with image my-trainer:1.0 and restartPolicy Never.
package wrappers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

const (
	// QueueLabel names the LocalQueue a Job or JobSet is submitted to.
	QueueLabel = "kueue.x-k8s.io/queue-name"
	// PriorityClassLabel names the WorkloadPriorityClass of a Job or JobSet.
	PriorityClassLabel = "kueue.x-k8s.io/priority-class"
	// GPU is the extended resource of NVIDIA GPUs.
	GPU corev1.ResourceName = "nvidia.com/gpu"
)

// ResourceFlavorWrapper builds a ResourceFlavor.
type ResourceFlavorWrapper struct{ kueue.ResourceFlavor }

// MakeResourceFlavor starts a ResourceFlavor.
func MakeResourceFlavor(name string) *ResourceFlavorWrapper {
	return &ResourceFlavorWrapper{kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// NodeLabel adds a node label the flavor selects, and Kueue injects as a nodeSelector.
func (w *ResourceFlavorWrapper) NodeLabel(k, v string) *ResourceFlavorWrapper {
	if w.Spec.NodeLabels == nil {
		w.Spec.NodeLabels = map[string]string{}
	}
	w.Spec.NodeLabels[k] = v
	return w
}

// Toleration adds a toleration Kueue injects into admitted pods.
func (w *ResourceFlavorWrapper) Toleration(t corev1.Toleration) *ResourceFlavorWrapper {
	w.Spec.Tolerations = append(w.Spec.Tolerations, t)
	return w
}

// Obj returns the ResourceFlavor.
func (w *ResourceFlavorWrapper) Obj() *kueue.ResourceFlavor { return &w.ResourceFlavor }

// FlavorQuotasWrapper builds the quotas of one flavor in a ResourceGroup.
type FlavorQuotasWrapper struct{ kueue.FlavorQuotas }

// MakeFlavorQuotas starts the quotas of the named flavor.
func MakeFlavorQuotas(flavor string) *FlavorQuotasWrapper {
	return &FlavorQuotasWrapper{kueue.FlavorQuotas{Name: kueue.ResourceFlavorReference(flavor)}}
}

// Resource adds a resource quota: nominal quota, then optionally borrowing limit and lending
// limit ("" skips one).
func (w *FlavorQuotasWrapper) Resource(name corev1.ResourceName, nominal string, limits ...string) *FlavorQuotasWrapper {
	q := kueue.ResourceQuota{Name: name, NominalQuota: resource.MustParse(nominal)}
	if len(limits) > 0 && limits[0] != "" {
		q.BorrowingLimit = new(resource.MustParse(limits[0]))
	}
	if len(limits) > 1 && limits[1] != "" {
		q.LendingLimit = new(resource.MustParse(limits[1]))
	}
	if len(limits) > 2 {
		panic("Resource takes a nominal quota and at most a borrowing and a lending limit")
	}
	w.Resources = append(w.Resources, q)
	return w
}

// Obj returns the FlavorQuotas.
func (w *FlavorQuotasWrapper) Obj() kueue.FlavorQuotas { return w.FlavorQuotas }

// GPUFlavorQuotas is the common case: quotas for cpu, memory and nvidia.com/gpu on a flavor.
func GPUFlavorQuotas(flavor, cpu, memory, gpus string) kueue.FlavorQuotas {
	return MakeFlavorQuotas(flavor).
		Resource(corev1.ResourceCPU, cpu).
		Resource(corev1.ResourceMemory, memory).
		Resource(GPU, gpus).Obj()
}

// ClusterQueueWrapper builds a ClusterQueue.
type ClusterQueueWrapper struct{ kueue.ClusterQueue }

// MakeClusterQueue starts a ClusterQueue that accepts workloads from every namespace.
func MakeClusterQueue(name string) *ClusterQueueWrapper {
	return &ClusterQueueWrapper{kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       kueue.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}},
	}}
}

// Cohort puts the queue in a cohort, whose members borrow each other's unused quota.
func (w *ClusterQueueWrapper) Cohort(cohort string) *ClusterQueueWrapper {
	w.Spec.CohortName = kueue.CohortReference(cohort)
	return w
}

// ReclaimWithinCohort sets which workloads of other queues in the cohort may be preempted to
// get the queue's nominal quota back.
func (w *ClusterQueueWrapper) ReclaimWithinCohort(p kueue.PreemptionPolicy) *ClusterQueueWrapper {
	w.preemption().ReclaimWithinCohort = p
	return w
}

// WithinClusterQueue sets which workloads of the queue itself a pending one may preempt.
func (w *ClusterQueueWrapper) WithinClusterQueue(p kueue.PreemptionPolicy) *ClusterQueueWrapper {
	w.preemption().WithinClusterQueue = p
	return w
}

func (w *ClusterQueueWrapper) preemption() *kueue.ClusterQueuePreemption {
	if w.Spec.Preemption == nil {
		w.Spec.Preemption = &kueue.ClusterQueuePreemption{}
	}
	return w.Spec.Preemption
}

// ResourceGroup adds a resource group over the given flavors, in order of preference. Its
// covered resources are those of the first flavor; every flavor must list the same
// resources in the same order, as Kueue requires.
func (w *ClusterQueueWrapper) ResourceGroup(flavors ...kueue.FlavorQuotas) *ClusterQueueWrapper {
	w.Spec.ResourceGroups = append(w.Spec.ResourceGroups, ResourceGroup(flavors...))
	return w
}

// ResourceGroup builds a resource group over flavors (see ClusterQueueWrapper.ResourceGroup).
func ResourceGroup(flavors ...kueue.FlavorQuotas) kueue.ResourceGroup {
	rg := kueue.ResourceGroup{Flavors: flavors}
	if len(flavors) == 0 {
		return rg
	}
	for _, r := range flavors[0].Resources {
		rg.CoveredResources = append(rg.CoveredResources, r.Name)
	}
	for _, f := range flavors[1:] {
		if len(f.Resources) != len(rg.CoveredResources) {
			panic("every flavor of a resource group must list the same resources")
		}
		for i, r := range f.Resources {
			if r.Name != rg.CoveredResources[i] {
				panic("every flavor of a resource group must list the same resources in the same order")
			}
		}
	}
	return rg
}

// StopPolicy sets the queue's stop policy (None, Hold, HoldAndDrain).
func (w *ClusterQueueWrapper) StopPolicy(p kueue.StopPolicy) *ClusterQueueWrapper {
	w.Spec.StopPolicy = &p
	return w
}

// AdmissionCheck makes every Workload of the queue wait for the AdmissionCheck named
// name (a MultiKueue check dispatches them to worker clusters).
func (w *ClusterQueueWrapper) AdmissionCheck(name string) *ClusterQueueWrapper {
	if w.Spec.AdmissionChecksStrategy == nil {
		w.Spec.AdmissionChecksStrategy = &kueue.AdmissionChecksStrategy{}
	}
	s := w.Spec.AdmissionChecksStrategy
	s.AdmissionChecks = append(s.AdmissionChecks, kueue.AdmissionCheckStrategyRule{Name: kueue.AdmissionCheckReference(name)})
	return w
}

// Obj returns the ClusterQueue.
func (w *ClusterQueueWrapper) Obj() *kueue.ClusterQueue { return &w.ClusterQueue }

// LocalQueueWrapper builds a LocalQueue.
type LocalQueueWrapper struct{ kueue.LocalQueue }

// MakeLocalQueue starts a LocalQueue in a namespace.
func MakeLocalQueue(name, ns string) *LocalQueueWrapper {
	return &LocalQueueWrapper{kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}}
}

// ClusterQueue points the LocalQueue at a ClusterQueue.
func (w *LocalQueueWrapper) ClusterQueue(cq string) *LocalQueueWrapper {
	w.Spec.ClusterQueue = kueue.ClusterQueueReference(cq)
	return w
}

// StopPolicy sets the LocalQueue's stop policy.
func (w *LocalQueueWrapper) StopPolicy(p kueue.StopPolicy) *LocalQueueWrapper {
	w.Spec.StopPolicy = &p
	return w
}

// Obj returns the LocalQueue.
func (w *LocalQueueWrapper) Obj() *kueue.LocalQueue { return &w.LocalQueue }

// WorkloadPriorityClassWrapper builds a WorkloadPriorityClass.
type WorkloadPriorityClassWrapper struct{ kueue.WorkloadPriorityClass }

// MakeWorkloadPriorityClass starts a WorkloadPriorityClass.
func MakeWorkloadPriorityClass(name string) *WorkloadPriorityClassWrapper {
	return &WorkloadPriorityClassWrapper{kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// PriorityValue sets the priority; higher values are admitted first and may preempt.
func (w *WorkloadPriorityClassWrapper) PriorityValue(v int32) *WorkloadPriorityClassWrapper {
	w.Value = v
	return w
}

// Description sets the description.
func (w *WorkloadPriorityClassWrapper) Description(d string) *WorkloadPriorityClassWrapper {
	w.WorkloadPriorityClass.Description = d
	return w
}

// Obj returns the WorkloadPriorityClass.
func (w *WorkloadPriorityClassWrapper) Obj() *kueue.WorkloadPriorityClass {
	return &w.WorkloadPriorityClass
}
