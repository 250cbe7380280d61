package account

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

func mustParse(t *testing.T, s string) indexset.Set {
	t.Helper()
	set, err := indexset.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestSuccessPolicy: the Job may succeed by its own criterion while shards are missing;
// the batch still requires every declared shard.
func TestSuccessPolicy(t *testing.T) {
	eight := []string{"A", "B", "C", "D", "E", "F", "G", "H"}
	cases := []struct {
		name         string
		job          *wrappers.JobWrapper
		wantRequired string
		wantPolicy   string
		wantMessage  string
	}{
		{
			name: "succeededIndexes 0: leader done, workers never ran",
			job: makeJob("j", "u", 8).SuccessPolicy(wrappers.SucceededIndexes("0")).Completed("0", 1).
				Condition(batchv1.JobSuccessCriteriaMet, "SuccessPolicy", jobCondAt).Condition(batchv1.JobComplete, "SuccessPolicy", jobCondAt),
			wantRequired: "0",
			wantPolicy:   "succeeds when indexes 0 succeeded",
			wantMessage: "1/8 shards covered; missing B..H = job j indexes 1-7; " +
				"job j succeeded by its successPolicy (succeeds when indexes 0 succeeded) with shards not covered",
		},
		{
			name: "succeededCount 6 of 8",
			job: makeJob("j", "u", 8).SuccessPolicy(wrappers.SucceededCount(6)).Completed("0-5", 6).
				Condition(batchv1.JobSuccessCriteriaMet, "SuccessPolicy", jobCondAt).Condition(batchv1.JobComplete, "SuccessPolicy", jobCondAt),
			wantRequired: "0-7",
			wantPolicy:   "succeeds when 6 indexes succeeded",
			wantMessage: "6/8 shards covered; missing G, H = job j indexes 6,7; " +
				"job j succeeded by its successPolicy (succeeds when 6 indexes succeeded) with shards not covered",
		},
		{
			name: "the seed's two rules: leader or any six",
			job: makeJob("j", "u", 8).SuccessPolicy(wrappers.SucceededIndexes("0"), wrappers.SucceededCount(6)).Completed("0", 1).
				Condition(batchv1.JobSuccessCriteriaMet, "SuccessPolicy", jobCondAt).Condition(batchv1.JobComplete, "SuccessPolicy", jobCondAt),
			wantRequired: "0-7",
			wantPolicy:   "succeeds when indexes 0 succeeded, or when 6 indexes succeeded",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := makeSpec(eight...).AssignJob("j", "0-7", eight...).SpecObj()
			st := step(t, spec, nil, map[string]Observation{"job/j": {Job: tc.job.Facts()}}).Status
			tgt := st.Targets[0]
			if tgt.Required != tc.wantRequired || tgt.SuccessPolicy != tc.wantPolicy || tgt.Terminal != TerminalComplete {
				t.Errorf("target = required %q policy %q terminal %q", tgt.Required, tgt.SuccessPolicy, tgt.Terminal)
			}
			wantCond(t, st, v1alpha1.ConditionTerminated, "True", v1alpha1.ReasonComplete, "")
			wantCond(t, st, v1alpha1.ConditionShardsCovered, "False", v1alpha1.ReasonShardsMissing, tc.wantMessage)
			wantCond(t, st, v1alpha1.ConditionAccepted, "False", v1alpha1.ReasonShardsMissing, "")
		})
	}
}

// TestRepairSucceededBySuccessPolicy: a repair Job that ends Complete by its own
// criterion with its shards not all covered is named, as an original Job is.
func TestRepairSucceededBySuccessPolicy(t *testing.T) {
	spec := makeSpec("A", "B", "C").AssignJob("j", "0-2", "A", "B", "C").Repair("r", "0-1", "B", "C").SpecObj()
	j := makeJob("j", "uid-j", 3).Completed("0", 1).Failed("BackoffLimitExceeded", jobCondAt)
	r := makeJob("r", "uid-r", 2).SuccessPolicy(wrappers.SucceededIndexes("0")).Completed("0", 1).
		Condition(batchv1.JobSuccessCriteriaMet, "SuccessPolicy", jobCondAt).Condition(batchv1.JobComplete, "SuccessPolicy", jobCondAt)
	st := step(t, spec, nil, map[string]Observation{"job/j": {Job: j.Facts()}, "job/r": {Job: r.Facts()}}).Status
	if st.Shards.Covered != 2 || st.Shards.Missing != "C" {
		t.Fatalf("shards = %+v, want 2 covered, C missing", st.Shards)
	}
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionShardsCovered)
	want := "job r succeeded by its successPolicy (succeeds when indexes 0 succeeded) with shards not covered"
	if c == nil || !strings.Contains(c.Message, want) {
		t.Errorf("ShardsCovered = %v, want its message to say %q", c, want)
	}
}

