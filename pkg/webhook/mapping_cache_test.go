package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// accountsReader lists its accounts as the manager's cache does for a read that asks for
// no copy (client.UnsafeDisableDeepCopy), whatever the selector, and finds nothing else.
type accountsReader struct{ accounts []v1alpha1.BatchAccount }

func (r accountsReader) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
}

func (r accountsReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if l, ok := list.(*v1alpha1.BatchAccountList); ok {
		l.Items = r.accounts
	}
	return nil
}

// spreadOrdinals is "first,first+2,…": count ordinals, each its own interval.
func spreadOrdinals(first, count int) string {
	var b strings.Builder
	for i := range count {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d", first+2*i)
	}
	return b.String()
}

// TestPodAssignmentCompilesEachSpecOnce: the pod webhooks tell every index pod of an
// account's Jobs its shard, from the account's compiled mapping. Compiled per pod, a
// mapping spread over 200,000 runs (a ~1.3 MB spec) cost ~0.3 s of the webhook server
// per pod, hours for a batch of such pods, and pods created together queued past the
// webhook's timeout (the results scope's webhook fails closed). The mapping is compiled
// once per spec (UID and generation): 40 pods are told their shards well inside the
// bound, and a changed spec (a new generation) is compiled again, never read stale.
func TestPodAssignmentCompilesEachSpecOnce(t *testing.T) {
	const n = 200000
	job := wrappers.MakeJob("j", "ml-team").Indexed(2*n).UID("j-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj()
	spread := func(generation int64, firstIndex int) v1alpha1.BatchAccount {
		return *wrappers.MakeBatchAccount("spread", "ml-team").UID("spread-uid").Generation(generation).ShardCount("s", n).
			AssignJobOrdinals("j", spreadOrdinals(firstIndex, n), fmt.Sprintf("0-%d", n-1)).Obj()
	}
	cases := []struct {
		name     string
		account  v1alpha1.BatchAccount
		pods     int
		podIndex func(k int) int // the index of the k-th pod
		want     func(k int) string
	}{
		{"40 pods of a mapping spread over 200,000 runs", spread(1, 0), 40,
			func(k int) int { return 2 * k }, func(k int) string { return fmt.Sprintf("s%d", k) }},
		{"the same account respecified onto the odd indexes", spread(2, 1), 40,
			func(k int) int { return 2*k + 1 }, func(k int) string { return fmt.Sprintf("s%d", k) }},
		{"its even indexes, no longer assigned", spread(2, 1), 1,
			func(k int) int { return 2 * k }, func(int) string { return "" }},
	}
	h := PodAssignmentAnnotator{Mappings: &MappingCache{}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h.Reader = accountsReader{[]v1alpha1.BatchAccount{tc.account}}
			start := time.Now()
			for k := range tc.pods {
				pod := wrappers.MakeIndexPod(job, fmt.Sprintf("j-%d", k), tc.podIndex(k)).Obj()
				after, _ := admitPod(t, h, pod)
				if got := after.Annotations[v1alpha1.AnnotationShard]; got != tc.want(k) {
					t.Fatalf("pod of index %d told shard %q, want %q", tc.podIndex(k), got, tc.want(k))
				}
			}
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("%d pods took %v", tc.pods, elapsed)
			}
		})
	}
}

// TestMappingCacheBound: the cache holds at most its limit of runs, dropping the least
// recently used spec first; a spec larger than the limit is compiled, not kept.
func TestMappingCacheBound(t *testing.T) {
	// account is an account of one Job whose mapping is runs runs long.
	account := func(uid string, runs int) *v1alpha1.BatchAccount {
		return wrappers.MakeBatchAccount(uid, "ml-team").UID(uid).Generation(1).ShardCount("s", int32(runs)).
			AssignJobOrdinals("j", spreadOrdinals(0, runs), fmt.Sprintf("0-%d", runs-1)).Obj()
	}
	a, b, c, big := account("a", 2), account("b", 2), account("c", 2), account("big", 7)
	cases := []struct {
		name string
		get  []*v1alpha1.BatchAccount
		want []string // the UIDs kept, most recently used first
	}{
		{"within the limit", []*v1alpha1.BatchAccount{a, b}, []string{"b", "a"}},
		{"past it, the least recently used goes", []*v1alpha1.BatchAccount{a, b, c}, []string{"c", "b"}},
		{"a spec used again is kept", []*v1alpha1.BatchAccount{a, b, a, c}, []string{"c", "a"}},
		{"a spec larger than the limit is not kept", []*v1alpha1.BatchAccount{a, big}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := &MappingCache{limit: 5}
			for _, ba := range tc.get {
				if m := cache.get(ba); len(m.Runs) != int(*ba.Spec.Shards.Count) {
					t.Fatalf("%s: %d runs, want %d", ba.UID, len(m.Runs), *ba.Spec.Shards.Count)
				}
			}
			var got []string
			for el := cache.order.Front(); el != nil; el = el.Next() {
				got = append(got, string(el.Value.(*mappingEntry).key.uid))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") || len(cache.entries) != len(got) {
				t.Errorf("kept %v (%d entries, %d runs), want %v", got, len(cache.entries), cache.runs, tc.want)
			}
		})
	}
}
