package account

import (
	"maps"
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
// stays Accepted. With no room for either list, the required one is left out all the
// same, and its record keeps the unassigned index a problem.
func TestDeletionKeepsAPolicysUnassignedIndex(t *testing.T) {
	j := makeJob("j", "uid-j", 8).SuccessPolicy(wrappers.SucceededIndexes("0-3")).Completed("0-3", 4).
		Condition("SuccessCriteriaMet", "SuccessPolicy", jobCondAt).Complete(jobCondAt)
	unassigned := func() *wrappers.BatchAccountWrapper {
		return makeSpec("A", "B", "C").AssignJob("j", "0-2", "A", "B", "C")
	}
	assigned := func() *wrappers.BatchAccountWrapper {
		return makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D")
	}
	// A repair Job covers the shards once j's completed indexes are lost with it: only
	// the mapping's validity then stands between the account and Accepted.
	repaired := func(a *wrappers.BatchAccountWrapper, indexes string, shards ...string) *v1alpha1.BatchAccountSpec {
		return a.Repair("r", indexes, shards...).SpecObj()
	}
	repair := func(completions int32) map[string]Observation {
		return map[string]Observation{"job/r": {Job: completeJob("r", "uid-r", completions).Facts()}}
	}
	cases := []struct {
		name string
		// room is the index list bytes the status has: 3 for one of the Job's two lists
		// (completed "0-3", required "0-3"), 2 for neither.
		room int
		spec *v1alpha1.BatchAccountSpec
		// others are the Jobs that stay: the repair, when the spec has one.
		others       map[string]Observation
		valid        metav1.ConditionStatus
		validReason  string
		accepted     metav1.ConditionStatus
		acceptReason string
	}{
		{"a required index unassigned", 3, unassigned().SpecObj(), nil,
			metav1.ConditionFalse, v1alpha1.ReasonUnmappedIndexes, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid},
		{"every required index assigned", 3, assigned().SpecObj(), nil,
			metav1.ConditionTrue, v1alpha1.ReasonValid, metav1.ConditionTrue, v1alpha1.ReasonAccepted},
		{"no room, a required index unassigned", 2, repaired(unassigned(), "0-2", "A", "B", "C"), repair(3),
			metav1.ConditionFalse, v1alpha1.ReasonUnmappedIndexes, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid},
		{"no room, every required index assigned", 2, repaired(assigned(), "0-3", "A", "B", "C", "D"), repair(4),
			metav1.ConditionTrue, v1alpha1.ReasonValid, metav1.ConditionTrue, v1alpha1.ReasonAccepted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			roomForIndexLists(t, tc.room)
			obs := map[string]Observation{"job/j": {Job: j.Facts()}}
			maps.Copy(obs, tc.others)
			st := at(tc.spec, nil, 0, obs).Status
			if (tc.valid == metav1.ConditionTrue || tc.room < 3) && !slices.Contains(st.Targets[0].IndexesOmitted, "required") {
				t.Fatalf("required indexes kept (%q): the case needs them left out", st.Targets[0].Required)
			}
			wantFixedPoint(t, tc.spec, st, 0, obs)
			for i, step := range []map[string]Observation{obs, tc.others} {
				st = at(tc.spec, &st, time.Duration(i+1)*time.Minute, step).Status
				wantCond(t, st, v1alpha1.ConditionAssignmentValid, tc.valid, tc.validReason, "")
				wantCond(t, st, v1alpha1.ConditionAccepted, tc.accepted, tc.acceptReason, "")
			}
			wantFixedPoint(t, tc.spec, st, 3*time.Minute, tc.others)
		})
	}
}