// TestCrossJobAccount: two Jobs of two indexes each carry four shards; index 0 of k is a
// different identity from index 0 of j, never added together.
func TestCrossJobAccount(t *testing.T) {
	spec := makeSpec("A", "B", "C", "D").AssignJob("j", "0-1", "A", "B").AssignJob("k", "0-1", "C", "D").SpecObj()
	j := makeJob("j", "uid-j", 2).Completed("0,1", 2).Complete(jobCondAt)
	k := makeJob("k", "uid-k", 2).Completed("1", 1)
	st := step(t, spec, nil, map[string]Observation{"job/j": {Job: j.Facts()}, "job/k": {Job: k.Facts()}}).Status
	if st.Shards.Covered != 3 || st.Shards.Missing != "C" {
		t.Errorf("shards = %+v, want 3 covered, C missing", st.Shards)
	}
	wantCond(t, st, v1alpha1.ConditionShardsCovered, "False", v1alpha1.ReasonShardsMissing, "3/4 shards covered; missing C = job k index 0")
	wantCond(t, st, v1alpha1.ConditionTerminated, "False", v1alpha1.ReasonAwaitingTermination, "not terminated: job k; coverage does not imply termination")

	// Job k absent: its shards are missing and the account says it waits for it.
	st = step(t, spec, nil, map[string]Observation{"job/j": {Job: j.Facts()}}).Status
	wantCond(t, st, v1alpha1.ConditionShardsCovered, "False", v1alpha1.ReasonShardsMissing, "2/4 shards covered; missing C, D = job k indexes 0,1; job k not found")
	wantCond(t, st, v1alpha1.ConditionAdmitted, "False", v1alpha1.ReasonTargetsNotFound, "waiting for job k to exist")
	if st.Targets[1].Found {
		t.Errorf("job k reported found")
	}
}

// TestJobSetRestart: a restart recreates child Jobs under the same names with new UIDs.
// The old identity's coverage goes to history; the current attempt is judged alone.
func TestJobSetRestart(t *testing.T) {
	spec := makeCompactSpec("s", 8).AssignJobSet("train", "workers", 0, "0-3", "0-3").AssignJobSet("train", "workers", 1, "0-3", "4-7").SpecObj()
	w0 := makeJob("train-workers-0", "uid-w0-a0", 4).Completed("0-3", 4)
	w1 := makeJob("train-workers-1", "uid-w1-a0", 4).Completed("0-2", 3)
	obs := map[string]Observation{
		"jobset/train/workers/0": {Job: w0.Facts(), SuccessfulPods: pods("a", 0, 1, 2, 3)},
		"jobset/train/workers/1": {Job: w1.Facts()},
	}
	st := step(t, spec, nil, obs).Status
	if st.Shards.Covered != 7 {
		t.Fatalf("before restart covered %d, want 7", st.Shards.Covered)
	}

	// Restart attempt 1: children deleted (not found for a moment), then recreated.
	st = step(t, spec, &st, map[string]Observation{}).Status
	if len(st.History) != 2 || st.History[0].UID != "uid-w0-a0" || st.History[0].CompletedIndexes != "0-3" || st.History[1].CompletedIndexes != "0-2" {
		t.Fatalf("history after deletion = %+v", st.History)
	}
	wantCond(t, st, v1alpha1.ConditionShardsCovered, "False", v1alpha1.ReasonTargetsNotFound, "")

	w0 = makeJob("train-workers-0", "uid-w0-a1", 4).Completed("0", 1)
	w1 = makeJob("train-workers-1", "uid-w1-a1", 4)
	st = step(t, spec, &st, map[string]Observation{
		"jobset/train/workers/0": {Job: w0.Facts(), RestartAttempt: 1},
		"jobset/train/workers/1": {Job: w1.Facts(), RestartAttempt: 1},
	}).Status
	if len(st.History) != 2 {
		t.Errorf("history must not grow when the new identity is first seen: %+v", st.History)
	}
	if st.Shards.Covered != 1 || st.Targets[0].RestartAttempt != 1 || st.Targets[0].SuccessfulAttempts != 1 {
		t.Errorf("current attempt: covered %d attempt %d attempts %d; want 1, 1, 1", st.Shards.Covered, st.Targets[0].RestartAttempt, st.Targets[0].SuccessfulAttempts)
	}
	wantCond(t, st, v1alpha1.ConditionShardsCovered, "False", v1alpha1.ReasonShardsMissing,
		"1/8 shards covered; missing s1..s3 = jobset train workers[0] indexes 1-3, s4..s7 = jobset train workers[1] indexes 0-3")

	// A Job replaced without the controller seeing the gap is superseded all the same.
	w0b := makeJob("train-workers-0", "uid-w0-a2", 4)
	st = step(t, spec, &st, map[string]Observation{
		"jobset/train/workers/0": {Job: w0b.Facts(), RestartAttempt: 2},
		"jobset/train/workers/1": {Job: w1.Facts(), RestartAttempt: 1},
	}).Status
	if len(st.History) != 3 || st.History[2].UID != "uid-w0-a1" || st.History[2].RestartAttempt != 1 {
		t.Errorf("history = %+v", st.History)
	}
}

