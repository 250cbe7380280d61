package account

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestResultsJudgedUnderAnotherRuleNeverStand: a result stands only when it was judged
// under the spec's acceptance rule. One judged under another rule (the rule was edited
// between its capture and the account's status) is rejected as RuleChanged whatever it
// said, and the batch is not Accepted on it; so is one read from another result
// container. Results recorded before digests existed, or before they covered the
// container, are taken as judged under the spec's rule.
func TestResultsJudgedUnderAnotherRuleNeverStand(t *testing.T) {
	const specRule = "result.valid == result.records"
	judgedBy := func(digest string, results []Result) []Result {
		out := make([]Result, len(results))
		for i, r := range results {
			r.RuleDigest = digest
			out[i] = r
		}
		return out
	}
	var all []Result
	for i, s := range []string{"A", "B", "C", "D"} {
		all = append(all, result("job/j", "uid-j", i, s))
	}
	tests := []struct {
		name         string
		rule         string
		results      []Result
		wantAccepted int32
		wantStatus   metav1.ConditionStatus
		wantReason   string
		wantSays     string
	}{
		{"all under the spec's rule", specRule, judgedBy(v1alpha1.RuleDigest(specRule), all), 4,
			metav1.ConditionTrue, v1alpha1.ReasonAllResultsAccepted, ""},
		{"recorded before digests existed", specRule, all, 4,
			metav1.ConditionTrue, v1alpha1.ReasonAllResultsAccepted, ""},
		{"no rule, judged under none", "", judgedBy(v1alpha1.RuleDigest(""), all), 4,
			metav1.ConditionTrue, v1alpha1.ReasonAllResultsAccepted, ""},
		{"shard C judged under an older rule", specRule, func() []Result {
			rs := judgedBy(v1alpha1.RuleDigest(specRule), all)
			rs[2].RuleDigest = v1alpha1.RuleDigest("true")
			return rs
		}(), 3, metav1.ConditionFalse, v1alpha1.ReasonResultRejected, "C (RuleChanged): pod j-2 (job j index 2) was judged under another acceptance rule"},
		{"a rejection under an older rule does not stand either", specRule, func() []Result {
			rs := judgedBy(v1alpha1.RuleDigest("false"), all)
			rs[0].RejectReason, rs[0].RejectMessage = v1alpha1.RejectionCriterionNotMet, "false"
			return rs
		}(), 0, metav1.ConditionFalse, v1alpha1.ReasonResultRejected, "A (RuleChanged)"},
		{"a rule added after results were judged under none", specRule, judgedBy(v1alpha1.RuleDigest(""), all), 0,
			metav1.ConditionFalse, v1alpha1.ReasonResultRejected, "RuleChanged"},
		{"under the spec's rule, read from its container", specRule, judgedBy(v1alpha1.ResultDigest(specRule, ""), all), 4,
			metav1.ConditionTrue, v1alpha1.ReasonAllResultsAccepted, ""},
		// The spec reads the default container: results read from another one (the
		// resultContainer edited between a capture and the status) never stand.
		{"read from another result container", specRule, judgedBy(v1alpha1.ResultDigest(specRule, "reporter"), all), 0,
			metav1.ConditionFalse, v1alpha1.ReasonResultRejected, "A (RuleChanged): pod j-0 (job j index 0) was judged under another acceptance rule or read from another result container"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").RequireResults(tc.rule).SpecObj()
			j := makeJob("j", "uid-j", 4).Completed("0-3", 4).Complete(jobCondAt)
			// No pod is left to be judged again (TestRuleChangedResultAwaitsItsPod).
			st := step(t, spec, nil, map[string]Observation{"job/j": {Job: j.Facts(), PodsListed: true}}, tc.results...).Status
			if st.Shards.Accepted != tc.wantAccepted {
				t.Errorf("accepted = %d, want %d", st.Shards.Accepted, tc.wantAccepted)
			}
			if st.Results.Recorded != int32(len(tc.results)) {
				t.Errorf("recorded = %d, want %d", st.Results.Recorded, len(tc.results))
			}
			wantCond(t, st, v1alpha1.ConditionResultsAccepted, tc.wantStatus, tc.wantReason, "")
			if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted); !strings.Contains(c.Message, tc.wantSays) {
				t.Errorf("ResultsAccepted message %q does not say %q", c.Message, tc.wantSays)
			}
			if tc.wantStatus != metav1.ConditionTrue && meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAccepted).Status == metav1.ConditionTrue {
				t.Errorf("Accepted on results judged under another rule")
			}
		})
	}
}

