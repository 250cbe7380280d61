package batchledger

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/repair"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
	"batchledger.dev/batchledger/pkg/worker"
)

// pythonWorker runs the last step of a Python worker (python/batchledger_worker.py) as
// the pod's container would: its environment is what the downward API gives it from the
// pod's annotations, and it writes its result to a termination-log file, whose content
// is returned. Without python3 the same message is built by pkg/result.
func pythonWorker(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	env := []string{
		worker.EnvShard + "=" + pod.Annotations[v1alpha1.AnnotationShard],
		worker.EnvInputRevision + "=" + pod.Annotations[v1alpha1.AnnotationInputRev],
		worker.EnvModelRevision + "=" + pod.Annotations[v1alpha1.AnnotationModelRev],
		worker.EnvAccount + "=" + pod.Annotations[v1alpha1.AnnotationAccount],
		worker.EnvIndex + "=" + pod.Annotations[batchv1.JobCompletionIndexAnnotation],
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Logf("python3 not found: pod %s reports through pkg/result instead", pod.Name)
		return report(t, pod.Annotations[v1alpha1.AnnotationShard], pod.Annotations[v1alpha1.AnnotationModelRev], "sha256:"+pod.Annotations[v1alpha1.AnnotationShard])
	}
	path := filepath.Join(t.TempDir(), "termination-log")
	const script = `
import sys
sys.path.insert(0, sys.argv[1])
import batchledger_worker as bl
a = bl.assignment_from_env()
assert a.source == "annotation", a
bl.report_success(a, digest="sha256:" + a.shard, output="s3://batches/" + a.shard, records=1000, valid=1000, path=sys.argv[2])
`
	cmd := exec.Command(py, "-c", script, filepath.Join("..", "..", "python"), path)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python worker of pod %s: %v\n%s", pod.Name, err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPodsAreToldTheirShard: the pods of a Job an account names are annotated, at
// creation, with the shard the account assigns their index and the revisions to report;
// a repair Job's pod is told the shard its repair assignment gives it. Each pod's worker
// (the Python module, through the downward API's environment) reports from these alone,
// with no copied shard list, and the account accepts every result.
func TestPodsAreToldTheirShard(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	shards := []string{"A", "B", "C", "D"}
	f.Create(wrappers.MakeBatchAccount("ij245", f.Namespace).Shards(shards...).AssignJob("j", "0-3", "D", "C", "B", "A").
		RequireResults(seedRule).Obj())
	waitAccount(t, f, "ij245", "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool {
		return len(ba.Status.Conditions) > 0
	})
	job := wrappers.MakeJob("j", f.Namespace).Indexed(4).Parallelism(4).Queue("default").GPU(1).BackoffLimit(0).Obj()
	f.Create(job)

	told := func(pod *corev1.Pod, shard string) {
		t.Helper()
		want := map[string]string{v1alpha1.AnnotationShard: shard, v1alpha1.AnnotationInputRev: "D",
			v1alpha1.AnnotationModelRev: "m-2026-11", v1alpha1.AnnotationAccount: "ij245"}
		for k, v := range want {
			if got := pod.Annotations[k]; got != v {
				t.Errorf("pod %s (index %s): annotation %s = %q, want %q", pod.Name, pod.Annotations[batchv1.JobCompletionIndexAnnotation], k, got, v)
			}
		}
	}
	// Index i is assigned the shards in reverse: nothing but the account could tell it.
	for i := range 4 {
		pod := framework.RunningIndexPod(t, job, i)
		told(pod, shards[3-i])
		if i == 3 {
			framework.FinishPod(t, pod, 1, "") // shard A fails for good (backoffLimit 0)
			continue
		}
		framework.FinishPod(t, pod, 0, pythonWorker(t, pod))
	}
	framework.WaitForJobCondition(t, job, batchv1.JobFailed)
	// Repair acts on what the account recorded: wait for it to record the Job's failure,
	// not only the Job's own condition.
	waitAccount(t, f, "ij245", "shard A missing, the Job's failure recorded", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/j")
		return ba.Status.Shards.Missing == "A" && tg != nil && tg.Terminal == string(batchv1.JobFailed)
	})

	plan, err := repair.Run(f.Ctx, f.Client, f.Namespace, "ij245", options.DryRunNone)
	if err != nil {
		t.Fatalf("repair: %v", err)
	}
	if len(plan.Repairs) != 1 || plan.Repairs[0].Shards != "A" {
		t.Fatalf("repair plan = %+v", plan)
	}
	repair := jobStatus(t, f, plan.Repairs[0].Job.Name)
	pod := framework.RunningIndexPod(t, repair, 0)
	told(pod, "A")
	framework.FinishPod(t, pod, 0, pythonWorker(t, pod))

	waitAccountCondition(t, f, "ij245", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	// Four results recorded, none rejected: each worker reported exactly what it was told.
	ba := waitAccount(t, f, "ij245", "four results recorded", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Results.Recorded == 4 })
	if r := ba.Status.Results; r.Rejected != 0 || r.Conflicts != 0 {
		t.Errorf("results = %+v, want none rejected or conflicting", r)
	}
}
