package account

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
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

// TestFragmentedRepairsCompileCost: the BatchAccount webhook compiles every spec it is
// sent, valid or not, and a compilation runs to its end whatever the webhook's timeout.
// Repairs were checked against the original assignments one run at a time, each against
// every interval they assign: a spec of ~2.7 MB (under the API server's request limit)
// whose original assignment leaves every other shard out and whose repairs re-run the
// others took ~10 s of the webhook server per request, for any user who may create a
// BatchAccount. The problems found are checked as well.
func TestFragmentedRepairsCompileCost(t *testing.T) {
	const n = 200000
	spread := ordinalList(0, 2, n)
	indexes := fmt.Sprintf("0-%d", n-1)
	cases := []struct {
		name    string
		repairs string // the shard ordinals the repairs map indexes onto
		want    []string
	}{
		{"repairs of every shard a spread assignment gives", spread,
			[]string{v1alpha1.ReasonUnassignedShard}},
		{"repairs of those shards but the last, which is unassigned", ordinalList(0, 2, n-1) + fmt.Sprintf(",%d", 2*n-1),
			[]string{v1alpha1.ReasonUnassignedShard, v1alpha1.ReasonRepairOfUnassigned}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := makeCompactSpec("s", 2*n).AssignJobOrdinals("a", indexes, spread).SpecObj()
			spec.Repairs = []v1alpha1.Assignment{{Target: v1alpha1.TargetRef{Job: "r"}, Indexes: indexes, ShardOrdinals: tc.repairs}}
			start := time.Now()
			m := Compile("ml-team", spec)
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("Compile took %v", elapsed)
			}
			var got []string
			for _, p := range m.Problems {
				got = append(got, p.Reason)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems %v, want %v", m.Problems, tc.want)
			}
			if len(m.Problems) == 2 && !strings.Contains(m.Problems[1].Message, fmt.Sprintf("repair repairs[0] maps onto s%d,", 2*n-1)) {
				t.Errorf("message %q, want it to name repairs[0] and s%d", m.Problems[1].Message, 2*n-1)
			}
		})
	}
}
