package account

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

var time0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// step computes the account from obs, on top of the previous status.
func step(t *testing.T, spec *v1alpha1.BatchAccountSpec, prev *v1alpha1.BatchAccountStatus, obs map[string]Observation, results ...Result) Output {
	t.Helper()
	return Compute(Input{
		Namespace: "ml-team", Generation: 1, Spec: spec, Previous: prev,
		Observations: obs, Results: results, Now: metav1.NewTime(time0),
	})
}

func wantCond(t *testing.T, st v1alpha1.BatchAccountStatus, typ string, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	c := meta.FindStatusCondition(st.Conditions, typ)
	if c == nil {
		t.Fatalf("condition %s missing", typ)
	}
	if c.Status != status || c.Reason != reason {
		t.Errorf("%s = %s/%s (%q), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
	}
	if message != "" && c.Message != message {
		t.Errorf("%s message = %q, want %q", typ, c.Message, message)
	}
}

// TestIJ245 plays the seed's worked case step by step: one Indexed Job j, indexes 0..3
// assigned to shards A..D of input revision D under one model revision.
func TestIJ245(t *testing.T) {
	spec := makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").
		RequireResults("result.valid == result.records && result.records > 0").SpecObj()

	// First review point: five successful pods on indexes 0,1,1,2,2. The Job controller
	// counts each index once: completedIndexes "0-2", succeeded 3.
	j := makeJob("j", "uid-j", 4).Completed("0-2", 3).ResourceVersion("48213")
	first := step(t, spec, nil, map[string]Observation{"job/j": {Job: j.Facts(), SuccessfulPods: pods("p", 0, 1, 1, 2, 2)}})
	st := first.Status
	tgt := st.Targets[0]
	if tgt.CompletedIndexes != "0-2" || tgt.Required != "0-3" || tgt.SuccessfulAttempts != 5 || tgt.RepeatedIndexes != "1,2" {
		t.Errorf("target after five attempts = completed %q required %q attempts %d repeated %q; want 0-2, 0-3, 5, 1,2",
			tgt.CompletedIndexes, tgt.Required, tgt.SuccessfulAttempts, tgt.RepeatedIndexes)
	}
	if tgt.ObservedResourceVersion != "48213" || tgt.UID != "uid-j" {
		t.Errorf("observation point = rv %q uid %q", tgt.ObservedResourceVersion, tgt.UID)
	}
	if st.Shards.Total != 4 || st.Shards.Covered != 3 || st.Shards.Missing != "D" || st.Shards.MissingOrdinals != "3" {
		t.Errorf("shards = %+v; want 3/4 covered, missing D", st.Shards)
	}
	wantCond(t, st, v1alpha1.ConditionAssignmentValid, metav1.ConditionTrue, v1alpha1.ReasonValid, "")
	wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, "3/4 shards covered; missing D = job j index 3")
	wantCond(t, st, v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination, "")
	wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, "3/4 shards covered; missing D = job j index 3")

	// A sixth successful pod has index 3. The repeats of 1 and 2 were deleted by the Job
	// controller meanwhile: the ledger keeps them counted.
	j = makeJob("j", "uid-j", 4).Completed("0-3", 4).ResourceVersion("48250")
	second := step(t, spec, &st, map[string]Observation{"job/j": {Job: j.Facts(), SuccessfulPods: pods("q", 3)}})
	st = second.Status
	tgt = st.Targets[0]
	if tgt.CompletedIndexes != "0-3" || tgt.SuccessfulAttempts != 6 {
		t.Errorf("after sixth attempt: completed %q attempts %d; want 0-3, 6", tgt.CompletedIndexes, tgt.SuccessfulAttempts)
	}
	wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered, "4/4 shards covered")
	// Coverage arithmetic supplies no termination observation.
	wantCond(t, st, v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination, "")
	wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination, "")

	// SuccessCriteriaMet is recorded before Complete; still not terminal.
	j = makeJob("j", "uid-j", 4).Completed("0-3", 4).Condition(batchv1.JobSuccessCriteriaMet, "CompletionsReached", jobCondAt)
	st = step(t, spec, &st, map[string]Observation{"job/j": {Job: j.Facts()}}).Status
	wantCond(t, st, v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination,
		"not terminated: job j (SuccessCriteriaMet, Complete not yet recorded); coverage does not imply termination")

	// All pods terminated and the controller records Complete.
	j.Condition(batchv1.JobComplete, "CompletionsReached", jobCondAt)
	third := step(t, spec, &st, map[string]Observation{"job/j": {Job: j.Facts()}})
	st = third.Status
	if st.Targets[0].Terminal != TerminalComplete || st.Targets[0].TerminalObservedAt == nil || st.Targets[0].SuccessfulAttempts != 6 {
		t.Errorf("terminal = %+v", st.Targets[0])
	}
	wantCond(t, st, v1alpha1.ConditionTerminated, metav1.ConditionTrue, v1alpha1.ReasonComplete, "")
	wantCond(t, st, v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultsPending, "0/4 shard results accepted; waiting for A..D")
	wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultsPending, "")

	// The application owner's accepted outputs for A..D, on the account's revisions.
	var results []Result
	for i, s := range []string{"A", "B", "C", "D"} {
		results = append(results, result("job/j", "uid-j", i, s))
	}
	final := step(t, spec, &st, map[string]Observation{"job/j": {Job: j.Facts()}}, results...)
	st = final.Status
	if st.Shards.Accepted != 4 {
		t.Errorf("accepted = %d, want 4", st.Shards.Accepted)
	}
	wantCond(t, st, v1alpha1.ConditionResultsAccepted, metav1.ConditionTrue, v1alpha1.ReasonAllResultsAccepted, "")
	wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
	if len(final.Changed) == 0 {
		t.Errorf("the verdict change to Accepted must be reported for an event")
	}

	// Wrong model revision on shard C's result: rejected, naming C and the revision.
	bad := append([]Result{}, results...)
	bad[2].ModelRevision = "m-2026-10"
	st = step(t, spec, &st, map[string]Observation{"job/j": {Job: j.Facts()}}, bad...).Status
	wantCond(t, st, v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected,
		`3/4 shard results accepted; rejected: C (RevisionMismatch): shard C result of pod j-2 (job j index 2) has modelRevision "m-2026-10", the account requires "m-2026-11"`)
	wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected, "")
}

// TestIJ245AllToShardA: four completed indexes all mapped to shard A prove nothing about
// B, C and D; the mapping is invalid and says so.
func TestIJ245AllToShardA(t *testing.T) {
	spec := makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "A", "A", "A").SpecObj()
	j := makeJob("j", "uid-j", 4).Completed("0-3", 4).Complete(jobCondAt)
	st := step(t, spec, nil, map[string]Observation{"job/j": {Job: j.Facts()}}).Status
	wantCond(t, st, v1alpha1.ConditionAssignmentValid, metav1.ConditionFalse, v1alpha1.ReasonDuplicateShard, "")
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAssignmentValid)
	for _, want := range []string{"shard A is assigned twice", "3 of 4 declared shards are assigned to no index: B..D"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("AssignmentValid message %q lacks %q", c.Message, want)
		}
	}
	wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid, "")
	wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid, "")
}
