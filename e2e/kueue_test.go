package e2e

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// The seed's queueing objects, applied as written, admit the seed's Indexed `train-` Job on
// h100 nodes; the real Job controller completes it and Kueue finishes its Workload.
func TestSeedQueueRunsIndexedTrainJobOnH100(t *testing.T) {
	t.Parallel()
	f := framework.New(t)

	// ml-team is a fixed cluster-scoped name; an earlier run against the same cluster may
	// still be deleting it, and a terminating ClusterQueue admits nothing.
	framework.WaitForAbsent(t, &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "ml-team"}})
	for _, obj := range framework.LoadObjects(t, "testdata/kueue-gpu-queue.yaml", f.Namespace) {
		if rf, ok := obj.(*kueue.ResourceFlavor); ok {
			createSharedFlavor(t, f, rf)
			continue
		}
		f.Create(obj)
	}
	framework.WaitForClusterQueueActive(t, "ml-team")

	// As written, the seed's Job is invalid: it requests nvidia.com/gpu without a limit, and
	// Kubernetes requires a limit (equal to the request) for extended resources. The API
	// server says so; the test then adds exactly that limit and nothing else.
	job := framework.LoadObject[*batchv1.Job](t, "testdata/train-job.yaml", f.Namespace)
	err := f.Client.Create(f.Ctx, job.DeepCopy())
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Limit must be set for non overcommitable resources") {
		t.Fatalf("creating the seed's train- Job as written: got %v, want the API server to require a GPU limit", err)
	}
	worker := &job.Spec.Template.Spec.Containers[0]
	worker.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": worker.Resources.Requests["nvidia.com/gpu"]}
	f.Create(job)
	wl := framework.WorkloadFor(t, job)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	if got := framework.AdmittedFlavors(wl)["main"]["nvidia.com/gpu"]; got != "h100" || wl.Status.Admission.ClusterQueue != "ml-team" {
		t.Fatalf("admitted to %s with GPU flavor %q, want ml-team/h100", wl.Status.Admission.ClusterQueue, got)
	}

	// Admission resumes the Job with the flavor's node labels as nodeSelector.
	framework.WaitFor(t, job, framework.DefaultTimeout, "resumed with nodeSelector gpu-type=h100", func(j *batchv1.Job) bool {
		return j.Spec.Suspend != nil && !*j.Spec.Suspend && j.Spec.Template.Spec.NodeSelector["gpu-type"] == "h100"
	})
	for _, p := range framework.RunningPods(t, job, 8) {
		expectNodeGPUType(t, f, &p, "h100")
	}

	for i := range 8 {
		pod := framework.FinishIndexPod(t, job, i, 0, fmt.Sprintf(`{"shard":"S%d"}`, i))
		if msg := pod.Status.ContainerStatuses[0].State.Terminated.Message; msg != fmt.Sprintf(`{"shard":"S%d"}`, i) {
			t.Fatalf("pod %s termination message = %q", pod.Name, msg)
		}
	}
	framework.WaitFor(t, job, framework.DefaultTimeout, `completedIndexes "0-7" and Complete`, func(j *batchv1.Job) bool {
		return j.Status.CompletedIndexes == "0-7" && framework.JobConditionTrue(j, batchv1.JobComplete)
	})
	if !framework.JobConditionTrue(job, batchv1.JobSuccessCriteriaMet) || job.Status.Succeeded != 8 {
		t.Fatalf("Job status %s", framework.StatusYAML(job))
	}
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadFinished, metav1.ConditionTrue)
}

