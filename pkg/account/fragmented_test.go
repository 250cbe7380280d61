package account

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ordinalList writes count numbers first, first+step, ... in the interval format: every
// one its own interval, the most fragmented a list of that length can be.
func ordinalList(first, step, count int) string {
	var b strings.Builder
	for i := range count {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d", first+i*step)
	}
	return b.String()
}

// TestFragmentedMappingCost: a mapping of many short runs costs the account a pass over
// its runs, not runs × index intervals. A namespace user may write a valid partition whose
// indexes are spread ("0,2,4,…" onto shards 0-N, ~1.3 MB at N=200,000, under etcd's object
// limit) or that interleaves two Jobs; before, every reconcile of such an account mapped
// each set of indexes through every run of the mapping, and each result through every
// run: ~25 s of one reconcile worker for the spread mapping of a Job not even created, and
// ~16 s for a 100,000-shard batch of two interleaved Jobs, per Job status change. Each now
// takes well under a second: the bound is generous, and the verdict is checked as well.
func TestFragmentedMappingCost(t *testing.T) {
	const spread, interleaved = 200000, 50000
	var results []Result
	for i := 0; i < interleaved; i += 2 {
		results = append(results, result("job/a", "uid-a", i, fmt.Sprintf("s%d", 2*i)), result("job/b", "uid-b", i, fmt.Sprintf("s%d", 2*i+1)))
	}
	halfDone := ordinalList(0, 2, interleaved/2)
	cases := []struct {
		name                      string
		in                        Input
		wantCovered, wantAccepted int32
		wantAssignment            metav1.ConditionStatus
	}{
		{
			name: "indexes spread over a Job not created yet",
			in: Input{Spec: makeCompactSpec("s", spread).
				AssignJobOrdinals("a", ordinalList(0, 2, spread), fmt.Sprintf("0-%d", spread-1)).SpecObj()},
			wantAssignment: metav1.ConditionTrue,
		},
		{
			name: "two Jobs taking alternate shards, half their indexes done, each with its result",
			in: Input{
				Spec: makeCompactSpec("s", 2*interleaved).RequireResults("").
					AssignJobOrdinals("a", fmt.Sprintf("0-%d", interleaved-1), ordinalList(0, 2, interleaved)).
					AssignJobOrdinals("b", fmt.Sprintf("0-%d", interleaved-1), ordinalList(1, 2, interleaved)).SpecObj(),
				Observations: map[string]Observation{
					"job/a": {Job: makeJob("a", "uid-a", interleaved).Completed(halfDone, interleaved/2).Facts()},
					"job/b": {Job: makeJob("b", "uid-b", interleaved).Completed(halfDone, interleaved/2).Facts()},
				},
				Results: results,
			},
			wantCovered: interleaved, wantAccepted: interleaved, wantAssignment: metav1.ConditionTrue,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Namespace, in.Generation, in.Now = "ml-team", 1, metav1.NewTime(time0)
			start := time.Now()
			out := Compute(in)
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("Compute took %v", elapsed)
			}
			st := out.Status
			if st.Shards.Covered != tc.wantCovered || st.Shards.Accepted != tc.wantAccepted {
				t.Errorf("covered %d, accepted %d; want %d, %d", st.Shards.Covered, st.Shards.Accepted, tc.wantCovered, tc.wantAccepted)
			}
			if c := findCond(st, "AssignmentValid"); c == nil || c.Status != tc.wantAssignment {
				t.Errorf("AssignmentValid = %+v, want %s", c, tc.wantAssignment)
			}
		})
	}
}
