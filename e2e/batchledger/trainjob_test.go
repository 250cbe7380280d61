package batchledger

import (
	"slices"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestTrainJobShortFormAcceptedWithResults: a TrainJob of 3 nodes declares its account
// in annotations (three shards, results required), is queued through a LocalQueue onto
// h100 GPUs, and its node pods are labelled for the results scope and held for their
// results; each node reports the result
// of its shard, and the verdict Accepted lands on the account and on the TrainJob's own
// Workload.
func TestTrainJobShortFormAcceptedWithResults(t *testing.T) {
	f := framework.New(t)
	skipWithoutTrainJobs(t, f)
	tj := wrappers.MakeTrainJob("llm", f.Namespace, localcluster.TrainerRuntime).NumNodes(3).Queue("default").GPU(1).
		Annotation(v1alpha1.AnnotationInputRev, "D").Annotation(v1alpha1.AnnotationModelRev, "m-2026-11").
		Annotation(v1alpha1.AnnotationShards, "A,B,C").Annotation(v1alpha1.AnnotationRequire, "true").Obj()
	f.Create(tj)

	ba := waitAccount(t, f, "llm", "the short-form account", func(ba *v1alpha1.BatchAccount) bool { return len(ba.Status.Targets) == 1 })
	if got := ba.Spec.Assignments[0].Target.Key(); got != "trainjob/llm/node/0" {
		t.Errorf("short-form target = %s, want trainjob/llm/node/0", got)
	}
	if ba.Labels[v1alpha1.LabelShortFormOf] != trainer.TrainJobKind {
		t.Errorf("short-form account labels %v, want %s=%s", ba.Labels, v1alpha1.LabelShortFormOf, trainer.TrainJobKind)
	}
	// The queue comes once the account is there: pods that start before any account names
	// their Job are not held (a short form's account is created as its object is).
	h100Queue(f, "8")
	wl := trainJobWorkload(t, f, tj)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	job := childJob(t, f, "llm-node-0", "")
	pods := framework.RunningPods(t, job, 3)
	for _, p := range pods {
		if p.Labels[v1alpha1.LabelScope] != v1alpha1.ScopeResults || !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			t.Errorf("node pod %s: scope %q finalizers %v; want held for its result", p.Name, p.Labels[v1alpha1.LabelScope], p.Finalizers)
		}
	}
	for i, s := range []string{"A", "B", "C"} {
		framework.FinishIndexPod(t, job, i, 0, report(t, s, "m-2026-11", "sha256:"+s))
	}
	waitAccountCondition(t, f, "llm", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	ba = waitAccount(t, f, "llm", "3 accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 3 })
	if tg := target(ba, "trainjob/llm/node/0"); tg == nil || tg.UID != job.UID || tg.Workload == nil || tg.Workload.Name != wl.Name {
		t.Errorf("target status %+v; want child Job %s (%s) under Workload %s", tg, job.Name, job.UID, wl.Name)
	}
}

// TestTrainJobEvictionAndNodeFailureKeepTheRecord: a TrainJob of 2 nodes accounted by a
// BatchAccount, on a queue of h100 and a100 GPUs. Its Workload is evicted (deactivated)
// after one node finished on h100, and admitted again on a100 once h100 has no quota:
// the account keeps both admissions, the node that finished under the first. Then a node fails; the
// runtime restarts the JobSet, whose new child Job is a new identity: the old one and
// its coverage go to history, and the batch is covered by the new attempt.
func TestTrainJobEvictionAndNodeFailureKeepTheRecord(t *testing.T) {
	f := framework.New(t)
	skipWithoutTrainJobs(t, f)
	cq := f.GPUQueue("default", wrappers.GPUFlavorQuotas("h100", "64", "512Gi", "8"), wrappers.GPUFlavorQuotas("a100", "64", "512Gi", "8"))
	f.Create(wrappers.MakeBatchAccount("llm", f.Namespace).Shards("A", "B").AssignTrainJob("llm", "node", 0, "0-1", "0-1").Obj())
	tj := wrappers.MakeTrainJob("llm", f.Namespace, localcluster.TrainerRuntime).NumNodes(2).Queue("default").GPU(1).Obj()
	f.Create(tj)
	wl := trainJobWorkload(t, f, tj)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	job := childJob(t, f, "llm-node-0", "")
	framework.RunningPods(t, job, 2)
	framework.FinishIndexPod(t, job, 0, 0, "")
	waitAccount(t, f, "llm", "1/2 covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 1 })

	// Evict: deactivate the Workload; Kueue suspends the TrainJob, Trainer its JobSet.
	setActive(t, f, wl, false)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadEvicted, metav1.ConditionTrue)
	waitAccount(t, f, "llm", "eviction recorded", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "trainjob/llm/node/0")
		return tg != nil && tg.Workload != nil && tg.Workload.Evicted
	})
	// h100 loses its quota: the re-admission can only land on a100.
	var queue kueue.ClusterQueue
	queue.Name = cq
	f.Get(&queue)
	before := queue.DeepCopy()
	for i, fq := range queue.Spec.ResourceGroups[0].Flavors {
		if fq.Name != "h100" {
			continue
		}
		for j := range fq.Resources {
			queue.Spec.ResourceGroups[0].Flavors[i].Resources[j].NominalQuota = resource.MustParse("0")
		}
	}
	// Patched, not updated: Kueue writes the queue's and the Workload's status meanwhile,
	// and an update from the copy read would conflict with that.
	if err := f.Client.Patch(f.Ctx, &queue, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	setActive(t, f, wl, true)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	waitAccountCondition(t, f, "llm", v1alpha1.ConditionAdmitted, metav1.ConditionTrue, "")
	ba := waitAccount(t, f, "llm", "both admissions recorded", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "trainjob/llm/node/0")
		return tg != nil && len(tg.Admissions) == 2
	})
	adm := target(ba, "trainjob/llm/node/0").Admissions
	if !strings.Contains(strings.Join(adm[0].Flavors, ","), "h100") || adm[0].EvictedAt == nil || adm[0].CompletedIndexes != "0" ||
		!strings.Contains(strings.Join(adm[1].Flavors, ","), "a100") {
		t.Errorf("admissions %+v; want h100 (evicted, index 0 completed under it), then a100", adm)
	}

	// A node fails: backoffLimit 0 fails the child Job, and the JobSet restarts once.
	job = childJob(t, f, "llm-node-0", "")
	pods := framework.RunningPods(t, job, 1)
	failed := framework.FinishPod(t, &pods[0], 1, "")
	old := job.UID
	job = childJob(t, f, "llm-node-0", old)
	ba = waitAccount(t, f, "llm", "the failed identity superseded", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "trainjob/llm/node/0")
		return tg != nil && tg.UID == job.UID && tg.RestartAttempt == 1 && len(ba.Status.History) >= 1
	})
	if !slices.ContainsFunc(ba.Status.History, func(h v1alpha1.SupersededIdentity) bool { return h.UID == old }) {
		t.Errorf("history %+v lacks the superseded identity %s (failed pod %s)", ba.Status.History, old, failed.Name)
	}
	framework.RunningPods(t, job, 2)
	framework.FinishIndexPod(t, job, 0, 0, "")
	framework.FinishIndexPod(t, job, 1, 0, "")
	waitAccountCondition(t, f, "llm", v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered)
	framework.WaitFor(t, tj, framework.DefaultTimeout, "TrainJob Complete", func(tj *trainer.TrainJob) bool {
		return apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete)
	})
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
}
