package account

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestElasticJobJudgedAsItIsNow: an Indexed Job's completions may change while it runs
// (elastic Indexed Jobs: completions changed with parallelism). The account reads the Job
// at its current size, as the Job controller does, which drops completed indexes past the
// new end from status.completedIndexes: a completion the Job no longer counts covers no
// shard, and the mapping says what no longer fits, until the Job is scaled back.
func TestElasticJobJudgedAsItIsNow(t *testing.T) {
	spec := makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").SpecObj()
	// Before the change: indexes 0-2 of 4 completed.
	before := makeJob("j", "uid-j", 4).Completed("0-2", 3).ResourceVersion("10")
	prev := step(t, spec, nil, map[string]Observation{"job/j": {Job: before.Facts(), SuccessfulPods: pods("p", 0, 1, 2)}}).Status
	for _, tc := range []struct {
		name  string
		job   *wrappers.JobWrapper
		pods  []PodAttempt
		valid metav1.ConditionStatus
		// reason of AssignmentValid; covered and missing of the shard summary.
		reason, missing string
		covered         int32
	}{
		{
			name: "scaled down below an index that completed",
			job:  makeJob("j", "uid-j", 2).Completed("0,1", 3).ResourceVersion("11"),
			pods: pods("p", 0, 1, 2), valid: metav1.ConditionFalse, reason: v1alpha1.ReasonIndexOutOfRange,
			covered: 2, missing: "C, D",
		},
		{
			name: "scaled up past the mapping",
			job:  makeJob("j", "uid-j", 6).Completed("0-3", 4).ResourceVersion("11"),
			pods: pods("p", 0, 1, 2, 3), valid: metav1.ConditionFalse, reason: v1alpha1.ReasonUnmappedIndexes,
			covered: 4,
		},
		{
			name: "scaled back to the mapped size",
			job:  makeJob("j", "uid-j", 4).Completed("0,1,3", 4).ResourceVersion("12"),
			pods: pods("p", 0, 1, 2, 3), valid: metav1.ConditionTrue, reason: v1alpha1.ReasonValid,
			covered: 3, missing: "C",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := step(t, spec, prev.DeepCopy(), map[string]Observation{"job/j": {Job: tc.job.Facts(), SuccessfulPods: tc.pods}}).Status
			wantCond(t, st, v1alpha1.ConditionAssignmentValid, tc.valid, tc.reason, "")
			if tc.valid == metav1.ConditionFalse {
				wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid, "")
			}
			if st.Shards.Covered != tc.covered || st.Shards.Missing != tc.missing {
				t.Errorf("shards covered %d missing %q; want %d, %q", st.Shards.Covered, st.Shards.Missing, tc.covered, tc.missing)
			}
		})
	}
}
