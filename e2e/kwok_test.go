package e2e

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/hack/kwok"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// The kwok stages' auto mode (for demos and benchmarks): pods of a template annotated with
// an exit code finish by themselves after the delay, with the termination message; an
// explicit exit code on one pod still wins.
func TestKwokAutoExitFinishesPodsUnlessTold(t *testing.T) {
	t.Parallel()
	f := framework.New(t)
	job := wrappers.MakeJob("auto", f.Namespace).Indexed(4).BackoffLimitPerIndex(0).
		PodAnnotation(kwok.AutoExitCodeAnnotation, "0").
		PodAnnotation(kwok.AutoExitDelayAnnotation, "3s").
		PodAnnotation(kwok.TerminationMessageAnnotation, "auto done").
		Obj()
	f.Create(job)

	failed := framework.FinishIndexPod(t, job, 0, 7, "told to fail")
	if msg := failed.Status.ContainerStatuses[0].State.Terminated.Message; msg != "told to fail" {
		t.Fatalf("explicitly finished pod has termination message %q", msg)
	}
	framework.WaitFor(t, job, framework.DefaultTimeout, `completedIndexes "1-3", failedIndexes "0"`, func(j *batchv1.Job) bool {
		return j.Status.CompletedIndexes == "1-3" && j.Status.FailedIndexes != nil && *j.Status.FailedIndexes == "0" &&
			framework.JobConditionTrue(j, batchv1.JobFailed)
	})
	for _, p := range framework.JobPods(t, job) {
		if framework.PodIndex(&p) == 0 || p.Status.Phase != corev1.PodSucceeded {
			continue
		}
		if got := p.Status.ContainerStatuses[0].State.Terminated; got.Message != "auto done" || got.Reason != "Completed" {
			t.Fatalf("auto-finished pod %s: terminated %+v", p.Name, got)
		}
	}
}
