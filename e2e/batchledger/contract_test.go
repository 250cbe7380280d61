package batchledger

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// setRule patches the account's acceptance rule as a user would (kubectl patch --type=merge).
func setRule(f *framework.Framework, name, rule string) error {
	ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace}}
	patch := []byte(`{"spec":{"acceptance":{"rule":` + quoteJSON(rule) + `}}}`)
	return f.Client.Patch(f.Ctx, ba, client.RawPatch("application/merge-patch+json", patch))
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestAcceptanceRuleFixedOnceJudged: the rule may change until a result was judged under
// it; after that the API server refuses the edit with the way forward, and the verdict
// stays the one the rule that judged it gives.
func TestAcceptanceRuleFixedOnceJudged(t *testing.T) {
	f := framework.New(t)
	resultsJob(t, f, "rule", "A", "B")
	// No result yet: the rule is still the team's to change.
	if err := setRule(f, "rule", "result.records > 0"); err != nil {
		t.Fatalf("changing the rule before any result was judged: %v", err)
	}
	if err := setRule(f, "rule", seedRule); err != nil {
		t.Fatalf("changing the rule back: %v", err)
	}
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 2)
	framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
	waitAccount(t, f, "rule", "a result recorded", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Results.Recorded > 0 })

	err := setRule(f, "rule", "false")
	if err == nil {
		t.Fatalf("a rule edit after a result was judged was admitted")
	}
	for _, want := range []string{"spec.acceptance.rule", "cannot change once results were judged", "create a new BatchAccount"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	// Other spec edits still pass: the rule alone is fixed.
	ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Name: "rule", Namespace: f.Namespace}}
	if err := f.Client.Patch(f.Ctx, ba, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"team":"vision"}}}`))); err != nil {
		t.Errorf("a label edit was refused: %v", err)
	}
	framework.FinishIndexPod(t, job, 1, 0, report(t, "B", "m-2026-11", "sha256:B"))
	got := waitAccountCondition(t, f, "rule", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	t.Logf("Accepted under the rule that judged: %s", got.Message)
	f.Get(ba)
	if ba.Spec.Acceptance.Rule != seedRule {
		t.Errorf("rule = %q, want %q", ba.Spec.Acceptance.Rule, seedRule)
	}
}

// TestRequireResultsTurnedOnMidRun: a coverage-only account's Job runs (one index done)
// when the account starts requiring results. Its pods are in the coverage scope, whose
// cache holds no termination messages: the results of the pods that still exist are
// read from the API server, and the batch is Accepted on them.
func TestRequireResultsTurnedOnMidRun(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	shards := []string{"A", "B", "C"}
	f.Create(wrappers.MakeBatchAccount("late", f.Namespace).Shards(shards...).AssignJob("j", "0-2", shards...).Obj())
	waitAccount(t, f, "late", "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool {
		return len(ba.Status.Conditions) > 0
	})
	f.Create(wrappers.MakeJob("j", f.Namespace).Indexed(3).Parallelism(3).Queue("default").GPU(1).Obj())
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 3)
	framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
	waitAccount(t, f, "late", "index 0 covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 1 })

	ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: f.Namespace}}
	patch := []byte(`{"spec":{"acceptance":{"requireResults":true,"rule":` + quoteJSON(seedRule) + `}}}`)
	if err := f.Client.Patch(f.Ctx, ba, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatalf("turning results on: %v", err)
	}
	framework.FinishIndexPod(t, job, 1, 0, report(t, "B", "m-2026-11", "sha256:B"))
	framework.FinishIndexPod(t, job, 2, 0, report(t, "C", "m-2026-11", "sha256:C"))
	got := waitAccountCondition(t, f, "late", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	t.Logf("Accepted: %s", got.Message)
	f.Get(ba)
	if ba.Status.Shards.Accepted != 3 || ba.Status.Results.Missing != 0 || ba.Status.Results.Rejected != 0 {
		t.Errorf("shards %+v, results %+v: want all 3 accepted, none missing or rejected", ba.Status.Shards, ba.Status.Results)
	}
}
