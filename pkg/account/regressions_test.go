package account

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// Tests that kill mutants the rest of the suite let through.

// TestReversedMappingCoversOnlyItsShard: with indexes 0-3 mapped onto D, C, B, A and
// only index 1 complete, exactly shard C is covered. Mapping completed indexes through
// every run of the target, ignoring each run's index range, reported 2 covered.
func TestReversedMappingCoversOnlyItsShard(t *testing.T) {
	spec := makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "D", "C", "B", "A").SpecObj()
	st := step(t, spec, nil, map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 4).Completed("1", 1).Facts()}}).Status
	if st.Shards.Covered != 1 || st.Shards.MissingOrdinals != "0,1,3" {
		t.Errorf("covered %d missing ordinals %q; want 1, 0,1,3", st.Shards.Covered, st.Shards.MissingOrdinals)
	}
	wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing,
		"1/4 shards covered; missing A = job j index 3, B = job j index 2, D = job j index 0")
}

// TestRepairOfUnassignedShardIsReported: a repair onto a shard no original assignment
// has is its own problem. The shard is unassigned too, so UnassignedShard comes first;
// the repair's problem must still be reported, not implied by it.
func TestRepairOfUnassignedShardIsReported(t *testing.T) {
	spec := makeSpec("A", "B", "C").AssignJob("j", "0-1", "A", "B").Repair("r", "0", "C").SpecObj()
	m := Compile("ml-team", spec)
	var reasons []string
	for _, p := range m.Problems {
		reasons = append(reasons, p.Reason)
	}
	if want := []string{v1alpha1.ReasonUnassignedShard, v1alpha1.ReasonRepairOfUnassigned}; !slices.Equal(reasons, want) {
		t.Fatalf("problems %v; want %v", reasons, want)
	}
	if got, want := m.Problems[1].Message, "repair assignments[1] maps onto C, which no original assignment has: a repair gives an assigned shard a further identity"; got != want {
		t.Errorf("message %q; want %q", got, want)
	}
	st := step(t, spec, nil, map[string]Observation{}).Status
	wantCond(t, st, v1alpha1.ConditionAssignmentValid, metav1.ConditionFalse, v1alpha1.ReasonUnassignedShard,
		"1 of 3 declared shards are assigned to no index: C; "+m.Problems[1].Message)
}

// TestRepairOfAssignedShardIsValid: the same repair onto an assigned shard is no problem.
func TestRepairOfAssignedShardIsValid(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").Repair("r", "0", "B").SpecObj()
	if m := Compile("ml-team", spec); len(m.Problems) != 0 {
		t.Errorf("problems %+v; want none", m.Problems)
	}
}

// TestNeverObservedStaysSoAcrossReconciles: a target not found in the previous status
// either (a status entry without a UID) is still one the account never observed, on every
// later reconcile, and the verdict keeps saying so.
func TestNeverObservedStaysSoAcrossReconciles(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("late", "0-1", "A", "B").SpecObj()
	want := "0/2 shards covered; missing A, B = job late indexes 0,1; job late not found; this account has never observed it: " +
		"if a Job already ran and was deleted before the account existed, its completions cannot be counted; re-run its shards in a Job the assignments name"
	st := step(t, spec, nil, map[string]Observation{}).Status
	for range 2 {
		st = step(t, spec, &st, map[string]Observation{}).Status
		wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonTargetsNotFound, want)
	}
}

// TestMissingMessageBoundedWithinOneInterval: one missing interval that spans more runs
// than messageRunsLimit (shards mapped in reverse, so each shard is its own run) names
// only the first five identities and counts the rest.
func TestMissingMessageBoundedWithinOneInterval(t *testing.T) {
	names := []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}
	spec := makeCompactSpec("s", 8).AssignJob("j", "0-7", "s7", "s6", "s5", "s4", "s3", "s2", "s1", "s0").SpecObj()
	st := step(t, spec, nil, map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", int32(len(names))).Facts()}}).Status
	wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing,
		"0/8 shards covered; missing s0 = job j index 7, s1 = job j index 6, s2 = job j index 5, s3 = job j index 4, s4 = job j index 3 (+3 more shards)")
}

