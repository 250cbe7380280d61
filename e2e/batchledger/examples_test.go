package batchledger

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/worker"
)

// examplesDir is the repository's examples/ folder, from this package's directory.
const (
	examplesDir = "../../examples"
	pythonDir   = "../../python"
)

// TestExamples applies the YAML of each folder of examples/ as written, finishes every pod
// with the result the example worker computes from that pod's own environment, and checks
// that each batch reaches the verdict its README promises: all shards covered and
// Accepted. An example that no longer applies, or whose worker environment no longer
// matches its account, fails here; so does a new folder of YAML that no test applies.
func TestExamples(t *testing.T) {
	examples := []struct {
		dir string
		// setup creates what the example's README has the user create first.
		setup func(t *testing.T, f *framework.Framework)
		// play drives the applied example to its verdict and checks it.
		play func(t *testing.T, f *framework.Framework)
	}{
		{"indexed-job", nil, playIndexedJob},
		{"jobset-shortform", nil, playJobSetShortForm},
		{"python-worker", setupPythonWorker, playPythonWorker},
		{"trainjob", func(t *testing.T, f *framework.Framework) { skipWithoutTrainJobs(t, f) }, playTrainJob},
	}

	tested := map[string]bool{}
	for _, e := range examples {
		tested[e.dir] = true
	}
	yamls, err := filepath.Glob(filepath.Join(examplesDir, "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, y := range yamls {
		if dir := filepath.Base(filepath.Dir(y)); !tested[dir] {
			t.Errorf("examples/%s is applied by no test: add it to TestExamples", dir)
		}
	}
	for _, e := range examples {
		t.Run(e.dir, func(t *testing.T) {
			f := framework.New(t)
			if e.setup != nil {
				e.setup(t, f)
			}
			applyExample(t, f, e.dir)
			e.play(t, f)
		})
	}
}

// playIndexedJob: Job j's four pods report shards A-D; the account ij245 and the Job's
// Workload say Accepted.
func playIndexedJob(t *testing.T, f *framework.Framework) {
	job := jobStatus(t, f, "j")
	finishWithWorkerResults(t, job, 4)
	waitAccountCondition(t, f, "ij245", v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered)
	waitAccountCondition(t, f, "ij245", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	ba := waitAccount(t, f, "ij245", "4 shards accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 4 })
	if ba.Status.Results.Rejected != 0 {
		t.Errorf("rejected results: %+v", ba.Status.Results)
	}
	waitWorkloadVerdict(t, framework.WorkloadFor(t, job), v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
}

// playTrainJob: the node Job the TrainJob's runtime renders runs three pods, each told
// its shard; each reports it with the example worker's result, and the account llm-eval
// and the TrainJob's own Workload say Accepted.
func playTrainJob(t *testing.T, f *framework.Framework) {
	job := childJob(t, f, "llm-eval-node-0", "")
	finishWithWorkerResults(t, job, 3)
	waitAccountCondition(t, f, "llm-eval", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	ba := waitAccount(t, f, "llm-eval", "3 shards accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 3 })
	if ba.Status.Results.Rejected != 0 {
		t.Errorf("rejected results: %+v", ba.Status.Results)
	}
	var tj trainer.TrainJob
	if err := f.Client.Get(f.Ctx, client.ObjectKey{Namespace: f.Namespace, Name: "llm-eval"}, &tj); err != nil {
		t.Fatal(err)
	}
	waitWorkloadVerdict(t, trainJobWorkload(t, f, &tj), v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
}

// playJobSetShortForm: the controller creates the account infer from the JobSet's
// annotations; the eight pods of its two child Jobs report part-0..part-7; the account
// says Accepted.
func playJobSetShortForm(t *testing.T, f *framework.Framework) {
	ba := waitAccount(t, f, "infer", "the account the short form declares", func(ba *v1alpha1.BatchAccount) bool {
		return ba.Labels[v1alpha1.LabelShortFormOf] == "JobSet"
	})
	if ba.Spec.Shards.Count == nil || *ba.Spec.Shards.Count != 8 || ba.Spec.Shards.Prefix != "part-" || ba.Spec.Acceptance == nil || !ba.Spec.Acceptance.RequireResults {
		t.Errorf("short-form account spec = %+v", ba.Spec)
	}
	for i := range 2 {
		finishWithWorkerResults(t, childJob(t, f, fmt.Sprintf("infer-workers-%d", i), ""), 4)
	}
	waitAccountCondition(t, f, "infer", v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered)
	waitAccountCondition(t, f, "infer", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	ba = waitAccount(t, f, "infer", "8 shards accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 8 })
	if ba.Status.Results.Rejected != 0 {
		t.Errorf("rejected results: %+v", ba.Status.Results)
	}
}

// setupPythonWorker creates what examples/python-worker's job.yaml expects to exist: a
// LocalQueue named default, and the ConfigMap python-worker holding the worker and the
// module, as its comment has the user create them.
func setupPythonWorker(t *testing.T, f *framework.Framework) {
	h100Queue(f, "4")
	data := map[string]string{}
	for _, file := range []string{filepath.Join(examplesDir, "python-worker", "worker.py"), filepath.Join(pythonDir, "batchledger_worker.py")} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		data[filepath.Base(file)] = string(b)
	}
	f.Create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "python-worker", Namespace: f.Namespace}, Data: data})
}

// playPythonWorker: each of the four pods reports what the example's worker.py itself
// writes when run with that pod's environment (the shard and revisions batchledger's
// webhook annotated, through the downward API); the account says Accepted.
func playPythonWorker(t *testing.T, f *framework.Framework) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the example's worker cannot run")
	}
	job := jobStatus(t, f, "python-demo")
	framework.RunningPods(t, job, 4)
	for i := range 4 {
		pod := framework.RunningIndexPod(t, job, i)
		log := filepath.Join(t.TempDir(), "termination-log")
		cmd := exec.Command(py, filepath.Join(examplesDir, "python-worker", "worker.py"))
		cmd.Env = []string{"PYTHONPATH=" + pythonDir, "BATCH_TERMINATION_LOG=" + log}
		for k, v := range kwok.ContainerEnv(pod) {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("worker.py in pod %s: %v\n%s", pod.Name, err, out)
		}
		msg, err := os.ReadFile(log)
		if err != nil {
			t.Fatalf("worker.py in pod %s wrote no result: %v", pod.Name, err)
		}
		framework.FinishPod(t, pod, 0, string(msg))
	}
	waitAccountCondition(t, f, "python-demo", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	ba := waitAccount(t, f, "python-demo", "4 shards accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 4 })
	if ba.Status.Results.Rejected != 0 {
		t.Errorf("rejected results: %+v", ba.Status.Results)
	}
}

// applyExample creates every object of examples/NAME/*.yaml, file by file in name order as
// `kubectl apply -f examples/NAME/` does, with these changes for the test's isolation:
// namespaced objects go into the test's namespace; a ClusterQueue is renamed after the
// namespace (and its LocalQueues follow it), so no other test's quota leaks in; a
// ResourceFlavor is shared with the other tests, so one that exists is left as it is. It
// waits for each ClusterQueue to be active, and for each BatchAccount to be seen by the
// controller before the next object, as its pods are held for results only if the account
// is known when they are created.
func applyExample(t *testing.T, f *framework.Framework, name string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(examplesDir, name, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("examples/%s: no YAML files (%v)", name, err)
	}
	slices.Sort(files)
	clusterQueues := map[string]string{}
	for _, file := range files {
		for _, obj := range framework.LoadObjects(t, file, f.Namespace) {
			switch o := obj.(type) {
			case *kueue.ResourceFlavor:
				if err := f.Client.Create(f.Ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatalf("%s: create ResourceFlavor %s: %v", file, o.Name, err)
				}
				continue
			case *kueue.ClusterQueue:
				renamed := f.Namespace + "-" + o.Name
				clusterQueues[o.Name], o.Name = renamed, renamed
			case *kueue.LocalQueue:
				cq, ok := clusterQueues[string(o.Spec.ClusterQueue)]
				if !ok {
					t.Fatalf("%s: LocalQueue %s points at ClusterQueue %s, which the example does not declare before it", file, o.Name, o.Spec.ClusterQueue)
				}
				o.Spec.ClusterQueue = kueue.ClusterQueueReference(cq)
			}
			f.Create(obj)
			switch o := obj.(type) {
			case *kueue.ClusterQueue:
				framework.WaitForClusterQueueActive(t, o.Name)
			case *v1alpha1.BatchAccount:
				waitAccount(t, f, o.Name, "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool {
					return len(ba.Status.Conditions) > 0
				})
			}
		}
	}
}

// finishWithWorkerResults waits for the Job's n index pods to run and finishes each with
// exit code 0 and the termination message the example worker would write in that pod.
func finishWithWorkerResults(t *testing.T, job *batchv1.Job, n int) {
	t.Helper()
	framework.RunningPods(t, job, n)
	for i := range n {
		pod := framework.RunningIndexPod(t, job, i)
		framework.FinishPod(t, pod, 0, workerMessage(t, pod))
	}
}

// workerMessage is the result the example worker (cmd/example-worker) reports in pod: its
// configuration is read from the worker container's environment as the kubelet would
// resolve it (plain values, and the pod labels and annotations it refers to, such as the
// completion index the Job controller injects).
func workerMessage(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	env := kwok.ContainerEnv(pod)
	cfg, err := worker.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	r, err := worker.Process(cfg)
	if err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	msg, err := worker.Message(r)
	if err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	return msg
}
