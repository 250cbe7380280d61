package batchledger

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestFinishedAccountCollectedAfterTTL: an account whose batch is Accepted is deleted by
// the manager once its ttlSecondsAfterFinished passed, and the garbage collector takes
// its ShardResults with it (the ledger policy lets it); no pod stays held.
func TestFinishedAccountCollectedAfterTTL(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	shards := []string{"A", "B"}
	ba := wrappers.MakeBatchAccount("short-lived", f.Namespace).Shards(shards...).
		AssignJob("j", "0-1", shards...).RequireResults(seedRule).TTLSecondsAfterFinished(3)
	f.Create(ba.Obj())
	waitAccount(t, f, "short-lived", "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool {
		return len(ba.Status.Conditions) > 0
	})
	f.Create(wrappers.MakeJob("j", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj())
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 2)
	for i, s := range shards {
		framework.FinishIndexPod(t, job, i, 0, report(t, s, "m-2026-11", "sha256:"+s))
	}
	waitAccountCondition(t, f, "short-lived", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	var chunks v1alpha1.ShardResultsList
	if err := f.Client.List(f.Ctx, &chunks, client.InNamespace(f.Namespace), client.MatchingLabels{v1alpha1.LabelAccount: "short-lived"}); err != nil {
		t.Fatal(err)
	}
	if len(chunks.Items) == 0 {
		t.Fatal("no ShardResults recorded for the Accepted account")
	}

	framework.Eventually(t, framework.DefaultTimeout, "the account and its ShardResults deleted", func() (bool, string, error) {
		err := f.Client.Get(f.Ctx, client.ObjectKey{Namespace: f.Namespace, Name: "short-lived"}, &v1alpha1.BatchAccount{})
		if err == nil {
			return false, "the account still exists", nil
		}
		if !apierrors.IsNotFound(err) {
			return false, "", err
		}
		var left v1alpha1.ShardResultsList
		if err := f.Client.List(f.Ctx, &left, client.InNamespace(f.Namespace), client.MatchingLabels{v1alpha1.LabelAccount: "short-lived"}); err != nil {
			return false, "", err
		}
		if len(left.Items) > 0 {
			return false, fmt.Sprintf("%d ShardResults left", len(left.Items)), nil
		}
		return true, "", nil
	})
	for _, p := range framework.JobPods(t, job) {
		if len(p.Finalizers) > 0 {
			for _, fin := range p.Finalizers {
				if fin == v1alpha1.ResultFinalizer {
					t.Errorf("pod %s still held after its account was collected", p.Name)
				}
			}
		}
	}
}
