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
	// Room for one of the Job's two index lists (completed "0-3", required "0-3").
	roomForIndexLists(t, 3)
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

// TestHistoryRequiredWithinBudget: a superseded identity's required indexes count in the
// index budget. Those of an identity no target needs go with its completed indexes,
// first; those of the one a restart in progress still needs (its record again if its
// JobSet ends) go last, after every target's lists.
func TestHistoryRequiredWithinBudget(t *testing.T) {
	policy := "0,2,4,6,8,10,12,14" // a successPolicy's population: 18 bytes
	status := func() v1alpha1.BatchAccountStatus {
		return v1alpha1.BatchAccountStatus{
			Targets: []v1alpha1.TargetStatus{
				{Name: "jobset/ts/w/0"}, // no identity: a restart in progress
				{Name: "job/j", UID: "uid-j", Completions: 16, CompletedIndexes: "0-9", Required: "0-15", Terminal: TerminalComplete},
			},
			History: []v1alpha1.SupersededIdentity{
				{Target: "jobset/ts/w/0", UID: "uid-old", Completions: 16, CompletedIndexes: "1,3", Required: policy},
				{Target: "jobset/ts/w/0", UID: "uid-new", Completions: 16, CompletedIndexes: "5,7", Required: policy},
			},
		}
	}
	cases := []struct {
		name   string
		budget int
		// want: the required indexes history keeps, oldest first.
		want []string
	}{
		{"all fit", 100, []string{policy, policy}},
		{"the unneeded identity's go first", 45, []string{"", policy}},
		{"the needed identity's go last", 10, []string{"", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := status()
			fitIndexLists(&st, tc.budget, nil)
			for i, h := range st.History {
				if h.Required != tc.want[i] || h.RequiredOmitted != (tc.want[i] == "") {
					t.Errorf("history[%d] required = %q (omitted %t); want %q", i, h.Required, h.RequiredOmitted, tc.want[i])
				}
			}
			if n := indexListBytes(&st); n > tc.budget && tc.want[1] == "" {
				t.Errorf("index lists take %d bytes, over the budget of %d", n, tc.budget)
			}
			if tc.want[1] == "" && st.Targets[1].CompletedIndexes != "" {
				t.Errorf("the needed identity's required indexes were left out before a record's completed ones")
			}
		})
	}
}