// TestEndedChildAwaitsItsOwner: a JobSet restart recreates every child, the Failed and
// the Complete ones (new identities whose indexes run again), so a child that ended while
// its JobSet has not is not the batch's end: the batch is not terminated
// (AwaitingTermination, which keeps retention from taking the account, and an Accepted
// that a restart brought by the failure of any child would take back) until the JobSet
// ends; once the JobSet ended, or is gone, the child's end stands. A Job target that
// ended is not waited for.
func TestEndedChildAwaitsItsOwner(t *testing.T) {
	childSpec := makeCompactSpec("s", 4).AssignJobSet("train", "workers", 0, "0-3", "0-3").SpecObj()
	jobSpec := makeCompactSpec("s", 4).AssignJobOrdinals("train-workers-0", "0-3", "0-3").SpecObj()
	failed := makeJob("train-workers-0", "uid-w0", 4).Completed("0-1", 2).Failed("BackoffLimitExceeded", jobCondAt)
	complete := makeJob("train-workers-0", "uid-w0", 4).Completed("0-3", 4).Complete(jobCondAt)
	const child, job = "jobset/train/workers/0", "job/train-workers-0"
	cases := []struct {
		name                string
		spec                *v1alpha1.BatchAccountSpec
		key                 string
		job                 *wrappers.JobWrapper
		childOwner          string
		wantStatus          metav1.ConditionStatus
		wantReason, wantMsg string
		wantAccepted        metav1.ConditionStatus
		wantAcceptedReason  string
	}{
		{"failed, its JobSet runs", childSpec, child, failed, OwnerRunning, metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination,
			"not terminated: jobset train workers[0] Failed (BackoffLimitExceeded), its JobSet may restart it; coverage does not imply termination",
			metav1.ConditionFalse, v1alpha1.ReasonShardsMissing},
		{"failed, its JobSet Failed", childSpec, child, failed, "Failed", metav1.ConditionTrue, v1alpha1.ReasonTargetFailed, "", metav1.ConditionFalse, v1alpha1.ReasonShardsMissing},
		{"failed, its JobSet is gone", childSpec, child, failed, OwnerDeleted, metav1.ConditionTrue, v1alpha1.ReasonTargetFailed, "", metav1.ConditionFalse, v1alpha1.ReasonShardsMissing},
		{"failed, a Job target", jobSpec, job, failed, "", metav1.ConditionTrue, v1alpha1.ReasonTargetFailed, "", metav1.ConditionFalse, v1alpha1.ReasonShardsMissing},
		{"complete, its JobSet runs", childSpec, child, complete, OwnerRunning, metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination,
			"not terminated: jobset train workers[0] Complete, but its JobSet has not ended and may still restart it; coverage does not imply termination",
			metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination},
		{"complete, its JobSet Completed", childSpec, child, complete, "Completed", metav1.ConditionTrue, v1alpha1.ReasonComplete, "", metav1.ConditionTrue, v1alpha1.ReasonAccepted},
		{"complete, its JobSet is gone", childSpec, child, complete, OwnerDeleted, metav1.ConditionTrue, v1alpha1.ReasonComplete, "", metav1.ConditionTrue, v1alpha1.ReasonAccepted},
		{"complete, a Job target", jobSpec, job, complete, "", metav1.ConditionTrue, v1alpha1.ReasonComplete, "", metav1.ConditionTrue, v1alpha1.ReasonAccepted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var prev *v1alpha1.BatchAccountStatus
			if tc.childOwner == OwnerDeleted {
				// The child was seen while its JobSet ran: one first seen once its owner
				// is gone stands for nothing (TestChildFirstSeenWithItsOwnerGone).
				p := step(t, tc.spec, nil, map[string]Observation{tc.key: {Job: tc.job.Facts(), ChildOwner: OwnerRunning}}).Status
				prev = &p
			}
			st := step(t, tc.spec, prev, map[string]Observation{tc.key: {Job: tc.job.Facts(), ChildOwner: tc.childOwner}}).Status
			wantCond(t, st, v1alpha1.ConditionTerminated, tc.wantStatus, tc.wantReason, tc.wantMsg)
			wantCond(t, st, v1alpha1.ConditionAccepted, tc.wantAccepted, tc.wantAcceptedReason, "")
		})
	}
}

// TestDeletedFailedChildAwaitsItsOwner: a JobSet restart deletes the failed child before
// it creates the next (all children first under BlockingRecreate, and under startupPolicy
// InOrder a later replicatedJob's only once the earlier ones run). While the JobSet has
// not ended, the deleted child's failure is no more final than it was before the
// deletion: the batch stays AwaitingTermination, so that retention does not take it in
// between. Once the JobSet ended, the record's failure stands.
func TestDeletedFailedChildAwaitsItsOwner(t *testing.T) {
	spec := makeCompactSpec("s", 4).AssignJobSet("train", "workers", 0, "0-3", "0-3").SpecObj()
	failed := makeJob("train-workers-0", "uid-w0", 4).Completed("0-1", 2).Failed("BackoffLimitExceeded", jobCondAt)
	key := "jobset/train/workers/0"
	first := step(t, spec, nil, map[string]Observation{key: {Job: failed.Facts(), ChildOwner: OwnerRunning}}).Status
	wantCond(t, first, v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination, "")
	cases := []struct {
		name       string
		obs        Observation
		wantStatus metav1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{"its JobSet runs", Observation{ChildOwner: OwnerRunning}, metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination,
			"not terminated: jobset train workers[0] Failed (BackoffLimitExceeded), its JobSet may restart it; coverage does not imply termination"},
		{"its JobSet Failed", Observation{OwnerEnded: "Failed", ChildOwner: "Failed"}, metav1.ConditionTrue, v1alpha1.ReasonTargetFailed, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := step(t, spec, first.DeepCopy(), map[string]Observation{key: tc.obs}).Status
			if len(st.Targets) != 1 || !st.Targets[0].Deleted || st.Targets[0].UID != "uid-w0" {
				t.Fatalf("targets %+v, want the failed child's record, deleted", st.Targets)
			}
			wantCond(t, st, v1alpha1.ConditionTerminated, tc.wantStatus, tc.wantReason, tc.wantMsg)
		})
	}
}

