package account

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
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

// gapped is the completedIndexes of a Job of n indexes missing every 7th (and its last).
func gapped(n int) string {
	var b strings.Builder
	for start := 0; start < n-1; start += 7 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d-%d", start, min(start+5, n-2))
	}
	return b.String()
}

// largeJobSetInput is a 1,000,000-shard account over the 100 children of a JobSet
// (10,000 indexes each) restarted 64 times: a full history of superseded identities with
// scattered coverage, and current children with scattered completed and failed indexes,
// each admitted by Kueue.
func largeJobSetInput() Input {
	const children, perChild, restarts = 100, 10000, 64
	spec := makeCompactSpec("shard-", children*perChild)
	done := gapped(perChild)
	var failed strings.Builder
	for i := 6; i < perChild; i += 7 {
		if failed.Len() > 0 {
			failed.WriteByte(',')
		}
		fmt.Fprint(&failed, i)
	}
	prev := &v1alpha1.BatchAccountStatus{}
	obs := map[string]Observation{}
	for c := range children {
		spec.AssignJobSet("train", "workers", int32(c), fmt.Sprintf("0-%d", perChild-1), fmt.Sprintf("%d-%d", c*perChild, (c+1)*perChild-1))
		key := fmt.Sprintf("jobset/train/workers/%d", c)
		job := fmt.Sprintf("train-workers-%d", c)
		prev.Targets = append(prev.Targets, v1alpha1.TargetStatus{Name: key, Job: job, UID: types.UID(fmt.Sprintf("%s-a%d", job, restarts-1)), RestartAttempt: restarts - 1, Found: true, CompletedIndexes: done})
		obs[key] = Observation{
			Job:            makeJob(job, fmt.Sprintf("%s-a%d", job, restarts), perChild).Completed(done, 0).FailedIndexes(failed.String()).Obj(),
			RestartAttempt: restarts,
			Workload:       &v1alpha1.WorkloadObservation{Name: "jobset-train", Admitted: true, ClusterQueue: "ml-team", Flavors: []string{"workers=nvidia.com/gpu:h100"}},
		}
	}
	for r := range restarts {
		prev.History = append(prev.History, v1alpha1.SupersededIdentity{Target: "jobset/train/workers/0", Job: "train-workers-0", UID: types.UID(fmt.Sprintf("old-%d", r)), RestartAttempt: int32(r), CompletedIndexes: done})
	}
	return Input{Namespace: "ml-team", Generation: 1, Spec: spec.SpecObj(), Previous: prev, Observations: obs, Now: metav1.NewTime(time0)}
}

// TestMillionShardJobSetRestartedStaysWritable: every index list the status writes is
// in the budget, so a million-shard account over JobSet children restarted 64 times
// (history full) stays under the object size limit, says what it left out, and
// recomputes to itself.
func TestMillionShardJobSetRestartedStaysWritable(t *testing.T) {
	in := largeJobSetInput()
	st := Compute(in).Status
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > etcdRequestLimit*2/3 {
		t.Errorf("status is %d bytes of JSON; want well under etcd's %d", len(raw), int(etcdRequestLimit))
	}
	if n := indexListBytes(&st); n > IndexListBudget {
		t.Errorf("index lists take %d bytes, over the %d budget", n, IndexListBudget)
	}
	t.Logf("status JSON %d bytes, index lists %d bytes; targets' completedIndexes omitted: %v, missingOrdinals truncated: %v",
		len(raw), indexListBytes(&st), st.Targets[0].CompletedIndexesOmitted, st.Shards.MissingOrdinalsTruncated)
	if len(st.History) != maxHistory {
		t.Fatalf("history has %d entries, want it full (%d)", len(st.History), maxHistory)
	}
	for _, h := range st.History {
		if h.CompletedIndexes == "" && !h.CompletedIndexesOmitted {
			t.Fatalf("history entry %s reads as nothing covered without saying it was left out", h.UID)
		}
	}
	for _, ts := range st.Targets {
		for _, a := range ts.Admissions {
			if a.CompletedIndexes == "" && !a.CompletedIndexesOmitted {
				t.Fatalf("target %s: an admission's completed indexes are empty without saying they were left out", ts.Name)
			}
		}
		if ts.CompletedIndexes == "" && !ts.CompletedIndexesOmitted {
			t.Fatalf("target %s: completedIndexes empty without saying it was left out", ts.Name)
		}
	}
	again := in
	again.Previous = &st
	if next := Compute(again); !equality.Semantic.DeepEqual(next.Status, st) || len(next.Changed) != 0 {
		t.Errorf("recomputing from the bounded status changed it (%d condition changes)", len(next.Changed))
	}
}
