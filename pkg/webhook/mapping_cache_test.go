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

	"batchledger.dev/batchledger/pkg/account"
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
		compiles int64 // the mappings compiled so far
	}{
		{"40 pods of a mapping spread over 200,000 runs", spread(1, 0), 40,
			func(k int) int { return 2 * k }, func(k int) string { return fmt.Sprintf("s%d", k) }, 1},
		{"the same account respecified onto the odd indexes", spread(2, 1), 40,
			func(k int) int { return 2*k + 1 }, func(k int) string { return fmt.Sprintf("s%d", k) }, 2},
		{"its even indexes, no longer assigned", spread(2, 1), 1,
			func(k int) int { return 2 * k }, func(int) string { return "" }, 2},
	}
	h := PodAssignmentAnnotator{Mappings: &account.MappingCache{}}
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
			if got := h.Mappings.Compiles(); got != tc.compiles {
				t.Errorf("%d mappings compiled so far, want %d", got, tc.compiles)
			}
		})
	}
}
