package account

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestResultOfAnIndexNotCompleted: a result stands for its shard only once its identity
// completed the index in the Job controller's count. A pod that succeeded uncounted
// (its Job deleted before the Job controller counted it) reported a result for a shard
// its identity never covered: ResultsAccepted may not call that shard accepted, and the
// repair that covers it is the identity whose result stands, not a Conflict.
func TestResultOfAnIndexNotCompleted(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").Repair("j-repair-1", "0", "B").RequireResults("").SpecObj()
	onlyJ := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults("").SpecObj()
	running := makeJob("j", "uid-j", 2).Completed("0", 1)
	uncounted := []PodAttempt{{UID: "p-0", Index: 0}, {UID: "p-1", Index: 1, Uncounted: true}}
	fromJ := []Result{result("job/j", "uid-j", 0, "A"), result("job/j", "uid-j", 1, "B")}
	repairB := result("job/j-repair-1", "uid-r", 0, "B")
	repairB.Digest = "sha256:B-again"

	cases := []struct {
		name         string
		spec         *v1alpha1.BatchAccountSpec
		results      []Result
		after        map[string]Observation
		wantAccepted int32
		wantResults  metav1.ConditionStatus
		wantReason   string
		wantMessage  string
		wantVerdict  string
	}{
		{
			name: "the Job is deleted before it counted index 1", spec: onlyJ, results: fromJ,
			after:        map[string]Observation{},
			wantAccepted: 1, wantResults: metav1.ConditionFalse, wantReason: v1alpha1.ReasonResultsPending,
			wantMessage: "1/2 shard results accepted; waiting for B; not counted, its identity did not complete the index: B (pod j-1 (job j index 1))",
			wantVerdict: v1alpha1.ReasonTargetDeleted,
		},
		{
			name: "the Job still runs and has not counted index 1 yet", spec: onlyJ, results: fromJ,
			after:        map[string]Observation{"job/j": {Job: running.Facts(), SuccessfulPods: uncounted, PodsListed: true}},
			wantAccepted: 1, wantResults: metav1.ConditionFalse, wantReason: v1alpha1.ReasonResultsPending,
			wantMessage: "1/2 shard results accepted; waiting for B; not counted, its identity did not complete the index: B (pod j-1 (job j index 1))",
			wantVerdict: v1alpha1.ReasonShardsMissing,
		},
		{
			name: "a repair covers B with its own result", spec: spec, results: append(fromJ, repairB),
			after: map[string]Observation{"job/j-repair-1": {
				Job: completeJob("j-repair-1", "uid-r", 1).Facts(), PodsListed: true}},
			wantAccepted: 2, wantResults: metav1.ConditionTrue, wantReason: v1alpha1.ReasonAllResultsAccepted,
			wantMessage: "2/2 shard results accepted",
			wantVerdict: v1alpha1.ReasonAccepted,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := at(tc.spec, nil, 0, map[string]Observation{"job/j": {Job: running.Facts(), SuccessfulPods: uncounted, PodsListed: true}}, tc.results...).Status
			st = at(tc.spec, &st, time.Minute, tc.after, tc.results...).Status
			if st.Shards.Accepted != tc.wantAccepted || st.Shards.Accepted > st.Shards.Covered {
				t.Errorf("shards covered %d accepted %d; want accepted %d, never more than covered", st.Shards.Covered, st.Shards.Accepted, tc.wantAccepted)
			}
			if st.Results.Conflicts != 0 {
				t.Errorf("conflicts = %d: %+v; the result of the identity that covered B is no conflict", st.Results.Conflicts, st.Results.Rejections)
			}
			wantCond(t, st, v1alpha1.ConditionResultsAccepted, tc.wantResults, tc.wantReason, tc.wantMessage)
			wantCond(t, st, v1alpha1.ConditionAccepted, condStatus(tc.wantVerdict == v1alpha1.ReasonAccepted), tc.wantVerdict, "")
		})
	}
}

// TestResultOfARecordWithoutItsIndexes: a Job's record whose completed indexes the status
// had to omit (its size bound) says nothing of which indexes the identity completed. Its
// results are not taken for uncompleted ones: they stand as recorded, while the coverage
// the record lost keeps the batch from Accepted.
func TestResultOfARecordWithoutItsIndexes(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults("").SpecObj()
	results := []Result{result("job/j", "uid-j", 0, "A"), result("job/j", "uid-j", 1, "B")}
	running := makeJob("j", "uid-j", 2).Completed("0,1", 2)
	st := at(spec, nil, 0, map[string]Observation{"job/j": {Job: running.Facts(), SuccessfulPods: pods("p", 0, 1), PodsListed: true}}, results...).Status
	st.Targets[0].CompletedIndexes, st.Targets[0].CompletedIndexesOmitted = "", true
	st = at(spec, &st, time.Minute, map[string]Observation{}, results...).Status
	if st.Shards.Accepted != 2 {
		t.Errorf("accepted %d of the deleted record's 2 results, want 2 (%+v)", st.Shards.Accepted, st.Results)
	}
	wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonTargetDeleted, "")
}
