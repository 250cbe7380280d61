package batchledger

import (
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// h100Queue is a LocalQueue "default" on a ClusterQueue of gpus h100 GPUs.
func h100Queue(f *framework.Framework, gpus string) string {
	return f.GPUQueue("default", wrappers.GPUFlavorQuotas("h100", "64", "512Gi", gpus))
}

// preemptionQueue is a LocalQueue "default" on a ClusterQueue of 4 h100 GPUs that preempts
// lower priorities within itself, and WorkloadPriorityClasses NAMESPACE-low (10) and
// NAMESPACE-high (1000).
func preemptionQueue(t *testing.T, f *framework.Framework) {
	t.Helper()
	framework.EnsureGPUFlavors(t)
	cq := wrappers.MakeClusterQueue(f.Namespace + "-pq").WithinClusterQueue(kueue.PreemptionPolicyLowerPriority).
		ResourceGroup(wrappers.GPUFlavorQuotas("h100", "64", "512Gi", "4")).Obj()
	f.Create(cq)
	f.Create(wrappers.MakeLocalQueue("default", f.Namespace).ClusterQueue(cq.Name).Obj())
	framework.WaitForClusterQueueActive(t, cq.Name)
	f.Create(wrappers.MakeWorkloadPriorityClass(f.Namespace + "-low").PriorityValue(10).Obj())
	f.Create(wrappers.MakeWorkloadPriorityClass(f.Namespace + "-high").PriorityValue(1000).Obj())
}

// condIs reports whether conds has typ with status and reason, and the condition.
func condIs(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) (bool, string) {
	c := apimeta.FindStatusCondition(conds, typ)
	if c == nil {
		return false, typ + " absent"
	}
	return c.Status == status && (reason == "" || c.Reason == reason), fmt.Sprintf("%s=%s/%s %q", typ, c.Status, c.Reason, c.Message)
}

// waitAccount waits until the account satisfies cond and returns it.
func waitAccount(t *testing.T, f *framework.Framework, name, desc string, cond func(*v1alpha1.BatchAccount) bool) *v1alpha1.BatchAccount {
	t.Helper()
	ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace}}
	framework.WaitFor(t, ba, framework.DefaultTimeout, desc, cond)
	return ba
}

// waitAccountCondition waits for an account condition and returns it.
func waitAccountCondition(t *testing.T, f *framework.Framework, name, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	ba := waitAccount(t, f, name, fmt.Sprintf("%s=%s/%s", typ, status, reason), func(ba *v1alpha1.BatchAccount) bool {
		ok, _ := condIs(ba.Status.Conditions, typ, status, reason)
		return ok
	})
	return *apimeta.FindStatusCondition(ba.Status.Conditions, typ)
}

// waitWorkloadVerdict waits for one of batchledger's conditions on a Workload.
func waitWorkloadVerdict(t *testing.T, wl *kueue.Workload, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	framework.WaitFor(t, wl, framework.DefaultTimeout, fmt.Sprintf("%s=%s/%s", typ, status, reason), func(wl *kueue.Workload) bool {
		ok, _ := condIs(wl.Status.Conditions, typ, status, reason)
		return ok
	})
	return *apimeta.FindStatusCondition(wl.Status.Conditions, typ)
}

// waitWorkloadMessage waits until one of batchledger's conditions on a Workload carries
// exactly message: the reason alone may already match an older verdict.
func waitWorkloadMessage(t *testing.T, wl *kueue.Workload, typ, message string) metav1.Condition {
	t.Helper()
	framework.WaitFor(t, wl, framework.DefaultTimeout, fmt.Sprintf("%s message %q", typ, message), func(wl *kueue.Workload) bool {
		c := apimeta.FindStatusCondition(wl.Status.Conditions, typ)
		return c != nil && c.Message == message
	})
	return *apimeta.FindStatusCondition(wl.Status.Conditions, typ)
}

// target returns the account's status of a target key.
func target(ba *v1alpha1.BatchAccount, key string) *v1alpha1.TargetStatus {
	for i := range ba.Status.Targets {
		if ba.Status.Targets[i].Name == key {
			return &ba.Status.Targets[i]
		}
	}
	return nil
}

// jobStatus reads a Job fresh.
func jobStatus(t *testing.T, f *framework.Framework, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace}}
	f.Get(job)
	return job
}