// TestRequiredUnmappedAfterASpecChange: the record of a Job whose successPolicy's
// required indexes were left out while the mapping left one unassigned cannot tell
// which indexes the policy requires. A spec change clears the problem only when the
// mapping then assigns every index the Job has; one that assigns more, but not all,
// leaves it.
func TestRequiredUnmappedAfterASpecChange(t *testing.T) {
	roomForIndexLists(t, 2)
	j := makeJob("j", "uid-j", 8).SuccessPolicy(wrappers.SucceededIndexes("0-3")).Completed("0-3", 4).
		Condition("SuccessCriteriaMet", "SuccessPolicy", jobCondAt).Complete(jobCondAt)
	spec := makeSpec("A", "B", "C").AssignJob("j", "0-2", "A", "B", "C").SpecObj()
	obs := map[string]Observation{"job/j": {Job: j.Facts()}}
	st := at(spec, nil, 0, obs).Status
	st = at(spec, &st, time.Minute, map[string]Observation{}).Status
	if !st.Targets[0].RequiredUnmapped || !slices.Contains(st.Targets[0].IndexesOmitted, "required") {
		t.Fatalf("record's required = %q (omitted %v, unmapped %t): the case needs them left out, unmapped",
			st.Targets[0].Required, st.Targets[0].IndexesOmitted, st.Targets[0].RequiredUnmapped)
	}
	eight := []string{"A", "B", "C", "D", "E", "F", "G", "H"}
	cases := []struct {
		name   string
		spec   *v1alpha1.BatchAccountSpec
		valid  metav1.ConditionStatus
		reason string
	}{
		{"every required index assigned, not every index", makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").SpecObj(),
			metav1.ConditionFalse, v1alpha1.ReasonUnmappedIndexes},
		{"every index assigned", makeSpec(eight...).AssignJob("j", "0-7", eight...).SpecObj(),
			metav1.ConditionTrue, v1alpha1.ReasonValid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := at(tc.spec, &st, 2*time.Minute, map[string]Observation{}).Status
			wantCond(t, got, v1alpha1.ConditionAssignmentValid, tc.valid, tc.reason, "")
			wantFixedPoint(t, tc.spec, got, 3*time.Minute, map[string]Observation{})
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
			fitIndexLists(&st, tc.budget, requiredKept{})
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

// TestEndedRecordKeepsAPolicysUnassignedIndex: a JobSet child deleted while its JobSet
// runs is superseded into history, and is the target's record again if the JobSet ends
// instead of recreating it. A successPolicy's required indexes left out for size, while
// the child ran or once it was superseded, are kept nowhere else: the unassigned index
// must keep the account invalid through history, not turn it valid, and Accepted, once
// the JobSet ends. One whose mapping assigns them all still reaches Accepted.
func TestEndedRecordKeepsAPolicysUnassignedIndex(t *testing.T) {
	key := "jobset/ts/w/0"
	child := makeJob("ts-w-0", "uid-x", 8).SuccessPolicy(wrappers.SucceededIndexes("0-3")).Completed("0-3", 4)
	// A repair Job covers the shards once the child's completed indexes are lost with
	// them: only the mapping's validity then stands between the account and Accepted.
	unassigned := makeCompactSpec("s", 3).AssignJobSet("ts", "w", 0, "0-2", "0-2").Repair("r", "0-2", "s0", "s1", "s2").SpecObj()
	assigned := makeCompactSpec("s", 4).AssignJobSet("ts", "w", 0, "0-3", "0-3").Repair("r", "0-3", "s0", "s1", "s2", "s3").SpecObj()
	cases := []struct {
		name string
		// running and superseded are the index list bytes the status has while the child
		// runs and from when it is superseded: 3 for the child's required "0-3" (its
		// completed indexes go first), 2 for none of its lists.
		running, superseded int
		spec                *v1alpha1.BatchAccountSpec
		repair              int32
		valid               metav1.ConditionStatus
		validReason         string
		accepted            metav1.ConditionStatus
		acceptReason        string
	}{
		{"left out while it ran, a required index unassigned", 2, 2, unassigned, 3,
			metav1.ConditionFalse, v1alpha1.ReasonUnmappedIndexes, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid},
		{"left out from history, a required index unassigned", 3, 2, unassigned, 3,
			metav1.ConditionFalse, v1alpha1.ReasonUnmappedIndexes, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid},
		{"left out while it ran, every required index assigned", 2, 2, assigned, 4,
			metav1.ConditionTrue, v1alpha1.ReasonValid, metav1.ConditionTrue, v1alpha1.ReasonAccepted},
		{"left out from history, every required index assigned", 3, 2, assigned, 4,
			metav1.ConditionTrue, v1alpha1.ReasonValid, metav1.ConditionTrue, v1alpha1.ReasonAccepted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			step := func(childObs Observation) map[string]Observation {
				return map[string]Observation{key: childObs, "job/r": {Job: completeJob("r", "uid-r", tc.repair).Facts()}}
			}
			roomForIndexLists(t, tc.running)
			running := step(Observation{Job: child.Facts(), ChildOwner: OwnerRunning})
			st := at(tc.spec, nil, 0, running).Status
			// Left out early when the mapping assigns them all, else only with no room.
			wantOmitted := tc.running < 3 || tc.valid == metav1.ConditionTrue
			if omitted := slices.Contains(st.Targets[0].IndexesOmitted, "required"); omitted != wantOmitted {
				t.Fatalf("child's required = %q (omitted %t): the case needs them omitted %t", st.Targets[0].Required, omitted, wantOmitted)
			}
			roomForIndexLists(t, tc.superseded)
			// The child is gone, its JobSet not ended yet: a restart in progress.
			restarting := step(Observation{ChildOwner: OwnerRunning})
			st = at(tc.spec, &st, time.Minute, restarting).Status
			if len(st.History) != 1 || !st.History[0].RequiredOmitted {
				t.Fatalf("history = %+v; want the child superseded, its required indexes left out", st.History)
			}
			wantFixedPoint(t, tc.spec, st, 2*time.Minute, restarting)
			ended := step(Observation{OwnerEnded: "Failed", ChildOwner: "Failed"})
			st = at(tc.spec, &st, 3*time.Minute, ended).Status
			if len(st.History) != 0 || st.Targets[0].UID != "uid-x" {
				t.Fatalf("target = %+v, history = %+v; want the child's record back", st.Targets[0], st.History)
			}
			wantCond(t, st, v1alpha1.ConditionAssignmentValid, tc.valid, tc.validReason, "")
			wantCond(t, st, v1alpha1.ConditionAccepted, tc.accepted, tc.acceptReason, "")
			wantFixedPoint(t, tc.spec, st, 4*time.Minute, ended)
		})
	}
}
