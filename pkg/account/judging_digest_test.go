package account

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestMappingJudgingDigest: a mapping, compiled or cached, carries its spec's
// JudgingDigest, computed once with it: a spec asked for again is neither compiled nor
// digested again, and a new generation that only sets ttlSecondsAfterFinished judges as
// the one before.
func TestMappingJudgingDigest(t *testing.T) {
	account := func(gen int64, ttl *int32) *v1alpha1.BatchAccount {
		ba := wrappers.MakeBatchAccount("acc", "ml-team").UID("acc-uid").Generation(gen).Shards("A", "B").
			AssignJob("j", "0-1", "A", "B").Obj()
		ba.Spec.TTLSecondsAfterFinished = ttl
		return ba
	}
	cases := []struct {
		name string
		ba   *v1alpha1.BatchAccount
	}{
		{"a spec", account(1, nil)},
		{"the spec again, with ttlSecondsAfterFinished", account(2, ptr.To(int32(60)))},
		{"an invalid spec", wrappers.MakeBatchAccount("bad", "ml-team").UID("bad-uid").Generation(1).Shards("A").
			AssignJob("j", "0-3", "A").Obj()},
		{"an empty spec", wrappers.MakeBatchAccount("empty", "ml-team").UID("empty-uid").Generation(1).Obj()},
	}
	cache := &MappingCache{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.ba.Spec.JudgingDigest()
			if got := Compile(tc.ba.Namespace, &tc.ba.Spec).JudgingDigest(); got != want {
				t.Errorf("compiled mapping's digest %q, want %q", got, want)
			}
			m := cache.Get(tc.ba)
			before := cache.Compiles()
			for range 3 {
				if again := cache.Get(tc.ba); again != m || again.JudgingDigest() != want {
					t.Errorf("cached mapping's digest %q (the same mapping: %t), want %q", again.JudgingDigest(), again == m, want)
				}
			}
			if got := cache.Compiles(); got != before {
				t.Errorf("%d compilations for a spec cached, want none", got-before)
			}
		})
	}
	if a, b := cases[0].ba.Spec.JudgingDigest(), cases[1].ba.Spec.JudgingDigest(); a != b {
		t.Errorf("a ttlSecondsAfterFinished change judges apart: %q, %q", a, b)
	}
}

// TestComputeTakesTheJudgingDigestFromTheMapping: Compute reads the spec's
// JudgingDigest from the mapping it is given, for the status it writes and for whether
// the verdict is final, rather than encoding and hashing the spec again on every
// reconcile. A mapping made to carry another digest shows which one Compute read: the
// spec itself is unchanged since the verdict, so computing its digest keeps the verdict
// final.
func TestComputeTakesTheJudgingDigestFromTheMapping(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecObj()
	done := map[string]Observation{"job/j": {Job: completeJob("j", "uid-j", 2).Facts()}}
	rerun := map[string]Observation{"job/j": {Job: makeJob("j", "uid-again", 2).Completed("0", 1).Facts()}}
	st := at(spec, nil, 0, done).Status
	st = at(spec, &st, time.Minute, rerun).Status
	wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
	cases := []struct {
		name   string
		digest string // the mapping's digest: "" is the spec's own
		// wantUID is the identity job/j follows at the next generation.
		wantUID types.UID
	}{
		{"the spec's digest: the verdict is final", "", "uid-j"},
		{"another digest: the spec changed since the verdict", "another-spec", "uid-again"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := Compile("ml-team", spec)
			if tc.digest != "" {
				m.judging = tc.digest
			}
			out := Compute(Input{Namespace: "ml-team", Generation: 2, Spec: spec, Mapping: m, Previous: &st, Observations: rerun,
				Now: metav1.NewTime(time0.Add(time.Hour))})
			if got := out.Status.JudgedSpec; got != m.JudgingDigest() {
				t.Errorf("status.judgedSpec %q, want the mapping's %q", got, m.JudgingDigest())
			}
			if got := out.Status.Targets[0].UID; got != tc.wantUID {
				t.Errorf("job/j follows %q, want %q", got, tc.wantUID)
			}
		})
	}
}

// BenchmarkJudgingDigestOfSpreadSpec: what a reconcile paid, each time, for the
// JudgingDigest of a spec spread over 200,000 runs (~1.3 MB), and what it pays through
// the cached mapping.
func BenchmarkJudgingDigestOfSpreadSpec(b *testing.B) {
	const n = 200000
	ba := wrappers.MakeBatchAccount("spread", "ml-team").UID("spread-uid").Generation(1).ShardCount("s", n).
		AssignJobOrdinals("j", ordinalList(0, 2, n), fmt.Sprintf("0-%d", n-1)).Obj()
	b.Run("computed", func(b *testing.B) {
		for b.Loop() {
			ba.Spec.JudgingDigest()
		}
	})
	b.Run("cached", func(b *testing.B) {
		cache := &MappingCache{}
		cache.Get(ba)
		for b.Loop() {
			cache.Get(ba).JudgingDigest()
		}
	})
}
