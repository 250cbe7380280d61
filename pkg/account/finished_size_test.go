package account

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestFinishedJobKeepsItsSize: the API server lets an Indexed Job's completions change
// with its parallelism even after the Job terminated, but the Job controller acts on no
// finished Job: its completed and failed indexes stay what they were when it ended. The
// account keeps judging the identity at the size it terminated at, so such an edit
// neither drops real completions (and their accepted results) as indexes past a new end,
// nor invents unmapped work, nor takes back an Accepted verdict. A Job that completed
// without a successPolicy says its size itself (it completed exactly the indexes below
// it), also to an account that first observes it after the edit.
func TestFinishedJobKeepsItsSize(t *testing.T) {
	spec := makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").RequireResults("").SpecObj()
	var results []Result
	for i, s := range []string{"A", "B", "C", "D"} {
		results = append(results, result("job/j", "uid-j", i, s))
	}
	complete := func(completions int32) *wrappers.JobWrapper {
		return makeJob("j", "uid-j", 4).Completed("0-3", 4).Complete(jobCondAt).Completions(completions).Parallelism(completions)
	}
	failed := func(completions int32) *wrappers.JobWrapper {
		return makeJob("j", "uid-j", 4).BackoffLimitPerIndex(0).Completed("0-2", 3).FailedIndexes("3").
			Failed("FailedIndexes", jobCondAt).Completions(completions).Parallelism(completions)
	}
	cases := []struct {
		name string
		// ended is the Job as it terminated (nil: the account never observed it so),
		// edited its Job as observed later.
		ended, edited *wrappers.JobWrapper
		// covered, completed and failed are the shards covered and the target's indexes
		// afterwards; accepted the Accepted condition's status and reason.
		covered           int32
		completed, failed string
		accepted          metav1.ConditionStatus
		reason            string
	}{
		{
			name: "scaled down after Complete", ended: complete(4), edited: complete(2),
			covered: 4, completed: "0-3", accepted: metav1.ConditionTrue, reason: v1alpha1.ReasonAccepted,
		},
		{
			name: "scaled up after Complete", ended: complete(4), edited: complete(8),
			covered: 4, completed: "0-3", accepted: metav1.ConditionTrue, reason: v1alpha1.ReasonAccepted,
		},
		{
			name: "scaled down after Complete, first observed since", edited: complete(2),
			covered: 4, completed: "0-3", accepted: metav1.ConditionTrue, reason: v1alpha1.ReasonAccepted,
		},
		{
			name: "scaled up after Complete, first observed since", edited: complete(8),
			covered: 4, completed: "0-3", accepted: metav1.ConditionTrue, reason: v1alpha1.ReasonAccepted,
		},
		{
			name: "scaled down after it Failed", ended: failed(4), edited: failed(2),
			covered: 3, completed: "0-2", failed: "3", accepted: metav1.ConditionFalse, reason: v1alpha1.ReasonShardsMissing,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := func(j *wrappers.JobWrapper) map[string]Observation {
				return map[string]Observation{"job/j": {Job: j.Facts(), PodsListed: true, SuccessfulPods: pods("p", 0, 1, 2, 3)}}
			}
			var prev *v1alpha1.BatchAccountStatus
			if tc.ended != nil {
				ended := step(t, spec, nil, obs(tc.ended), results...).Status
				prev = &ended
			}
			st := step(t, spec, prev, obs(tc.edited), results...).Status
			wantCond(t, st, v1alpha1.ConditionAssignmentValid, metav1.ConditionTrue, v1alpha1.ReasonValid, "")
			wantCond(t, st, v1alpha1.ConditionAccepted, tc.accepted, tc.reason, "")
			tgt := st.Targets[0]
			if st.Shards.Covered != tc.covered || tgt.Completions != 4 || tgt.CompletedIndexes != tc.completed || tgt.FailedIndexes != tc.failed || len(tgt.Problems) != 0 {
				t.Errorf("covered %d; target completions %d completed %q failed %q problems %q; want %d, 4, %q, %q, none",
					st.Shards.Covered, tgt.Completions, tgt.CompletedIndexes, tgt.FailedIndexes, tgt.Problems, tc.covered, tc.completed, tc.failed)
			}
		})
	}
}
