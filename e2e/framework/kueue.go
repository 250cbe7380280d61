package framework

import (
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// GPUFlavors are the ResourceFlavors matching the local cluster's GPU nodes.
var GPUFlavors = []string{"h100", "a100"}

// EnsureGPUFlavors creates the ResourceFlavors h100 and a100 (node label gpu-type) unless
// they exist. They are shared by every test and never deleted: Kueue refuses to delete a
// flavor a ClusterQueue still uses.
func EnsureGPUFlavors(t testing.TB) {
	t.Helper()
	for _, name := range GPUFlavors {
		rf := wrappers.MakeResourceFlavor(name).NodeLabel(localcluster.GPUTypeLabel, name).Obj()
		if err := env.client.Create(t.Context(), rf); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create ResourceFlavor %s: %v", name, err)
		}
	}
}

// GPUQueue sets up the queueing objects a GPU test needs: the GPU flavors, a ClusterQueue
// "<namespace>-<name>" (no cohort, so no other test's quota leaks in) with the given flavor
// quotas, and a LocalQueue <name> in the test namespace pointing at it. It waits until the
// ClusterQueue is active and returns its name.
func (f *Framework) GPUQueue(name string, flavors ...kueue.FlavorQuotas) string {
	f.T.Helper()
	EnsureGPUFlavors(f.T)
	cq := wrappers.MakeClusterQueue(f.Namespace + "-" + name).ResourceGroup(flavors...).Obj()
	f.Create(cq)
	f.Create(wrappers.MakeLocalQueue(name, f.Namespace).ClusterQueue(cq.Name).Obj())
	WaitForClusterQueueActive(f.T, cq.Name)
	return cq.Name
}

// WaitForClusterQueueActive waits until Kueue reports the ClusterQueue Active (its flavors
// exist and its configuration is valid).
func WaitForClusterQueueActive(t testing.TB, name string) {
	t.Helper()
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}}
	WaitFor(t, cq, DefaultTimeout, "Active", func(cq *kueue.ClusterQueue) bool {
		return apimeta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive)
	})
}

// WaitForAbsent waits until a (cluster-scoped) object is gone, for fixed-name objects a
// previous run may still be deleting.
func WaitForAbsent(t testing.TB, obj client.Object) {
	t.Helper()
	Eventually(t, DefaultTimeout, describe(obj)+" to be gone", func() (bool, string, error) {
		err := env.client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("still present (deletionTimestamp %v)", obj.GetDeletionTimestamp()), nil
	})
}

// WorkloadFor waits for the Kueue Workload owned by obj (a Job or JobSet) and returns it:
// the one the controller publishes on, the newest of the owner's
// (relations.NewestWorkloadsByOwner).
func WorkloadFor(t testing.TB, owner client.Object) *kueue.Workload {
	t.Helper()
	var found *kueue.Workload
	Eventually(t, DefaultTimeout, "the Workload of "+describe(owner), func() (bool, string, error) {
		var wls kueue.WorkloadList
		if err := env.client.List(t.Context(), &wls, client.InNamespace(owner.GetNamespace())); err != nil {
			return false, "", err
		}
		if found = relations.NewestWorkloadsByOwner(wls.Items)[owner.GetUID()]; found != nil {
			return true, "", nil
		}
		var names []string
		for i := range wls.Items {
			names = append(names, wls.Items[i].Name)
		}
		return false, "workloads in namespace: " + strings.Join(names, ", "), nil
	})
	return found
}

// WaitForWorkloadCondition waits until the Workload has the condition with the given status
// and returns the condition.
func WaitForWorkloadCondition(t testing.TB, wl *kueue.Workload, condType string, status metav1.ConditionStatus) metav1.Condition {
	t.Helper()
	var cond metav1.Condition
	WaitFor(t, wl, DefaultTimeout, fmt.Sprintf("condition %s=%s", condType, status), func(wl *kueue.Workload) bool {
		c := apimeta.FindStatusCondition(wl.Status.Conditions, condType)
		if c != nil && c.Status == status {
			cond = *c
			return true
		}
		return false
	})
	return cond
}

// AdmittedFlavors returns, for each podset of an admitted Workload, the flavor assigned to
// each resource ("workers" → nvidia.com/gpu → "h100").
func AdmittedFlavors(wl *kueue.Workload) map[string]map[string]string {
	out := map[string]map[string]string{}
	if wl.Status.Admission == nil {
		return out
	}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		m := map[string]string{}
		for r, f := range psa.Flavors {
			m[string(r)] = string(f)
		}
		out[string(psa.Name)] = m
	}
	return out
}