// TestDuplicateShardNamesTheIdentityInsideARun: a shard assigned twice in the middle of
// another run names the index of that run which holds it, not the run's first.
func TestDuplicateShardNamesTheIdentityInsideARun(t *testing.T) {
	spec := makeSpec("A", "B", "C", "D", "E", "F").AssignJob("j", "5-8", "B", "C", "D", "E").AssignJob("k", "0,1", "A", "F").AssignJob("l", "0", "D").SpecObj()
	m := Compile("ml-team", spec)
	if len(m.Problems) != 1 || m.Problems[0].Reason != v1alpha1.ReasonDuplicateShard {
		t.Fatalf("problems %+v; want one DuplicateShard", m.Problems)
	}
	if got, want := m.Problems[0].Message, "shard D is assigned twice: job j index 7 (assignments[0]) and job l index 0 (assignments[2]); a mapping must be a partition"; got != want {
		t.Errorf("message %q; want %q", got, want)
	}
}

// TestIdentityOfAnUnassignedShard: a shard in a gap between runs has no identity, even
// right after the end of the run before it.
func TestIdentityOfAnUnassignedShard(t *testing.T) {
	m := Compile("ml-team", makeSpec("A", "B", "C").AssignJob("j", "0", "A").AssignJob("k", "0", "C").SpecObj())
	if key, i, ok := m.IdentityOf(1); ok {
		t.Errorf("IdentityOf(B) = %s index %d; want none", key, i)
	}
	if key, i, ok := m.IdentityOf(2); !ok || key != "job/k" || i != 0 {
		t.Errorf("IdentityOf(C) = %s index %d, %v; want job/k index 0", key, i, ok)
	}
}

// TestRejectionsInTheMessageBounded: the verdict explains at most messageRunsLimit
// rejections; the counts hold them all.
func TestRejectionsInTheMessageBounded(t *testing.T) {
	six := []string{"A", "B", "C", "D", "E", "F"}
	spec := makeSpec(six...).AssignJob("j", "0-5", six...).RequireResults("").SpecObj()
	obs := map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 6).Completed("0-5", 6).Facts()}}
	var results []Result
	for i := range six {
		results = append(results, result("job/j", "uid-j", i, six[(i+1)%6])) // each claims its neighbour
	}
	st := step(t, spec, nil, obs, results...).Status
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted)
	if n := strings.Count(c.Message, "(ForgedClaim)"); n != messageRunsLimit || st.Results.Rejected != 6 || st.Results.RejectedOrdinals != "0-5" {
		t.Errorf("message explains %d rejections, rejected %d ordinals %q; want %d, 6, 0-5: %q", n, st.Results.Rejected, st.Results.RejectedOrdinals, messageRunsLimit, c.Message)
	}
}

// TestRejectedResultOfASupersededIdentityDoesNotBlockTheShard: a JobSet child's result
// rejected under restart attempt 0 is StaleIdentity once attempt 1 (a new UID) runs the
// shard again: it neither rejects the shard nor blocks the account, as an accepted
// result of attempt 0 would not stand for it either.
func TestRejectedResultOfASupersededIdentityDoesNotBlockTheShard(t *testing.T) {
	key := "jobset/train/workers/0"
	spec := makeCompactSpec("s", 2).AssignJobSet("train", "workers", 0, "0-1", "0-1").
		RequireResults("result.valid == result.records").SpecObj()
	bad := result(key, "uid-a0", 0, "s0")
	bad.RejectReason, bad.RejectMessage = v1alpha1.RejectionCriterionNotMet, "the result does not meet the rule"
	a0 := makeJob("train-workers-0", "uid-a0", 2).Completed("0", 1)
	st := at(spec, nil, 0, map[string]Observation{key: {Job: a0.Facts()}}, bad).Status
	if st.Results.RejectedOrdinals != "0" {
		t.Fatalf("attempt 0: rejectedOrdinals %q, want 0", st.Results.RejectedOrdinals)
	}
	a1 := makeJob("train-workers-0", "uid-a1", 2)
	st = at(spec, &st, time.Minute, map[string]Observation{key: {Job: a1.Facts(), RestartAttempt: 1}}, bad).Status
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted); c == nil || c.Reason != v1alpha1.ReasonResultsPending {
		t.Errorf("ResultsAccepted %+v; want ResultsPending: attempt 1 still runs s0", c)
	}
	if st.Results.RejectedOrdinals != "" {
		t.Errorf("rejectedOrdinals %q; want none", st.Results.RejectedOrdinals)
	}
	if b := Blocker(&st); b != nil {
		t.Errorf("blocked by %s/%s; attempt 1 may still be accepted", b.Type, b.Reason)
	}
	if n := len(st.Results.Rejections); n != 1 || st.Results.Rejections[n-1].Reason != v1alpha1.RejectionStaleIdentity {
		t.Errorf("rejections %+v; want the one result, StaleIdentity", st.Results.Rejections)
	}
}

