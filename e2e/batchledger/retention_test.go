package batchledger

import (
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestFinishedAccountCollectedAfterTTL: an account whose batch is Accepted is deleted by
// the manager once its ttlSecondsAfterFinished passed, and the garbage collector takes
// its ShardResults with it (the ledger policy lets it); no pod stays held, and the
// manager counted the deletion and observed the latency histograms on the way.
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
	accepted := time.Now()
	var chunks v1alpha1.ShardResultsList
	if err := f.Client.List(f.Ctx, &chunks, client.InNamespace(f.Namespace), client.MatchingLabels{v1alpha1.LabelAccount: "short-lived"}); err != nil {
		t.Fatal(err)
	}
	if len(chunks.Items) == 0 {
		t.Fatal("no ShardResults recorded for the Accepted account")
	}

	var accountGone time.Duration
	framework.Eventually(t, framework.DefaultTimeout, "the account and its ShardResults deleted", func() (bool, string, error) {
		err := f.Client.Get(f.Ctx, client.ObjectKey{Namespace: f.Namespace, Name: "short-lived"}, &v1alpha1.BatchAccount{})
		if err == nil {
			return false, "the account still exists", nil
		}
		if !apierrors.IsNotFound(err) {
			return false, "", err
		}
		if accountGone == 0 {
			accountGone = time.Since(accepted)
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
	t.Logf("after Accepted was seen (TTL 3s): account gone in %s, its ShardResults in %s (the garbage collector's pace)",
		accountGone.Round(100*time.Millisecond), time.Since(accepted).Round(100*time.Millisecond))
	for _, p := range framework.JobPods(t, job) {
		if slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			t.Errorf("pod %s still held after its account was collected", p.Name)
		}
	}

	// The manager counted the deletion and timed the batch's way to its verdict. Its
	// counters started with it; other tests' batches may add to them.
	m := framework.ScrapeManager(t, localcluster.BatchledgerName)
	if n := m.Value("batchledger_accounts_collected_total"); n < 1 {
		t.Errorf("batchledger_accounts_collected_total = %v, want the deletion counted", n)
	}
	for _, h := range []struct {
		name  string
		match map[string]string
	}{
		{"batchledger_job_end_to_verdict_seconds", map[string]string{"condition": v1alpha1.ConditionAccepted}},
		{"batchledger_result_capture_seconds", nil},
		{"batchledger_pod_hold_seconds", nil},
	} {
		got := m.Histogram(h.name, h.match)
		if got.Count < 1 {
			t.Errorf("%s %v: no observation", h.name, h.match)
			continue
		}
		t.Logf("%s %v: %v observations, mean %.3fs", h.name, h.match, got.Count, got.Sum/got.Count)
	}
}