// A second batch waits in the queue with Kueue's "insufficient unused quota" while the first
// holds the flavor's GPUs, and is admitted when they free up; a third waits behind the
// second until an a100 flavor is added to the ClusterQueue, and lands there.
func TestOverQuotaBatchWaitsForGPUQuota(t *testing.T) {
	t.Parallel()
	f := framework.New(t)
	cqName := f.GPUQueue("gpu", wrappers.GPUFlavorQuotas("h100", "64", "512Gi", "8"))
	batch := func(name string) *batchv1.Job {
		return wrappers.MakeJob(name, f.Namespace).Indexed(8).Queue("gpu").GPU(1).Obj()
	}

	first := batch("batch-1")
	f.Create(first)
	wl1 := framework.WorkloadFor(t, first)
	framework.WaitForWorkloadCondition(t, wl1, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	expectFlavor(t, wl1, "h100")
	framework.RunningPods(t, first, 8)

	second := batch("batch-2")
	f.Create(second)
	if second.Spec.Suspend == nil || !*second.Spec.Suspend {
		t.Fatalf("Kueue's webhook did not create %s suspended", second.Name)
	}
	wl2 := framework.WorkloadFor(t, second)
	waitPendingForQuota(t, wl2, "h100")
	if pods := framework.JobPods(t, second); len(pods) != 0 {
		t.Fatalf("queued Job has pods:\n%s", framework.SummarizePods(pods))
	}

	for i := range 8 {
		framework.FinishIndexPod(t, first, i, 0, "")
	}
	framework.WaitForJobCondition(t, first, batchv1.JobComplete)
	framework.WaitForWorkloadCondition(t, wl2, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	expectFlavor(t, wl2, "h100")
	framework.RunningPods(t, second, 8)

	third := batch("batch-3")
	f.Create(third)
	wl3 := framework.WorkloadFor(t, third)
	waitPendingForQuota(t, wl3, "h100")

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: cqName}}
		if err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(cq), cq); err != nil {
			return err
		}
		cq.Spec.ResourceGroups = []kueue.ResourceGroup{wrappers.ResourceGroup(
			wrappers.GPUFlavorQuotas("h100", "64", "512Gi", "8"),
			wrappers.GPUFlavorQuotas("a100", "64", "512Gi", "8"),
		)}
		return f.Client.Update(f.Ctx, cq)
	})
	if err != nil {
		t.Fatalf("add flavor a100 to ClusterQueue %s: %v", cqName, err)
	}
	framework.WaitForWorkloadCondition(t, wl3, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	expectFlavor(t, wl3, "a100")
	framework.WaitFor(t, third, framework.DefaultTimeout, "resumed with nodeSelector gpu-type=a100", func(j *batchv1.Job) bool {
		return !*j.Spec.Suspend && j.Spec.Template.Spec.NodeSelector["gpu-type"] == "a100"
	})
	for _, p := range framework.RunningPods(t, third, 8) {
		expectNodeGPUType(t, f, &p, "a100")
	}
}

// waitPendingForQuota waits until Kueue reports the Workload without quota because the
// flavor's GPUs are in use.
func waitPendingForQuota(t *testing.T, wl *kueue.Workload, flavor string) {
	t.Helper()
	want := "insufficient unused quota for nvidia.com/gpu in flavor " + flavor
	framework.WaitFor(t, wl, framework.DefaultTimeout, "QuotaReserved=False with "+want, func(wl *kueue.Workload) bool {
		c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, want)
	})
}

func expectFlavor(t *testing.T, wl *kueue.Workload, flavor string) {
	t.Helper()
	if got := framework.AdmittedFlavors(wl)["main"]["nvidia.com/gpu"]; got != flavor {
		t.Fatalf("Workload %s admitted with GPU flavor %q, want %q", wl.Name, got, flavor)
	}
}

// expectNodeGPUType checks the pod runs on a node of the GPU model.
func expectNodeGPUType(t *testing.T, f *framework.Framework, pod *corev1.Pod, gpuType string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: pod.Spec.NodeName}}
	f.Get(node)
	if node.Labels["gpu-type"] != gpuType {
		t.Fatalf("pod %s runs on node %s (gpu-type %q), want gpu-type %s", pod.Name, node.Name, node.Labels["gpu-type"], gpuType)
	}
}

// createSharedFlavor creates a ResourceFlavor other tests may have created already; an
// existing one must say the same thing.
func createSharedFlavor(t *testing.T, f *framework.Framework, rf *kueue.ResourceFlavor) {
	t.Helper()
	want := rf.Spec.NodeLabels
	if err := f.Client.Create(f.Ctx, rf); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create ResourceFlavor %s: %v", rf.Name, err)
	}
	f.Get(rf)
	for k, v := range want {
		if rf.Spec.NodeLabels[k] != v {
			t.Fatalf("ResourceFlavor %s has nodeLabels %v, want %v", rf.Name, rf.Spec.NodeLabels, want)
		}
	}
}