// TestRuleInvalidKeepsTheRecordedCount: when the rule does not compile in this
// controller, the results on record stay counted, so that the CRD keeps the rule they
// were judged under immutable (it allows a change only while recorded is 0).
func TestRuleInvalidKeepsTheRecordedCount(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults("result.valid == result.records").SpecObj()
	obs := map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 2).Completed("0-1", 2).Facts()}}
	recorded := []Result{result("job/j", "uid-j", 0, "A"), result("job/j", "uid-j", 1, "B")}
	for i := range recorded {
		recorded[i].RuleDigest = v1alpha1.RuleDigest(spec.Acceptance.Rule)
	}
	st := at(spec, nil, 0, obs, recorded...).Status
	out := Compute(Input{Namespace: "ml-team", Generation: 1, Spec: spec, Previous: &st, Observations: obs,
		Results: recorded, RuleError: "ERROR: <input>:1:1: undeclared reference", Now: metav1.NewTime(time0.Add(time.Minute))})
	if got := out.Status.Results.Recorded; got != 2 {
		t.Errorf("recorded %d under RuleInvalid; want 2", got)
	}
	wantCond(t, out.Status, v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonRuleInvalid, "")
}

// TestCompactShardNamesAreCanonical: in the compact form only "<prefix><decimal>"
// without a sign or a leading zero names a declared shard.
func TestCompactShardNamesAreCanonical(t *testing.T) {
	shards := Compile("ml-team", makeCompactSpec("s", 2).AssignJob("j", "0-1", "s0", "s1").SpecObj()).Shards
	for _, tc := range []struct {
		name string
		want bool
	}{{"s0", true}, {"s1", true}, {"s+1", false}, {"s-0", false}, {"s+0", false}, {"s01", false}, {"s 1", false}, {"s2", false}} {
		if _, ok := shards.Ordinal(tc.name); ok != tc.want {
			t.Errorf("Ordinal(%q) declared = %v, want %v", tc.name, ok, tc.want)
		}
	}
	m := Compile("ml-team", makeCompactSpec("s", 2).AssignJob("j", "0-1", "s0", "s+1").SpecObj())
	if len(m.Problems) == 0 || m.Problems[0].Reason != v1alpha1.ReasonUnknownShard {
		t.Errorf("problems %v; want UnknownShard for s+1", m.Problems)
	}
}

// TestAssignmentOfNoIndexIsAProblem: an assignment with no index (which the API
// server refuses, but a Go caller may pass) is reported, never a panic.
func TestAssignmentOfNoIndexIsAProblem(t *testing.T) {
	spec := makeSpec("A").SpecObj()
	spec.Assignments = []v1alpha1.Assignment{{Target: v1alpha1.TargetRef{Job: "j"}}}
	m := Compile("ml-team", spec)
	if len(m.Problems) == 0 || m.Problems[0].Reason != v1alpha1.ReasonMalformedIndexes {
		t.Errorf("problems %v; want MalformedIndexes first", m.Problems)
	}
}
