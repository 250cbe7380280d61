package batchledger

import (
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
	"batchledger.dev/batchledger/pkg/worker"
)

// TestKindTrainJobAccepted: a TrainJob of 3 nodes on the kind cluster's torch-distributed
// runtime (hack/kind/trainer: its node runs the example worker) declares its account in
// annotations (shards A..C, results required) and is queued onto the h100 workers. Real
// kubelets run its node pods, which the pod webhook holds for their results; each worker
// writes the result of its shard to its termination message, and the verdict Accepted
// lands on the account and on the TrainJob's Workload, with every pod released.
func TestKindTrainJobAccepted(t *testing.T) {
	f := framework.New(t, framework.OnRealKubelets())
	skipWithoutTrainJobs(t, f)
	tj := wrappers.MakeTrainJob("llm", f.Namespace, localcluster.TrainerRuntime).NumNodes(3).Queue("default").
		GPU(1).Request(corev1.ResourceCPU, "10m").Request(corev1.ResourceMemory, "16Mi").
		Annotation(v1alpha1.AnnotationInputRev, "D").Annotation(v1alpha1.AnnotationModelRev, "m-2026-11").
		Annotation(v1alpha1.AnnotationShards, "A,B,C").Annotation(v1alpha1.AnnotationRequire, "true").Obj()
	// The worker's script: the TrainJob's env reaches every node container.
	tj.Spec.Trainer.Env = []corev1.EnvVar{
		envVar(worker.EnvShards, "A,B,C"),
		envVar(worker.EnvInputRevision, "D"),
		envVar(worker.EnvModelRevision, "m-2026-11"),
		envVar(worker.EnvOutputPrefix, "s3://batches/llm/"),
		envVar(worker.EnvRecords, "1000"),
	}
	f.Create(tj)

	waitAccount(t, f, "llm", "the short-form account", func(ba *v1alpha1.BatchAccount) bool { return len(ba.Status.Targets) == 1 })
	// The queue comes once the account is there: pods that start before any account names
	// their Job are not held (a short form's account is created as its object is).
	h100Queue(f, "8")
	wl := trainJobWorkload(t, f, tj)

	waitAccountCondition(t, f, "llm", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	ba := waitAccount(t, f, "llm", "3 accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 3 })
	if tg := target(ba, "trainjob/llm/node/0"); tg == nil || tg.Workload == nil || tg.Workload.Name != wl.Name {
		t.Errorf("target status %+v; want trainjob/llm/node/0 under Workload %s", tg, wl.Name)
	}
	shards := map[string]bool{}
	for _, r := range recordedResults(t, f, "llm") {
		if r.RejectReason == "" {
			shards[r.Shard] = true
		}
	}
	if len(shards) != 3 {
		t.Errorf("accepted results for shards %v; want A, B and C from the workers", shards)
	}
	job := childJob(t, f, "llm-node-0", "")
	for _, p := range framework.JobPods(t, job) {
		if p.Labels[v1alpha1.LabelScope] != v1alpha1.ScopeResults {
			t.Errorf("node pod %s: scope %q; want held for its result", p.Name, p.Labels[v1alpha1.LabelScope])
		}
		if p.Status.Phase == corev1.PodSucceeded && nodeGPUType(t, f, &p) != "h100" {
			t.Errorf("node pod %s ran on a %q node, want h100", p.Name, nodeGPUType(t, f, &p))
		}
	}
	framework.WaitFor(t, tj, framework.DefaultTimeout, "TrainJob Complete", func(tj *trainer.TrainJob) bool {
		return apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete)
	})
	noHeldPods(t, f)
}