// TestRecordedCountsEveryResult: status.results.recorded (which keeps the rule fixed) counts
// every recorded result, rejected, stale and unassigned ones too.
func TestRecordedCountsEveryResult(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults("").SpecObj()
	j := makeJob("j", "uid-j", 3).Completed("0-2", 3).Complete(jobCondAt)
	stale := result("job/j", "uid-old", 0, "A")
	unassigned := result("job/j", "uid-j", 2, "C")
	forged := result("job/j", "uid-j", 1, "A")
	st := step(t, spec, nil, map[string]Observation{"job/j": {Job: j.Facts()}}, stale, unassigned, forged).Status
	if st.Results.Recorded != 3 {
		t.Errorf("recorded = %d, want 3", st.Results.Recorded)
	}
	st = step(t, spec, nil, map[string]Observation{"job/j": {Job: j.Facts()}}).Status
	if st.Results.Recorded != 0 {
		t.Errorf("recorded with no results = %d, want 0", st.Results.Recorded)
	}
}

// TestRuleChangedResultAwaitsItsPod: a result judged under another rule than the spec's
// is no record of its pod, which stays held and is judged again under the spec's rule.
// While that pod may still report, the shard is not decided by the old rule's verdict:
// it is pending, not rejected (and the batch not blocked); once no pod of the index is
// left, the rejection stands.
func TestRuleChangedResultAwaitsItsPod(t *testing.T) {
	const specRule = "result.valid == result.records"
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults(specRule).SpecObj()
	j := makeJob("j", "uid-j", 2).Completed("0-1", 2).Complete(jobCondAt).Facts()
	a := result("job/j", "uid-j", 0, "A")
	a.RuleDigest = v1alpha1.RuleDigest(specRule)
	oldB := result("job/j", "uid-j", 1, "B")
	oldB.RuleDigest = v1alpha1.RuleDigest("true")
	newB := oldB
	newB.RuleDigest = v1alpha1.RuleDigest(specRule)
	cases := []struct {
		name         string
		obs          Observation
		results      []Result
		wantStatus   metav1.ConditionStatus
		wantReason   string
		wantRejected string
	}{
		{name: "B's pod is still held: pending",
			obs: Observation{Job: j, PodsListed: true, SuccessfulPods: pods("p", 1)}, results: []Result{a, oldB},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonResultsPending},
		{name: "B's pods not listed: pending",
			obs: Observation{Job: j}, results: []Result{a, oldB},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonResultsPending},
		{name: "B's pod judged again under the spec's rule: accepted",
			obs: Observation{Job: j, PodsListed: true}, results: []Result{a, oldB, newB},
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ReasonAllResultsAccepted},
		{name: "no pod of B is left: rejected",
			obs: Observation{Job: j, PodsListed: true}, results: []Result{a, oldB},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonResultRejected, wantRejected: "1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := step(t, spec, nil, map[string]Observation{"job/j": tc.obs}, tc.results...).Status
			wantCond(t, st, v1alpha1.ConditionResultsAccepted, tc.wantStatus, tc.wantReason, "")
			if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted); tc.wantStatus != metav1.ConditionTrue && !strings.Contains(c.Message, "B (RuleChanged)") {
				t.Errorf("ResultsAccepted message %q does not name B's RuleChanged rejection", c.Message)
			}
			if st.Results.RejectedOrdinals != tc.wantRejected {
				t.Errorf("rejected ordinals %q; want %q", st.Results.RejectedOrdinals, tc.wantRejected)
			}
			if blocked := Blocker(&st) != nil; blocked != (tc.wantRejected != "") {
				t.Errorf("blocked = %v; want %v", blocked, tc.wantRejected != "")
			}
		})
	}
}