// TestAttempts: attempts are pods, indexes are indexes; a pod seen twice counts once.
func TestAttempts(t *testing.T) {
	spec := makeSpec("A", "B", "C").AssignJob("j", "0-2", "A", "B", "C").SpecObj()
	j := makeJob("j", "u", 3).Completed("0-2", 3)
	p := pods("p", 0, 1, 1, 2, 2, 2)
	st := step(t, spec, nil, map[string]Observation{"job/j": {Job: j.Facts(), SuccessfulPods: p}}).Status
	st = step(t, spec, &st, map[string]Observation{"job/j": {Job: j.Facts(), SuccessfulPods: p}}).Status
	tgt := st.Targets[0]
	if tgt.SuccessfulAttempts != 6 || tgt.RepeatedIndexes != "1,2" || tgt.Succeeded != 3 {
		t.Errorf("attempts %d repeated %q succeeded %d; want 6, 1,2, 3", tgt.SuccessfulAttempts, tgt.RepeatedIndexes, tgt.Succeeded)
	}
	if len(tgt.AttemptLedger) != 2 || len(tgt.AttemptLedger[1].Pods) != 3 {
		t.Errorf("ledger = %+v", tgt.AttemptLedger)
	}
}

// TestRepair: a repair Job's index gives missing shard D a further identity; the account
// says D was covered by the repair.
func TestRepair(t *testing.T) {
	spec := makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Repair("j-repair", "0", "D").SpecObj()
	j := makeJob("j", "uid-j", 4).Completed("0-2", 3).FailedIndexes("3").Failed("FailedIndexes", jobCondAt)
	r := makeJob("j-repair", "uid-r", 1).Completed("0", 1).Complete(jobCondAt)
	st := step(t, spec, nil, map[string]Observation{"job/j": {Job: j.Facts()}, "job/j-repair": {Job: r.Facts()}}).Status
	wantCond(t, st, v1alpha1.ConditionShardsCovered, "True", v1alpha1.ReasonAllShardsCovered, "4/4 shards covered; D covered by repair assignments")
	if len(st.Shards.CoveredBy) != 1 || st.Shards.CoveredBy[0] != (v1alpha1.ShardCoverage{Shard: "D", Target: "job/j-repair", Index: 0}) {
		t.Errorf("coveredBy = %+v", st.Shards.CoveredBy)
	}
	if st.Targets[0].FailedIndexes != "3" {
		t.Errorf("failedIndexes = %q", st.Targets[0].FailedIndexes)
	}
	wantCond(t, st, v1alpha1.ConditionTerminated, "True", v1alpha1.ReasonTargetFailed, "job j Failed (FailedIndexes)")
	wantCond(t, st, v1alpha1.ConditionAccepted, "True", v1alpha1.ReasonAccepted, "")

	// Without the repair Job's completion, D is missing, waiting for the repair's identity,
	// and the failure is named.
	r = makeJob("j-repair", "uid-r", 1)
	st = step(t, spec, nil, map[string]Observation{"job/j": {Job: j.Facts()}, "job/j-repair": {Job: r.Facts()}}).Status
	wantCond(t, st, v1alpha1.ConditionShardsCovered, "False", v1alpha1.ReasonShardsMissing,
		"3/4 shards covered; missing D = job j index 3, D = job j-repair index 0 (repair); job j failed (FailedIndexes)")
}

// TestAcceptedAfterAFailureSaysWhatCovered: a batch Accepted though a target Failed says
// its shards were covered by repair only when a repair covered them; a Job that failed
// on an index it was not required to complete (its successPolicy needs indexes 0,1, the
// mapping assigns only those) covered its shards itself.
func TestAcceptedAfterAFailureSaysWhatCovered(t *testing.T) {
	cases := []struct {
		name    string
		spec    *v1alpha1.BatchAccountSpec
		obs     map[string]Observation
		wantMsg string
	}{
		{
			name: "its own indexes covered its shards",
			spec: makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecObj(),
			obs: map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 4).SuccessPolicy(wrappers.SucceededIndexes("0,1")).
				Completed("0,1", 2).FailedIndexes("2").Failed("FailedIndexes", jobCondAt).Facts()}},
			wantMsg: "every shard covered, every target terminated (job j Failed (FailedIndexes))",
		},
		{
			name: "a repair covered its shard",
			spec: makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").Repair("j-repair", "0", "B").SpecObj(),
			obs: map[string]Observation{
				"job/j":        {Job: makeJob("j", "uid-j", 2).Completed("0", 1).FailedIndexes("1").Failed("FailedIndexes", jobCondAt).Facts()},
				"job/j-repair": {Job: makeJob("j-repair", "uid-r", 1).Completed("0", 1).Complete(jobCondAt).Facts()},
			},
			wantMsg: "every shard covered, every target terminated (job j Failed (FailedIndexes), its shards covered by repair)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := step(t, tc.spec, nil, tc.obs).Status
			wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, tc.wantMsg)
		})
	}
}

