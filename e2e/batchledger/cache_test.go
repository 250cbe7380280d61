package batchledger

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/controller"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// scopeLabels reads how many Jobs and Workloads the controller labelled itself.
func scopeLabels(t *testing.T) (jobs, workloads float64) {
	t.Helper()
	m := framework.ScrapeManager(t, localcluster.BatchledgerName)
	return m.Sum(controller.MetricScopeLabels, map[string]string{"kind": "Job"}),
		m.Sum(controller.MetricScopeLabels, map[string]string{"kind": "Workload"})
}

// TestOnlyAccountedJobsReachTheCache: the controller's caches hold only the Jobs and
// Workloads labelled batchledger.dev/scope. A Job no account names, and its Workload,
// never get the label. A Job that was already running when its account came (created
// unlabelled) is found all the same: the controller labels its metadata and its
// Workload, covers it and publishes on its Workload. A Job created after its account is
// labelled by the webhook and its Workload by Kueue (labelKeysToCopy): the controller
// labels neither itself.
func TestOnlyAccountedJobsReachTheCache(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	jobsBefore, workloadsBefore := scopeLabels(t)

	plain := wrappers.MakeJob("plain", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
	f.Create(plain)
	late := wrappers.MakeJob("late", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
	f.Create(late)
	framework.RunningPods(t, late, 2)
	lateWL := framework.WorkloadFor(t, late)
	if _, ok := lateWL.Labels[v1alpha1.LabelScope]; ok {
		t.Fatalf("Workload %s of an unaccounted Job is labelled %s", lateWL.Name, v1alpha1.LabelScope)
	}

	f.Create(wrappers.MakeBatchAccount("late", f.Namespace).Shards("A", "B").AssignJob("late", "0-1", "A", "B").Obj())
	framework.WaitFor(t, late, framework.DefaultTimeout, "labelled "+v1alpha1.LabelScope+" on its metadata", func(j *batchv1.Job) bool {
		return j.Labels[v1alpha1.LabelScope] == v1alpha1.ScopeCoverage
	})
	if _, ok := late.Spec.Template.Labels[v1alpha1.LabelScope]; ok {
		t.Errorf("running Job late had its template stamped: %v", late.Spec.Template.Labels)
	}
	framework.WaitFor(t, lateWL, framework.DefaultTimeout, "labelled "+v1alpha1.LabelScope, func(wl *kueue.Workload) bool {
		return wl.Labels[v1alpha1.LabelScope] != ""
	})
	for i := range 2 {
		framework.FinishIndexPod(t, late, i, 0, "")
	}
	waitAccount(t, f, "late", "both shards covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 2 })
	framework.WaitFor(t, lateWL, framework.DefaultTimeout, v1alpha1.WorkloadConditionShardsCovered+"=True", func(wl *kueue.Workload) bool {
		return apimeta.IsStatusConditionTrue(wl.Status.Conditions, v1alpha1.WorkloadConditionShardsCovered)
	})

	// Account first: the webhook labels the Job, Kueue its Workload.
	f.Create(wrappers.MakeBatchAccount("early", f.Namespace).Shards("C", "D").AssignJob("early", "0-1", "C", "D").Obj())
	early := wrappers.MakeJob("early", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
	f.Create(early)
	if got := early.Labels[v1alpha1.LabelScope]; got != v1alpha1.ScopeCoverage {
		t.Errorf("Job early created with %s=%q on its metadata, want %q", v1alpha1.LabelScope, got, v1alpha1.ScopeCoverage)
	}
	if got := framework.WorkloadFor(t, early).Labels[v1alpha1.LabelScope]; got != v1alpha1.ScopeCoverage {
		t.Errorf("Kueue created the Workload of early with %s=%q, want %q copied from the Job", v1alpha1.LabelScope, got, v1alpha1.ScopeCoverage)
	}
	for i := range 2 {
		framework.FinishIndexPod(t, early, i, 0, "")
	}
	waitAccountCondition(t, f, "early", v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered)

	for i := range 2 {
		framework.FinishIndexPod(t, plain, i, 0, "")
	}
	framework.WaitForJobCondition(t, plain, batchv1.JobComplete)
	if got, ok := plain.Labels[v1alpha1.LabelScope]; ok {
		t.Errorf("unaccounted Job plain labelled %s=%q", v1alpha1.LabelScope, got)
	}
	if got, ok := framework.WorkloadFor(t, plain).Labels[v1alpha1.LabelScope]; ok {
		t.Errorf("the Workload of unaccounted Job plain labelled %s=%q", v1alpha1.LabelScope, got)
	}

	jobsAfter, workloadsAfter := scopeLabels(t)
	if got := jobsAfter - jobsBefore; got != 1 {
		t.Errorf("the controller labelled %v Jobs, want 1 (late)", got)
	}
	if got := workloadsAfter - workloadsBefore; got != 1 {
		t.Errorf("the controller labelled %v Workloads, want 1 (late's)", got)
	}
}
