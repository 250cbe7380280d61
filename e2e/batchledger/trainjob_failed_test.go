package batchledger

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestTrainJobFailedThenJobSetDeleted: a TrainJob of 2 nodes fails (node 1 fails, the
// JobSet restarts once, and fails again) after node 0 of the first attempt reported its
// result. Its JobSet is then deleted. Trainer v2.2.0 keeps a Failed condition only for
// its own deadline: it takes the JobSet's failure off the TrainJob and renders the JobSet
// anew, unsuspended, though Kueue finished the Workload (Failed). The account keeps the
// failure (the Workload's end is the TrainJob's), the failed child on record and the
// result recorded of the first attempt, and never says Accepted.
func TestTrainJobFailedThenJobSetDeleted(t *testing.T) {
	f := framework.New(t)
	skipWithoutTrainJobs(t, f)
	tj, wl := admittedTwoNodeTrainJob(t, f)

	job := childJob(t, f, "llm-node-0", "")
	framework.RunningPods(t, job, 2)
	framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
	waitAccount(t, f, "llm", "A recorded", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Results.Recorded == 1 })
	framework.FinishIndexPod(t, job, 1, 1, "")
	// The JobSet restarts once (maxRestarts 1); its second attempt fails too.
	job = childJob(t, f, "llm-node-0", job.UID)
	framework.FinishPod(t, &framework.RunningPods(t, job, 2)[0], 1, "")
	framework.WaitFor(t, tj, framework.DefaultTimeout, "TrainJob Failed", func(tj *trainer.TrainJob) bool {
		return apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed)
	})
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadFinished, metav1.ConditionTrue)
	waitAccountCondition(t, f, "llm", v1alpha1.ConditionTerminated, metav1.ConditionTrue, v1alpha1.ReasonTargetFailed)
	accepted := waitAccountCondition(t, f, "llm", v1alpha1.ConditionAccepted, metav1.ConditionFalse, "")
	t.Logf("account after the failure: Accepted %s", accepted.Reason)

	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: tj.Name}}
	f.Get(js)
	old := js.UID
	if err := f.Client.Delete(f.Ctx, js, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "the JobSet rendered again", func() (bool, string, error) {
		err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(js), js)
		if apierrors.IsNotFound(err) {
			return false, "gone", nil
		}
		return err == nil && js.UID != old, "still the failed one", err
	})
	f.Get(tj)
	t.Logf("JobSet rendered again: suspend %v; TrainJob conditions %+v", ptr.Deref(js.Spec.Suspend, false), tj.Status.Conditions)

	// The new JobSet runs outside Kueue's admission (its Workload finished): Kueue suspends
	// its children and Trainer resumes the JobSet, over and over. None of it is the batch.
	failed := job.UID
	// Give the account time to take in the new run, watching that it stays terminated and
	// never says Accepted.
	deadline := time.Now().Add(20 * time.Second)
	var got v1alpha1.BatchAccount
	got.Name, got.Namespace = "llm", f.Namespace
	for time.Now().Before(deadline) {
		f.Get(&got)
		if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAccepted); c != nil && c.Status == metav1.ConditionTrue {
			t.Fatalf("account Accepted work of a TrainJob that failed: %s", framework.StatusYAML(&got))
		}
		if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionTerminated); c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("account no longer terminated: %s", framework.StatusYAML(&got))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("account at the end: %s", framework.StatusYAML(&got))
	if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionTerminated); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonTargetFailed {
		t.Errorf("Terminated %+v, want True %s kept", c, v1alpha1.ReasonTargetFailed)
	}
	if got.Status.Results.Recorded != 1 {
		t.Errorf("results recorded %d; want the first attempt's result A, kept", got.Status.Results.Recorded)
	}
	if tg := target(&got, "trainjob/llm/node/0"); tg == nil || tg.UID != failed || tg.Terminal != string(batchv1.JobFailed) {
		t.Errorf("target %+v; want the failed child %s on record", tg, failed)
	}
}
