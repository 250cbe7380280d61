package account

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	"batchledger.dev/batchledger/pkg/indexset"
)

// etcdRequestLimit is etcd's default --max-request-bytes: a larger object is never stored.
const etcdRequestLimit = 1.5 * (1 << 20)

// TestStatusStaysWithinTheObjectSizeLimit: accounts of a million shards with scattered
// gaps keep their status writable, say what they left out, and leave small accounts
// untouched.
func TestStatusStaysWithinTheObjectSizeLimit(t *testing.T) {
	cases := map[string]struct {
		in            Input
		wantOmitted   bool
		wantTruncated bool
	}{
		// 100 Jobs x 1,000 indexes, every 7th missing: small enough to carry everything.
		"100k shards": {in: largeInput(100, 1000)},
		// 100 Jobs x 10,000: 1.4 MB of completedIndexes and ~1 MB of missing ordinals.
		"1M shards, every 7th missing": {in: largeInput(100, 10000), wantOmitted: true, wantTruncated: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := Compute(tc.in)
			st := out.Status
			raw, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if len(raw) > etcdRequestLimit*2/3 {
				t.Errorf("status is %d bytes of JSON; want well under etcd's %d", len(raw), int(etcdRequestLimit))
			}
			for _, ts := range st.Targets {
				if ts.CompletedIndexesOmitted != tc.wantOmitted || (ts.CompletedIndexes == "") != tc.wantOmitted {
					t.Fatalf("target %s: completedIndexesOmitted=%v with %d bytes of completedIndexes; want omitted=%v",
						ts.Name, ts.CompletedIndexesOmitted, len(ts.CompletedIndexes), tc.wantOmitted)
				}
			}
			if st.Shards.MissingOrdinalsTruncated != tc.wantTruncated {
				t.Errorf("missingOrdinalsTruncated = %v, want %v", st.Shards.MissingOrdinalsTruncated, tc.wantTruncated)
			}
			listed, err := indexset.Parse(st.Shards.MissingOrdinals)
			if err != nil {
				t.Fatalf("missingOrdinals no longer parses: %v", err)
			}
			missing := int(st.Shards.Total - st.Shards.Covered)
			if tc.wantTruncated {
				if listed.Count() == 0 || listed.Count() >= missing || len(st.Shards.MissingOrdinals) > IndexListBudget {
					t.Errorf("truncated missingOrdinals lists %d of %d missing shards in %d bytes", listed.Count(), missing, len(st.Shards.MissingOrdinals))
				}
			} else if listed.Count() != missing {
				t.Errorf("missingOrdinals lists %d shards, %d are missing", listed.Count(), missing)
			}

			// Computing again from the written status changes nothing: a bounded status
			// must not cost a write per reconcile.
			again := tc.in
			again.Previous = &st
			if next := Compute(again); !equality.Semantic.DeepEqual(next.Status, st) || len(next.Changed) != 0 {
				t.Errorf("recomputing from the bounded status changed it (%d condition changes)", len(next.Changed))
			}
		})
	}
}
