package controller

import (
	"context"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestReconcileCompilesEachSpecOnce: every reconcile reads its account's compiled
// mapping. Compiled per reconcile, a mapping spread over 200,000 runs (a ~1.3 MB spec)
// cost a reconcile worker ~0.3 s on every Job status change of the batch, with the
// mapping already compiled by the pod webhooks. With Reconciler.Mappings, a spec (UID
// and generation) is compiled once: a second reconcile of it compiles nothing, a new
// generation is compiled again and judged by its own mapping, never a stale one, and an
// account with no generation (not read from the API server) is compiled each time.
func TestReconcileCompilesEachSpecOnce(t *testing.T) {
	job := jobJ(v1alpha1.ScopeCoverage).Completed("0", 1).Obj()
	// step is one reconcile, after respecify (when set) changed the account.
	type step struct {
		respecify    func(ba *v1alpha1.BatchAccount)
		wantCompiles int64
		wantMissing  string
	}
	rename := func(generation int64) func(ba *v1alpha1.BatchAccount) {
		return func(ba *v1alpha1.BatchAccount) {
			ba.Spec = *wrappers.MakeBatchAccount("acct", "ns").Shards("X", "Y").AssignJob("j", "0-1", "X", "Y").SpecObj()
			ba.Generation = generation
		}
	}
	cases := []struct {
		name    string
		account *v1alpha1.BatchAccount
		steps   []step
	}{
		{"reconciled three times, one generation", accountOfJ().Obj(),
			[]step{{nil, 1, "B"}, {nil, 1, "B"}, {nil, 1, "B"}}},
		{"respecified: the new generation is compiled once and judged by its mapping", accountOfJ().Obj(),
			[]step{{nil, 1, "B"}, {rename(2), 2, "Y"}, {nil, 2, "Y"}}},
		{"an account with no generation is compiled each time", accountOfJ().Generation(0).Obj(),
			[]step{{nil, 1, "B"}, {nil, 2, "B"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, job, tc.account)
			mappings := &account.MappingCache{}
			for i, s := range tc.steps {
				if s.respecify != nil {
					ba := f.account(t, "acct")
					s.respecify(ba)
					if err := f.c.Update(context.Background(), ba); err != nil {
						t.Fatal(err)
					}
				}
				r := f.reconciler()
				r.Mappings = mappings
				if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}); err != nil {
					t.Fatalf("reconcile %d: %v", i, err)
				}
				if got := mappings.Compiles(); got != s.wantCompiles {
					t.Errorf("reconcile %d: %d mappings compiled so far, want %d", i, got, s.wantCompiles)
				}
				if got := f.account(t, "acct").Status.Shards.Missing; got != s.wantMissing {
					t.Errorf("reconcile %d: missing %q, want %q", i, got, s.wantMissing)
				}
			}
		})
	}
}
