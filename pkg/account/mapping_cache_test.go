package account

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestMappingCacheBound: the cache holds at most its limit of runs and declared shard
// names, dropping the least recently used spec first; a spec larger than the limit is
// compiled, not kept. A spec of many names mapped by one run holds a name and an entry
// of its ordinal map per shard: counted as one run, specs of 100,000 names each were
// kept by the thousand, gigabytes past the bound.
func TestMappingCacheBound(t *testing.T) {
	// account is an account of one Job whose mapping is runs runs long.
	accountOf := func(uid string, runs int) *v1alpha1.BatchAccount {
		return wrappers.MakeBatchAccount(uid, "ml-team").UID(uid).Generation(1).ShardCount("s", int32(runs)).
			AssignJobOrdinals("j", ordinalList(0, 2, runs), fmt.Sprintf("0-%d", runs-1)).Obj()
	}
	a, b, c, big := accountOf("a", 2), accountOf("b", 2), accountOf("c", 2), accountOf("big", 7)
	names := []string{"A", "B", "C", "D", "E", "F", "G"}
	named := wrappers.MakeBatchAccount("named", "ml-team").UID("named").Generation(1).Shards(names...).AssignJob("j", "0-6", names...).Obj()
	cases := []struct {
		name string
		get  []*v1alpha1.BatchAccount
		want []string // the UIDs kept, most recently used first
	}{
		{"within the limit", []*v1alpha1.BatchAccount{a, b}, []string{"b", "a"}},
		{"past it, the least recently used goes", []*v1alpha1.BatchAccount{a, b, c}, []string{"c", "b"}},
		{"a spec used again is kept", []*v1alpha1.BatchAccount{a, b, a, c}, []string{"c", "a"}},
		{"a spec larger than the limit is not kept", []*v1alpha1.BatchAccount{a, big}, nil},
		{"a spec of more shard names than the limit, in one run, is not kept", []*v1alpha1.BatchAccount{a, named}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := &MappingCache{limit: 5}
			for _, ba := range tc.get {
				if m := cache.Get(ba); len(m.Problems) > 0 || m.Shards.Count() == 0 {
					t.Fatalf("%s: %d shards, problems %v", ba.UID, m.Shards.Count(), m.Problems)
				}
			}
			var got []string
			for el := cache.order.Front(); el != nil; el = el.Next() {
				got = append(got, string(el.Value.(*mappingEntry).key.uid))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") || len(cache.entries) != len(got) {
				t.Errorf("kept %v (%d entries, size %d), want %v", got, len(cache.entries), cache.runs, tc.want)
			}
		})
	}
}

// TestMappingCacheOwnsItsMappings: a cached mapping is read by every caller of its spec,
// the pod webhooks' and the reconciler's goroutines, long after the object it was
// compiled from. It must hold nothing of that object: a caller's copy written over (as a
// client decoding an update's answer into it does) would otherwise change the shard
// names, or the target, every other caller reads, and race with them.
func TestMappingCacheOwnsItsMappings(t *testing.T) {
	accountOf := func() *v1alpha1.BatchAccount {
		return wrappers.MakeBatchAccount("acct", "ml-team").UID("acct-uid").Generation(1).Shards("A", "B").
			AssignJobSet("js", "workers", 1, "0-1", "0-1").Obj()
	}
	cases := []struct {
		name      string
		overwrite func(ba *v1alpha1.BatchAccount)
	}{
		{"a shard name", func(ba *v1alpha1.BatchAccount) { ba.Spec.Shards.Names[0] = "Z" }},
		{"a target's jobIndex", func(ba *v1alpha1.BatchAccount) { *ba.Spec.Assignments[0].Target.JobIndex = 7 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := &MappingCache{}
			first := accountOf()
			cache.Get(first)
			tc.overwrite(first)
			m := cache.Get(accountOf())
			if got := m.Shards.Name(0); got != "A" {
				t.Errorf("shard 0 is %q, want A", got)
			}
			if got := m.Targets[0].Ref.Index(); got != 1 {
				t.Errorf("the target's jobIndex is %d, want 1", got)
			}
			if cache.Compiles() != 1 {
				t.Errorf("%d compilations, want 1", cache.Compiles())
			}
		})
	}
}

// TestSharedMappingIsOnlyRead: one cached mapping, read by Compute and ShardOf on many
// goroutines at once, as the reconcile workers and the pod webhooks read it. Run with
// -race, a write to it anywhere on those paths is reported.
func TestSharedMappingIsOnlyRead(t *testing.T) {
	ba := makeSpec("A", "B", "C", "D").UID("ij245-uid").Generation(1).RequireResults("").
		AssignJob("j", "0-3", "A", "B", "C", "D").Repair("r", "0", "D").Obj()
	j := makeJob("j", "uid-j", 4).Completed("0-2", 3)
	r := makeJob("r", "uid-r", 1).Completed("0", 1)
	cases := []struct {
		name string
		obs  map[string]Observation
	}{
		{"the original Job alone", map[string]Observation{"job/j": {Job: j.Facts(), SuccessfulPods: pods("p", 0, 1, 2)}}},
		{"with its repair", map[string]Observation{"job/j": {Job: j.Facts(), SuccessfulPods: pods("p", 0, 1, 2)},
			"job/r": {Job: r.Facts(), SuccessfulPods: pods("q", 0)}}},
	}
	cache := &MappingCache{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := Compute(Input{Namespace: ba.Namespace, Generation: 1, Spec: &ba.Spec, Observations: tc.obs,
				Results: []Result{result("job/j", "uid-j", 0, "A")}, Now: metav1.NewTime(jobCondAt)}).Status
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					m := cache.Get(ba)
					got := Compute(Input{Namespace: ba.Namespace, Generation: 1, Spec: &ba.Spec, Mapping: m, Observations: tc.obs,
						Results: []Result{result("job/j", "uid-j", 0, "A")}, Now: metav1.NewTime(jobCondAt)}).Status
					if !equality.Semantic.DeepEqual(got, want) {
						t.Errorf("status through the shared mapping differs: %+v, want %+v", got.Shards, want.Shards)
					}
					if o, ok := m.ShardOf("job/r", 0); !ok || m.Shards.Name(o) != "D" {
						t.Errorf("job/r index 0 maps to %d (%t), want D", o, ok)
					}
				})
			}
			wg.Wait()
		})
	}
	if got := cache.Compiles(); got != 1 {
		t.Errorf("%d compilations, want 1", got)
	}
}

// BenchmarkMappingOfSpreadSpec: what a reconcile or a pod's admission paid for the
// mapping of a spec spread over 200,000 runs (~1.3 MB), compiled each time, and what it
// pays through the cache.
func BenchmarkMappingOfSpreadSpec(b *testing.B) {
	const n = 200000
	ba := wrappers.MakeBatchAccount("spread", "ml-team").UID("spread-uid").Generation(1).ShardCount("s", n).
		AssignJobOrdinals("j", ordinalList(0, 2, n), fmt.Sprintf("0-%d", n-1)).Obj()
	b.Run("compiled", func(b *testing.B) {
		for b.Loop() {
			Compile(ba.Namespace, &ba.Spec)
		}
	})
	b.Run("cached", func(b *testing.B) {
		cache := &MappingCache{}
		cache.Get(ba)
		for b.Loop() {
			cache.Get(ba)
		}
	})
}
