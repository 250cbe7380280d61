package e2e

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// The seed's pytorch-ddp JobSet goes through Kueue as one Workload, runs its child Jobs
// <jobset>-<replicatedJob>-<i> with a headless Service, restarts as a whole when a worker
// fails (failurePolicy), and completes when the workers do although the leader still runs
// (successPolicy All over workers), after which the leader is cleaned up.
func TestSeedJobSetRunsThroughKueueAsOneWorkload(t *testing.T) {
	t.Parallel()
	f := framework.New(t)
	f.GPUQueue("default", wrappers.GPUFlavorQuotas("a100", "64", "512Gi", "8"))

	js := framework.LoadObject[*jobset.JobSet](t, "testdata/pytorch-ddp-jobset.yaml", f.Namespace)
	js.Labels = map[string]string{wrappers.QueueLabel: "default"} // the one addition to the seed
	f.Create(js)

	wl := framework.WorkloadFor(t, js)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	if got := framework.AdmittedFlavors(wl)["workers"]["nvidia.com/gpu"]; got != "a100" {
		t.Fatalf("workers admitted with GPU flavor %q, want a100 (admission %+v)", got, wl.Status.Admission)
	}

	leader := childJob(t, f, "pytorch-ddp-leader-0")
	workers := childJob(t, f, "pytorch-ddp-workers-0")
	var wls kueue.WorkloadList
	if err := f.Client.List(f.Ctx, &wls, client.InNamespace(f.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(wls.Items) != 1 {
		t.Fatalf("%d Workloads in the namespace, want exactly the JobSet's", len(wls.Items))
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "pytorch-ddp", Namespace: f.Namespace}}
	f.Get(svc)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("JobSet Service clusterIP = %q, want a headless Service", svc.Spec.ClusterIP)
	}
	framework.RunningPods(t, leader, 1)
	for _, p := range framework.RunningPods(t, workers, 4) {
		expectNodeGPUType(t, f, &p, "a100")
		if p.Spec.Subdomain != "pytorch-ddp" {
			t.Fatalf("worker pod %s subdomain = %q", p.Name, p.Spec.Subdomain)
		}
	}

	// A failed worker fails its Job (backoffLimit 0) and the JobSet restarts every Job.
	framework.FinishIndexPod(t, workers, 1, 1, "worker 1 crashed")
	framework.WaitFor(t, js, framework.DefaultTimeout, "restarted once", func(js *jobset.JobSet) bool {
		return js.Status.Restarts == 1
	})
	oldUID := workers.UID
	framework.WaitFor(t, workers, framework.DefaultTimeout, "recreated (new UID, restart attempt 1) and running", func(j *batchv1.Job) bool {
		return j.UID != oldUID && j.Labels[restartAttemptLabel] == "1" && j.Spec.Suspend != nil && !*j.Spec.Suspend
	})
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)

	for i := range 4 {
		framework.FinishIndexPod(t, workers, i, 0, "")
	}
	framework.WaitFor(t, js, framework.DefaultTimeout, "Completed", func(js *jobset.JobSet) bool {
		return apimeta.IsStatusConditionTrue(js.Status.Conditions, string(jobset.JobSetCompleted))
	})
	// The leader never finished; the JobSet removes it once it has succeeded.
	framework.WaitForAbsent(t, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pytorch-ddp-leader-0", Namespace: f.Namespace}})
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadFinished, metav1.ConditionTrue)
}

// restartAttemptLabel is the JobSet controller's label numbering a child Job's restart.
const restartAttemptLabel = "jobset.sigs.k8s.io/restart-attempt"

// childJob waits for a JobSet child Job to exist and run (not suspended).
func childJob(t *testing.T, f *framework.Framework, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace}}
	framework.WaitFor(t, job, framework.DefaultTimeout, "created and resumed", func(j *batchv1.Job) bool {
		return j.Spec.Suspend != nil && !*j.Spec.Suspend
	})
	return job
}