// TestSpecRepairsCountAsRepairAssignments: an entry of spec.repairs is judged exactly as
// the same entry appended to spec.assignments marked repair, whatever the Jobs did.
func TestSpecRepairsCountAsRepairAssignments(t *testing.T) {
	inAssignments := makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Repair("j-repair", "0-1", "C", "D").SpecObj()
	inRepairs := makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").SpecRepair("j-repair", "0-1", "C", "D").SpecObj()
	j := makeJob("j", "uid-j", 4).Completed("0-1", 2).FailedIndexes("2-3").Failed("FailedIndexes", jobCondAt)
	cases := []struct {
		name   string
		repair *wrappers.JobWrapper
	}{
		{"repair Job not started", makeJob("j-repair", "uid-r", 2)},
		{"repair Job covered one shard", makeJob("j-repair", "uid-r", 2).Completed("1", 1)},
		{"repair Job complete", makeJob("j-repair", "uid-r", 2).Completed("0-1", 2).Complete(jobCondAt)},
		{"repair Job failed", makeJob("j-repair", "uid-r", 2).Completed("0", 1).FailedIndexes("1").Failed("FailedIndexes", jobCondAt)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := map[string]Observation{"job/j": {Job: j.Facts()}, "job/j-repair": {Job: tc.repair.Facts()}}
			want := step(t, inAssignments, nil, obs).Status
			got := step(t, inRepairs, nil, obs).Status
			// The two specs are spelled differently: only JudgedSpec, which names the spec,
			// may differ.
			got.JudgedSpec, want.JudgedSpec = "", ""
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("status with spec.repairs differs from that with a repair assignment:\n got %+v\nwant %+v", got, want)
			}
		})
	}
	// A broken entry of spec.repairs is named as the spec spells it.
	bad := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecRepair("j-repair", "0-1", "B").SpecObj()
	if p := Compile("ns", bad).Problems; len(p) != 1 || !strings.HasPrefix(p[0].Message, "repairs[0] maps 2 indexes") {
		t.Errorf("problems = %+v", p)
	}
}

// TestResults pins result verification: forged claims, stale identities, conflicts.
func TestResults(t *testing.T) {
	spec := makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").RequireResults("").SpecObj()
	j := makeJob("j", "uid-j", 4).Completed("0-3", 4).Complete(jobCondAt)
	obs := map[string]Observation{"job/j": {Job: j.Facts()}}
	good := func(i int, s string) Result { return result("job/j", "uid-j", i, s) }

	t.Run("forged claim: index 1 reports shard D", func(t *testing.T) {
		forged := good(1, "D")
		st := step(t, spec, nil, obs, good(0, "A"), forged, good(2, "C")).Status
		if st.Shards.Accepted != 2 || st.Results.Rejected != 1 || st.Results.Rejections[0].Reason != v1alpha1.RejectionForgedClaim {
			t.Fatalf("accepted %d results %+v", st.Shards.Accepted, st.Results)
		}
		wantCond(t, st, v1alpha1.ConditionResultsAccepted, "False", v1alpha1.ReasonResultRejected,
			`2/4 shard results accepted; rejected: B (ForgedClaim): pod j-1 (job j index 1) claims shard "D" but its identity is assigned shard B`)
	})
	t.Run("conflicting digests: the first stands", func(t *testing.T) {
		second := good(2, "C")
		second.Digest, second.Pod = "sha256:other", "j-2-b"
		st := step(t, spec, nil, obs, good(0, "A"), good(1, "B"), good(2, "C"), second, good(3, "D")).Status
		if st.Shards.Accepted != 4 || st.Results.Conflicts != 1 || st.Results.Rejections[0].Reason != v1alpha1.RejectionConflict || st.Results.Rejections[0].Pod != "j-2-b" {
			t.Fatalf("accepted %d results %+v", st.Shards.Accepted, st.Results)
		}
		wantCond(t, st, v1alpha1.ConditionAccepted, "True", v1alpha1.ReasonAccepted, "")
	})
	t.Run("same digest twice is no conflict", func(t *testing.T) {
		st := step(t, spec, nil, obs, good(0, "A"), good(0, "A")).Status
		if st.Results.Conflicts != 0 || st.Results.Rejected != 0 {
			t.Fatalf("results %+v", st.Results)
		}
	})
	t.Run("result of a superseded identity", func(t *testing.T) {
		st := step(t, spec, nil, obs, result("job/j", "uid-old", 0, "A")).Status
		if st.Shards.Accepted != 0 || st.Results.Rejections[0].Reason != v1alpha1.RejectionStaleIdentity {
			t.Fatalf("results %+v", st.Results)
		}
	})
	t.Run("decode or criterion failure passed through", func(t *testing.T) {
		r := good(0, "A")
		r.RejectReason, r.RejectMessage = v1alpha1.RejectionCriterionNotMet, "result.valid == result.records is false"
		st := step(t, spec, nil, obs, r).Status
		wantCond(t, st, v1alpha1.ConditionResultsAccepted, "False", v1alpha1.ReasonResultRejected,
			"0/4 shard results accepted; rejected: A (CriterionNotMet): pod j-0 (job j index 0): result.valid == result.records is false")
	})
	t.Run("pod of an unassigned index", func(t *testing.T) {
		st := step(t, spec, nil, obs, result("job/other", "u", 0, "A")).Status
		if st.Results.Rejections[0].Reason != v1alpha1.RejectionUnassignedIdentity {
			t.Fatalf("results %+v", st.Results)
		}
	})
}

