package account

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestDeletionKeepsAPolicysUnassignedIndex: a Job's successPolicy chooses its required
// indexes, which its record reads back from the status alone once the Job is deleted. A
// status too large for its index lists leaves them out only when the mapping assigns
// them all: the deletion of a Job whose policy requires an index no shard is assigned
// must not turn the account valid, and Accepted; one whose mapping assigns them all
// stays Accepted.
func TestDeletionKeepsAPolicysUnassignedIndex(t *testing.T) {
	saved := statusLimits
	// Room for one of the Job's two index lists (completed "0-3", required "0-3").
	statusLimits = func(n int) limits { l := limitsFor(n); l.indexLists = 3; return l }
	t.Cleanup(func() { statusLimits = saved })
	j := makeJob("j", "uid-j", 8).SuccessPolicy(wrappers.SucceededIndexes("0-3")).Completed("0-3", 4).
		Condition("SuccessCriteriaMet", "SuccessPolicy", jobCondAt).Complete(jobCondAt)
	cases := []struct {
		name         string
		spec         *v1alpha1.BatchAccountSpec
		valid        metav1.ConditionStatus
		validReason  string
		accepted     metav1.ConditionStatus
		acceptReason string
	}{
		{"a required index unassigned", makeSpec("A", "B", "C").AssignJob("j", "0-2", "A", "B", "C").SpecObj(),
			metav1.ConditionFalse, v1alpha1.ReasonUnmappedIndexes, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid},
		{"every required index assigned", makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").SpecObj(),
			metav1.ConditionTrue, v1alpha1.ReasonValid, metav1.ConditionTrue, v1alpha1.ReasonAccepted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := map[string]Observation{"job/j": {Job: j.Facts()}}
			st := at(tc.spec, nil, 0, obs).Status
			if tc.valid == metav1.ConditionTrue && !slices.Contains(st.Targets[0].IndexesOmitted, "required") {
				t.Fatalf("required indexes kept (%q): the case needs them left out", st.Targets[0].Required)
			}
			wantFixedPoint(t, tc.spec, st, 0, obs)
			for i, step := range []map[string]Observation{obs, {}} {
				st = at(tc.spec, &st, time.Duration(i+1)*time.Minute, step).Status
				wantCond(t, st, v1alpha1.ConditionAssignmentValid, tc.valid, tc.validReason, "")
				wantCond(t, st, v1alpha1.ConditionAccepted, tc.accepted, tc.acceptReason, "")
			}
			wantFixedPoint(t, tc.spec, st, 3*time.Minute, map[string]Observation{})
		})
	}
}
