package batchledger

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestShortFormJob: annotations on a queued Job make the controller create the account,
// not owned by the Job, and follow it like any other; deleting the Job afterwards keeps
// the account, its record and its verdict.
func TestShortFormJob(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	job := wrappers.MakeJob("short", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).
		Annotation(v1alpha1.AnnotationInputRev, "D").Annotation(v1alpha1.AnnotationModelRev, "m-2026-11").
		Annotation(v1alpha1.AnnotationShards, "A,B").Obj()
	f.Create(job)
	ba := waitAccount(t, f, "short", "the account created from the annotations", func(ba *v1alpha1.BatchAccount) bool {
		return len(ba.Status.Targets) == 1 && ba.Status.Targets[0].Found
	})
	if len(ba.OwnerReferences) != 0 || ba.Labels[v1alpha1.LabelShortFormOf] != "Job" {
		t.Errorf("account owners = %+v, labels %v; want no owner (the ledger outlives its Job) and the short-form label", ba.OwnerReferences, ba.Labels)
	}
	if len(ba.Spec.Assignments) != 1 || ba.Spec.Assignments[0].Indexes != "0,1" || ba.Spec.Assignments[0].ShardOrdinals != "0,1" {
		t.Errorf("assignments = %+v", ba.Spec.Assignments)
	}
	framework.RunningPods(t, job, 2)
	framework.FinishIndexPod(t, job, 0, 0, "")
	framework.FinishIndexPod(t, job, 1, 0, "")
	waitAccountCondition(t, f, "short", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)

	deleteJobAndWait(t, f, job)
	ba = waitAccount(t, f, "short", "the deleted Job's record", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/short")
		return tg != nil && tg.Deleted
	})
	if ok, state := condIs(ba.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted); !ok || ba.Status.Shards.Covered != 2 {
		t.Errorf("after the Job was deleted: %s, %d/2 covered", state, ba.Status.Shards.Covered)
	}
}