// TestWorkloadAdmission maps Kueue observations onto the Admitted condition.
func TestWorkloadAdmission(t *testing.T) {
	spec := makeSpec("A").AssignJob("j", "0", "A").SpecObj()
	j := makeJob("j", "u", 1)
	cases := []struct {
		name   string
		w      *v1alpha1.WorkloadObservation
		status metav1.ConditionStatus
		reason string
	}{
		{"admitted", &v1alpha1.WorkloadObservation{Name: "w", Admitted: true, ClusterQueue: "ml-team", Flavors: []string{"main=nvidia.com/gpu:h100"}}, "True", v1alpha1.ReasonAdmitted},
		{"pending", &v1alpha1.WorkloadObservation{Name: "w"}, "False", v1alpha1.ReasonPending},
		{"evicted", &v1alpha1.WorkloadObservation{Name: "w", Evicted: true}, "False", v1alpha1.ReasonEvicted},
		{"finished", &v1alpha1.WorkloadObservation{Name: "w", Finished: true}, "True", v1alpha1.ReasonFinished},
		{"not queued", nil, "Unknown", v1alpha1.ReasonNoWorkload},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := step(t, spec, nil, map[string]Observation{"job/j": {Job: j.Facts(), Workload: tc.w}}).Status
			wantCond(t, st, v1alpha1.ConditionAdmitted, tc.status, tc.reason, "")
		})
	}
}

// TestWorkloadSettlesOnceTheJobIsTerminal: after the Job's terminal condition is on
// record, what Kueue does to its Workload (Finished, deletion by a retention policy) is no
// status change; a new Workload UID, or the first terminal observation, still is.
func TestWorkloadSettlesOnceTheJobIsTerminal(t *testing.T) {
	spec := makeSpec("A").AssignJob("j", "0", "A").SpecObj()
	admitted := &v1alpha1.WorkloadObservation{Name: "w", UID: "wu", Admitted: true, ClusterQueue: "ml-team", ObservedResourceVersion: "10"}
	running := makeJob("j", "u", 1).ResourceVersion("1").Obj()
	done := makeJob("j", "u", 1).ResourceVersion("2").Completed("0", 1).Complete(time0).Obj()
	finished := &v1alpha1.WorkloadObservation{Name: "w", UID: "wu", Admitted: true, Finished: true, ClusterQueue: "ml-team", ObservedResourceVersion: "11"}
	replaced := &v1alpha1.WorkloadObservation{Name: "w", UID: "wu2", ObservedResourceVersion: "12"}

	runningSt := step(t, spec, nil, map[string]Observation{"job/j": {Job: jobkind.Facts(running), Workload: admitted}}).Status
	terminalSt := step(t, spec, &runningSt, map[string]Observation{"job/j": {Job: jobkind.Facts(done), Workload: admitted}}).Status
	wantCond(t, terminalSt, v1alpha1.ConditionAdmitted, "True", v1alpha1.ReasonFinished, "")

	cases := []struct {
		name         string
		prev         *v1alpha1.BatchAccountStatus
		w            *v1alpha1.WorkloadObservation
		want         *v1alpha1.WorkloadObservation
		admittedWhy  string
		admittedWhat metav1.ConditionStatus
	}{
		{"Workload finished after the terminal write", &terminalSt, finished, admitted, v1alpha1.ReasonFinished, "True"},
		{"finished Workload deleted", &terminalSt, nil, admitted, v1alpha1.ReasonFinished, "True"},
		{"terminal seen for the first time", &runningSt, finished, finished, v1alpha1.ReasonFinished, "True"},
		{"a Workload of another UID", &terminalSt, replaced, replaced, v1alpha1.ReasonFinished, "True"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := step(t, spec, tc.prev, map[string]Observation{"job/j": {Job: jobkind.Facts(done), Workload: tc.w}}).Status
			if got := st.Targets[0].Workload; !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("workload %+v, want %+v", got, tc.want)
			}
			wantCond(t, st, v1alpha1.ConditionAdmitted, tc.admittedWhat, tc.admittedWhy, "")
			if tc.prev == &terminalSt && tc.want == admitted && !equality.Semantic.DeepEqual(st, terminalSt) {
				t.Errorf("a settled Workload changed the status:\n%+v\nwas\n%+v", st, terminalSt)
			}
		})
	}
}

// TestAheadOfJobs: attempts read from succeeded pods that the Job controller has not
// counted yet are no reason to write (its count is a Job status write, which brings
// them); anything else is.
func TestAheadOfJobs(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecObj()
	admitted := &v1alpha1.WorkloadObservation{Name: "w", UID: "wu", Admitted: true, ClusterQueue: "ml-team"}
	running := makeJob("j", "u", 2).ResourceVersion("1").Completed("0", 1).Obj()
	prev := step(t, spec, nil, map[string]Observation{"job/j": {Job: jobkind.Facts(running), Workload: admitted, SuccessfulPods: pods("p", 0)}}).Status
	attempts := func(uncounted bool) []PodAttempt {
		return append(pods("p", 0), PodAttempt{UID: "p-1", Index: 1, Uncounted: uncounted})
	}
	cases := []struct {
		name string
		obs  Observation
		want bool
	}{
		{"a success the Job controller has not counted", Observation{Job: jobkind.Facts(running), Workload: admitted, SuccessfulPods: attempts(true)}, true},
		{"the same success, counted", Observation{Job: makeJob("j", "u", 2).ResourceVersion("3").Completed("0-1", 2).Facts(), Workload: admitted, SuccessfulPods: attempts(false)}, false},
		{"a success no Job controller write will follow", Observation{Job: jobkind.Facts(running), Workload: admitted, SuccessfulPods: attempts(false)}, false},
		{"an uncounted success and an eviction", Observation{Job: jobkind.Facts(running),
			Workload:       &v1alpha1.WorkloadObservation{Name: "w", UID: "wu", Evicted: true, EvictionReason: "Preempted"},
			SuccessfulPods: attempts(true)}, false},
		{"nothing new", Observation{Job: jobkind.Facts(running), Workload: admitted, SuccessfulPods: []PodAttempt{{UID: "p-0", Index: 0, Uncounted: true}}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := step(t, spec, &prev, map[string]Observation{"job/j": tc.obs})
			if out.AheadOfJobs != tc.want {
				t.Errorf("AheadOfJobs = %v, want %v; status changed: %v", out.AheadOfJobs, tc.want, !equality.Semantic.DeepEqual(out.Status, prev))
			}
		})
	}
}

