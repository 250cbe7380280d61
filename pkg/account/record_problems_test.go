package account

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestDeletingATerminatedJobKeepsItsMappingProblems: a terminated Job's final observation
// is the account's record, and deleting the Job changes nothing: a mapping that leaves
// required indexes unassigned, assigns indexes beyond the completions, or names a Job that
// is not Indexed stays invalid once the Job is deleted, also when the status had to omit
// the record's required indexes. The verdict does not move.
func TestDeletingATerminatedJobKeepsItsMappingProblems(t *testing.T) {
	cases := []struct {
		name string
		spec *v1alpha1.BatchAccountSpec
		job  *Observation
	}{
		{
			name: "UnmappedIndexes: 4 completions, only indexes 0-1 assigned",
			spec: makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecObj(),
			job:  &Observation{Job: completeJob("j", "uid-j", 4).Facts()},
		},
		{
			name: "IndexOutOfRange: 2 completions, indexes 0-3 assigned",
			spec: makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").SpecObj(),
			job:  &Observation{Job: completeJob("j", "uid-j", 2).Facts()},
		},
		{
			name: "NotIndexed: a NonIndexed Job that completed",
			spec: makeSpec("A").AssignJob("j", "0", "A").SpecObj(),
			job: &Observation{Job: makeJob("j", "uid-j", 1).CompletionMode("NonIndexed").
				Completed("", 1).Complete(jobCondAt).Facts()},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := at(tc.spec, nil, 0, map[string]Observation{"job/j": *tc.job})
			if got := conditionSummary(live.Status.Conditions, v1alpha1.ConditionAssignmentValid); len(got) < 5 || got[:5] != "False" {
				t.Fatalf("while the Job exists AssignmentValid = %s, want False", got)
			}
			omitted := live.Status.DeepCopy()
			for i := range omitted.Targets {
				omitted.Targets[i].Required, omitted.Targets[i].IndexesOmitted = "", []string{"required"}
			}
			for record, prev := range map[string]*v1alpha1.BatchAccountStatus{"": &live.Status, " (required omitted)": omitted} {
				gone := at(tc.spec, prev, 10*time.Second, map[string]Observation{})
				for _, typ := range []string{v1alpha1.ConditionAssignmentValid, v1alpha1.ConditionAccepted} {
					if before, after := conditionSummary(live.Status.Conditions, typ), conditionSummary(gone.Status.Conditions, typ); before != after {
						t.Errorf("%s was %s while the terminated Job existed, is %s once it was deleted%s", typ, before, after, record)
					}
				}
			}
		})
	}
}

// conditionSummary is the status and reason of the condition of type typ, "" without one.
func conditionSummary(conds []metav1.Condition, typ string) string {
	for _, c := range conds {
		if c.Type == typ {
			return string(c.Status) + " " + c.Reason
		}
	}
	return ""
}
