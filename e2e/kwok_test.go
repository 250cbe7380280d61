package e2e

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// The kwok stages' auto mode (for demos and benchmarks): pods of a template annotated with
// an exit code finish by themselves after the delay, with the termination message; an
// explicit exit code on one pod still wins. Neither half depends on timing: the auto
// Job's pods are never touched, and the told Job's auto delay (an hour) cannot expire
// while the test tells its pods what to do.
func TestKwokAutoExitFinishesPodsUnlessTold(t *testing.T) {
	t.Parallel()
	f := framework.New(t)
	auto := wrappers.MakeJob("auto", f.Namespace).Indexed(4).BackoffLimitPerIndex(0).
		PodAnnotation(kwok.AutoExitCodeAnnotation, "0").
		PodAnnotation(kwok.AutoExitDelayAnnotation, "1s").
		PodAnnotation(kwok.TerminationMessageAnnotation, "auto done").
		Obj()
	told := wrappers.MakeJob("told", f.Namespace).Indexed(2).BackoffLimitPerIndex(0).
		PodAnnotation(kwok.AutoExitCodeAnnotation, "0").
		PodAnnotation(kwok.AutoExitDelayAnnotation, "1h").
		PodAnnotation(kwok.TerminationMessageAnnotation, "auto done").
		Obj()
	f.Create(auto)
	f.Create(told)

	// Auto: every pod finishes by itself, with the template's code and message.
	framework.WaitForJobCondition(t, auto, batchv1.JobComplete)
	f.Get(auto)
	if auto.Status.CompletedIndexes != "0-3" || auto.Status.Succeeded != 4 || auto.Status.Failed != 0 {
		t.Errorf("auto Job: completed %q succeeded %d failed %d; want 0-3, 4, 0", auto.Status.CompletedIndexes, auto.Status.Succeeded, auto.Status.Failed)
	}
	pods := framework.JobPods(t, auto)
	if len(pods) != 4 {
		t.Errorf("auto Job has %d pods; want 4, one per index", len(pods))
	}
	for _, p := range pods {
		if got := p.Status.ContainerStatuses[0].State.Terminated; p.Status.Phase != corev1.PodSucceeded || got == nil || got.Message != "auto done" || got.Reason != "Completed" {
			t.Errorf("auto-finished pod %s: phase %s, terminated %+v", p.Name, p.Status.Phase, got)
		}
	}

	// Told: an explicit exit code wins over the template's auto code, on each pod.
	failed := framework.FinishIndexPod(t, told, 0, 7, "told to fail")
	if got := failed.Status.ContainerStatuses[0].State.Terminated; got.Message != "told to fail" || got.Reason != "Error" {
		t.Errorf("explicitly failed pod: terminated %+v", got)
	}
	done := framework.FinishIndexPod(t, told, 1, 0, "told to succeed")
	if got := done.Status.ContainerStatuses[0].State.Terminated; got.Message != "told to succeed" || got.Reason != "Completed" {
		t.Errorf("explicitly finished pod: terminated %+v", got)
	}
	framework.WaitFor(t, told, framework.DefaultTimeout, `completedIndexes "1", failedIndexes "0", Failed`, func(j *batchv1.Job) bool {
		return j.Status.CompletedIndexes == "1" && j.Status.FailedIndexes != nil && *j.Status.FailedIndexes == "0" &&
			framework.JobConditionTrue(j, batchv1.JobFailed)
	})
}