// TestConditionTransitions: an unchanged verdict keeps its transition time and is not
// reported again for an event.
func TestConditionTransitions(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecObj()
	j := makeJob("j", "u", 2).Completed("0", 1)
	obs := map[string]Observation{"job/j": {Job: j.Facts()}}
	first := step(t, spec, nil, obs)
	if len(first.Changed) != 6 {
		t.Errorf("first computation reports %d changes, want all 6 conditions", len(first.Changed))
	}
	later := Compute(Input{Namespace: "ml-team", Generation: 1, Spec: spec, Previous: &first.Status, Observations: obs, Now: metav1.NewTime(time0.Add(3600e9))})
	if len(later.Changed) != 0 {
		t.Errorf("unchanged verdicts reported as changes: %+v", later.Changed)
	}
	c := meta.FindStatusCondition(later.Status.Conditions, v1alpha1.ConditionShardsCovered)
	if !c.LastTransitionTime.Time.Equal(time0) {
		t.Errorf("transition time moved to %v", c.LastTransitionTime)
	}
}

// TestLargeAccountMessagesStayBounded: 100,000 shards over 100 Jobs with scattered gaps.
func TestLargeAccountMessagesStayBounded(t *testing.T) {
	in := largeInput(100, 1000)
	out := Compute(in)
	st := out.Status
	if st.Shards.Total != 100000 {
		t.Fatalf("total %d", st.Shards.Total)
	}
	if st.Shards.Covered != 85700 { // the input is deterministic: see TestLargeAccountExactCoverage
		t.Errorf("covered %d, want 85700", st.Shards.Covered)
	}
	for _, c := range st.Conditions {
		if len(c.Message) > 2048 {
			t.Errorf("%s message is %d bytes; messages must stay bounded", c.Type, len(c.Message))
		}
	}
	if !strings.Contains(st.Shards.Missing, "more") {
		t.Errorf("missing summary not bounded: %q", st.Shards.Missing[:min(80, len(st.Shards.Missing))])
	}
}

// TestObservationPointsMoveOnlyWithFacts: a new resourceVersion of the Job or Workload
// that changes nothing the account reports (our own Workload conditions, a label) keeps
// the recorded observation point, so the status is not rewritten; a real change moves it.
func TestObservationPointsMoveOnlyWithFacts(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecObj()
	wl := func(rv string, admitted bool) *v1alpha1.WorkloadObservation {
		return &v1alpha1.WorkloadObservation{Name: "w", Admitted: admitted, ObservedResourceVersion: rv}
	}
	first := step(t, spec, nil, map[string]Observation{"job/j": {Job: makeJob("j", "u", 2).Completed("0", 1).ResourceVersion("10").Facts(), Workload: wl("100", true)}}).Status
	same := step(t, spec, &first, map[string]Observation{"job/j": {Job: makeJob("j", "u", 2).Completed("0", 1).ResourceVersion("11").Facts(), Workload: wl("101", true)}}).Status
	if !equality.Semantic.DeepEqual(first, same) {
		t.Errorf("status changed without a new fact:\n%+v\n%+v", first.Targets[0], same.Targets[0])
	}
	moved := step(t, spec, &same, map[string]Observation{"job/j": {Job: makeJob("j", "u", 2).Completed("0,1", 2).ResourceVersion("12").Facts(), Workload: wl("102", false)}}).Status
	if tg := moved.Targets[0]; tg.ObservedResourceVersion != "12" || tg.Workload.ObservedResourceVersion != "102" {
		t.Errorf("observation points did not move with the facts: job %q workload %q", tg.ObservedResourceVersion, tg.Workload.ObservedResourceVersion)
	}
}

// TestStandingResults: readers of recorded results get the same verdict Compute applies,
// the index check included: a result stands only for an index its identity completed,
// as the status recorded it; a target the status has no list for is not checked.
func TestStandingResults(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults("").SpecObj()
	m := Compile("ml-team", spec)
	first, second := result("job/j", "uid-j", 0, "A"), result("job/j", "uid-j", 0, "A")
	second.Digest, second.Pod = "sha256:other", "j-0-b"
	forged := result("job/j", "uid-j", 1, "A")
	stale := result("job/j", "uid-old", 1, "B")
	ofB := result("job/j", "uid-j", 1, "B")
	for _, tc := range []struct {
		name      string
		results   []Result
		completed map[string]indexset.Set
		want      []string // pods standing, by shard ordinal
	}{
		{"the first result of a shard stands, of its current identity, claiming its shard", []Result{first, second, forged, stale}, nil, []string{first.Pod}},
		{"both indexes completed", []Result{first, ofB}, map[string]indexset.Set{"job/j": indexset.Range(0, 1)}, []string{first.Pod, ofB.Pod}},
		{"index 1 not completed: its result stands for no shard", []Result{first, ofB}, map[string]indexset.Set{"job/j": indexset.Of(0)}, []string{first.Pod}},
		{"no list for the target: not checked", []Result{first, ofB}, map[string]indexset.Set{}, []string{first.Pod, ofB.Pod}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := StandingResults(m, spec, map[string]types.UID{"job/j": "uid-j"}, nil, tc.completed, tc.results)
			var pods []string
			for o := range len(spec.Shards.Names) {
				if r, ok := got[o]; ok {
					pods = append(pods, r.Pod)
				}
			}
			if !slices.Equal(pods, tc.want) {
				t.Errorf("standing pods = %v; want %v", pods, tc.want)
			}
		})
	}
}

