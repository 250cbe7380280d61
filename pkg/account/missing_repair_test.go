package account

import (
	"testing"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestMissingNamesItsRepairIdentities: a missing shard that a repair assignment gives a
// further identity waits for that identity too, and the message names it, not only the
// original identity that can no longer cover the shard.
func TestMissingNamesItsRepairIdentities(t *testing.T) {
	failedB := makeJob("j", "uid-j", 4).BackoffLimitPerIndex(0).Completed("0,3", 2).FailedIndexes("1,2")
	cases := []struct {
		name string
		spec *v1alpha1.BatchAccountSpec
		obs  map[string]Observation
		want string
	}{
		{
			name: "one repair of one shard",
			spec: makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Repair("r", "0", "B").SpecObj(),
			obs:  map[string]Observation{"job/j": {Job: failedB.Facts()}},
			want: "2/4 shards covered; missing B, C = job j indexes 1,2, B = job r index 0 (repair); " +
				"job j failed indexes 1,2 (shards B, C) and will not run them again: repair them; job r not found",
		},
		{
			name: "repairs of part of a missing run, chained",
			spec: makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").
				Repair("r", "0-1", "B", "C").Repair("r2", "0", "C").SpecObj(),
			obs: map[string]Observation{"job/j": {Job: failedB.Facts()}},
			want: "2/4 shards covered; missing B, C = job j indexes 1,2, B, C = job r indexes 0,1 (repair), C = job r2 index 0 (repair); " +
				"job j failed indexes 1,2 (shards B, C) and will not run them again; other identities may still cover them; job r, job r2 not found",
		},
		{
			name: "no repair",
			spec: makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").SpecObj(),
			obs:  map[string]Observation{"job/j": {Job: failedB.Facts()}},
			want: "2/4 shards covered; missing B, C = job j indexes 1,2; job j failed indexes 1,2 (shards B, C) and will not run them again: repair them",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := step(t, tc.spec, nil, tc.obs).Status
			wantCond(t, st, v1alpha1.ConditionShardsCovered, "False", v1alpha1.ReasonShardsMissing, tc.want)
		})
	}
}
