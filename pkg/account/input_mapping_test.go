package account

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestComputeTakesTheCallersMapping: Compute uses the mapping the caller compiled (the
// reconciler compiles once per reconcile) instead of compiling the spec again, and
// compiles it itself when given none.
func TestComputeTakesTheCallersMapping(t *testing.T) {
	spec := func(shards ...string) *v1alpha1.BatchAccountSpec {
		return &v1alpha1.BatchAccountSpec{InputRevision: "D", ModelRevision: "m",
			Shards:      v1alpha1.ShardPopulation{Names: shards},
			Assignments: []v1alpha1.Assignment{{Target: v1alpha1.TargetRef{Job: "j"}, Indexes: "0", Shards: shards[:1]}}}
	}
	two, one := spec("A", "B"), spec("A")
	cases := []struct {
		name    string
		mapping *Mapping
		want    int32
	}{
		{"no mapping: compiled from the spec", nil, 2},
		{"the spec's own mapping", Compile("ns", two), 2},
		{"a mapping the caller compiled is used as given", Compile("ns", one), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Compute(Input{Namespace: "ns", Generation: 1, Spec: two, Mapping: tc.mapping, Now: metav1.Now()})
			if out.Status.Shards.Total != tc.want {
				t.Errorf("shards total = %d, want %d", out.Status.Shards.Total, tc.want)
			}
			if tc.mapping != nil && out.Mapping != tc.mapping {
				t.Error("Output.Mapping is not the mapping given")
			}
		})
	}
}