// TestFailedIndexWhileItsJobRuns: an index that failed (backoffLimitPerIndex) while its
// Job still runs will not run again in that Job. Its shard is missing as any other, but
// the message says so and what to do: repair it, or wait for the repair that may still
// cover it.
func TestFailedIndexWhileItsJobRuns(t *testing.T) {
	four := []string{"A", "B", "C", "D"}
	plain := makeSpec(four...).AssignJob("j", "0-3", four...).SpecObj()
	repaired := makeSpec(four...).AssignJob("j", "0-3", four...).Repair("j-repair", "0", "D").SpecObj()
	running := makeJob("j", "uid-j", 4).BackoffLimitPerIndex(1).Completed("0,1", 2)
	cases := []struct {
		name        string
		spec        *v1alpha1.BatchAccountSpec
		obs         map[string]Observation
		wantMessage string
	}{
		{name: "index 3 failed, index 2 still runs",
			spec:        plain,
			obs:         map[string]Observation{"job/j": {Job: running.FailedIndexes("3").Facts()}},
			wantMessage: "2/4 shards covered; missing C, D = job j indexes 2,3; job j failed index 3 (shard D) and will not run it again: repair it"},
		{name: "indexes 2 and 3 failed",
			spec:        plain,
			obs:         map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 4).BackoffLimitPerIndex(1).Completed("0,1", 2).FailedIndexes("2,3").Facts()}},
			wantMessage: "2/4 shards covered; missing C, D = job j indexes 2,3; job j failed indexes 2,3 (shards C, D) and will not run them again: repair them"},
		{name: "a repair may still cover the failed index's shard",
			spec: repaired,
			obs: map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 4).BackoffLimitPerIndex(1).Completed("0,1", 2).FailedIndexes("3").Facts()},
				"job/j-repair": {Job: makeJob("j-repair", "uid-r", 1).Facts()}},
			wantMessage: "2/4 shards covered; missing C, D = job j indexes 2,3, D = job j-repair index 0 (repair); job j failed index 3 (shard D) and will not run it again; other identities may still cover it"},
		{name: "a JobSet's child: its JobSet may restart it",
			spec: makeCompactSpec("s", 2).AssignJobSet("train", "w", 0, "0-1", "0-1").SpecObj(),
			obs: map[string]Observation{"jobset/train/w/0": {Job: makeJob("train-w-0", "uid-c", 2).BackoffLimitPerIndex(1).Completed("0", 1).FailedIndexes("1").Facts(),
				ChildOwner: OwnerRunning}},
			wantMessage: "1/2 shards covered; missing s1 = jobset train w[0] index 1; jobset train w[0] failed index 1 (shard s1) and will not run it again; its JobSet may restart the Job once it ends"},
		{name: "a failed index whose shard a repair covered is not named",
			spec: repaired,
			obs: map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 4).BackoffLimitPerIndex(1).Completed("0,1", 2).FailedIndexes("2,3").Facts()},
				"job/j-repair": {Job: completeJob("j-repair", "uid-r", 1).Facts()}},
			wantMessage: "3/4 shards covered; missing C = job j index 2; job j failed index 2 (shard C) and will not run it again: repair it"},
		{name: "nothing failed: a plain wait",
			spec:        plain,
			obs:         map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 4).Completed("0,1", 2).Facts()}},
			wantMessage: "2/4 shards covered; missing C, D = job j indexes 2,3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := step(t, tc.spec, nil, tc.obs).Status
			wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, tc.wantMessage)
			wantCond(t, st, v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination, "")
		})
	}
}

// TestResultWithoutJobUIDStandsForNoShard: a completion identity is (Job UID, index). A
// result that names no Job UID is no one's: while its target has no identity observed
// (its Job not found yet) it must not pass for that target's, else the shard counts as
// accepted (and the batch's results as all accepted) for a Job never seen.
func TestResultWithoutJobUIDStandsForNoShard(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults("").SpecObj()
	cases := []struct {
		name string
		obs  map[string]Observation
	}{
		{name: "its Job not found yet", obs: map[string]Observation{}},
		{name: "its Job observed", obs: map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 2).Completed("0-1", 2).Facts()}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := step(t, spec, nil, tc.obs, result("job/j", "", 0, "A"), result("job/j", "", 1, "B")).Status
			if st.Shards.Accepted != 0 || st.Shards.Progress != 0 {
				t.Errorf("accepted %d shards (progress %d) on results of no Job UID; want none", st.Shards.Accepted, st.Shards.Progress)
			}
			wantCond(t, st, v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultsPending, "")
			if st.Results.Rejected != 2 || len(st.Results.Rejections) != 2 || st.Results.Rejections[0].Reason != v1alpha1.RejectionStaleIdentity {
				t.Errorf("rejections %d %+v; want 2 StaleIdentity", st.Results.Rejected, st.Results.Rejections)
			}
		})
	}
}
