package webhook

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestAdmittedAccountsStampJobsTheCacheHasNotSeen: a Job created after its account was
// admitted by this replica's validator, but before the cache holds the account, is
// stamped as if the cache held it; an account never stored (refused, a dry run), one
// admitted more than AdmittedMemory ago, or one of another namespace stamps nothing, an
// update of its metadata alone is not kept, and one the cache holds too is listed once:
// as admitted when that is newer than the cache's copy (a later generation, or the
// account created again), as cached otherwise.
func TestAdmittedAccountsStampJobsTheCacheHasNotSeen(t *testing.T) {
	const ns = "ml-team"
	results := func() *v1alpha1.BatchAccount {
		return wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").RequireResults("true").Obj()
	}
	dryRun := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{DryRun: ptr.To(true)}})
	type step func(t *testing.T, v BatchAccountValidator, clock *time.Time)
	create := func(ctx context.Context, ba *v1alpha1.BatchAccount) step {
		return func(t *testing.T, v BatchAccountValidator, _ *time.Time) { _, _ = v.ValidateCreate(ctx, ba) }
	}
	update := func(old, ba *v1alpha1.BatchAccount) step {
		return func(t *testing.T, v BatchAccountValidator, _ *time.Time) {
			if _, err := v.ValidateUpdate(context.Background(), old, ba); err != nil {
				t.Fatal(err)
			}
		}
	}
	wait := func(d time.Duration) step {
		return func(_ *testing.T, _ BatchAccountValidator, clock *time.Time) { *clock = clock.Add(d) }
	}
	earlier, later := time.Date(2026, 12, 4, 11, 0, 0, 0, time.UTC), time.Date(2026, 12, 4, 11, 30, 0, 0, time.UTC)
	cases := map[string]struct {
		cached    []client.Object
		steps     []step
		wantScope string
		wantNamed int
	}{
		"admitted, not in the cache yet": {
			steps: []step{create(context.Background(), results())}, wantScope: v1alpha1.ScopeResults, wantNamed: 1,
		},
		"updated to name the Job, the cache holding the old spec": {
			cached:    []client.Object{wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("other", "0", "A").Obj()},
			steps:     []step{update(wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("other", "0", "A").Obj(), results())},
			wantScope: v1alpha1.ScopeResults, wantNamed: 1,
		},
		"updated to require results, the cache holding the old spec naming the Job": {
			cached: []client.Object{wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").Generation(1).Obj()},
			steps: []step{update(wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").Generation(1).Obj(),
				wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").RequireResults("true").Generation(2).Obj())},
			wantScope: v1alpha1.ScopeResults, wantNamed: 1,
		},
		"updated to name another Job, the cache holding the old spec naming this one": {
			cached: []client.Object{wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").Generation(1).Obj()},
			steps: []step{update(wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").Generation(1).Obj(),
				wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("other", "0", "A").Generation(2).Obj())},
		},
		"the cache holding a newer spec than the one admitted": {
			cached: []client.Object{wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").RequireResults("true").Generation(3).Obj()},
			steps: []step{update(wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").Generation(1).Obj(),
				wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("other", "0", "A").Generation(2).Obj())},
			wantScope: v1alpha1.ScopeResults, wantNamed: 1,
		},
		"recreated under its name, the cache holding its predecessor naming the Job": {
			cached: []client.Object{wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").UID("old").Creation(earlier).Generation(4).Obj()},
			steps: []step{create(context.Background(), wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").RequireResults("true").
				UID("new").Creation(later).Generation(1).Obj())},
			wantScope: v1alpha1.ScopeResults, wantNamed: 1,
		},
		"the cache holding a successor created after the account admitted": {
			cached: []client.Object{wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").RequireResults("true").UID("new").Creation(later).Generation(1).Obj()},
			steps: []step{update(wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").UID("old").Creation(earlier).Generation(1).Obj(),
				wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("other", "0", "A").UID("old").Creation(earlier).Generation(2).Obj())},
			wantScope: v1alpha1.ScopeResults, wantNamed: 1,
		},
		"an update of the metadata alone: the cache's copy serves, nothing kept": {
			steps: []step{update(results(), func() *v1alpha1.BatchAccount {
				ba := results()
				ba.Labels = map[string]string{"team": "vision"}
				return ba
			}())},
		},
		"in the cache too: listed once": {
			cached: []client.Object{results()}, steps: []step{create(context.Background(), results())},
			wantScope: v1alpha1.ScopeResults, wantNamed: 1,
		},
		"refused by the validator": {
			steps: []step{create(context.Background(), wrappers.MakeBatchAccount("acct", ns).Shards("A", "B").AssignJob("r", "0", "A").Obj())},
		},
		"a dry run": {
			steps: []step{create(dryRun, results())},
		},
		"admitted AdmittedMemory ago": {
			steps: []step{create(context.Background(), results()), wait(AdmittedMemory)},
		},
		"admitted just before AdmittedMemory passed": {
			steps:     []step{create(context.Background(), results()), wait(AdmittedMemory - time.Second)},
			wantScope: v1alpha1.ScopeResults, wantNamed: 1,
		},
		"of another namespace": {
			steps: []step{create(context.Background(), wrappers.MakeBatchAccount("acct", "elsewhere").Shards("A").AssignJob("r", "0", "A").RequireResults("true").Obj())},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clock := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
			admitted := &AdmittedAccounts{Reader: indexedReader(t, nil, tc.cached...), Now: func() time.Time { return clock }}
			v := BatchAccountValidator{Admitted: admitted}
			for _, s := range tc.steps {
				s(t, v, &clock)
			}
			named, err := relations.AccountsNaming(context.Background(), admitted, ns, relations.JobKey("r"))
			if err != nil {
				t.Fatal(err)
			}
			if len(named) != tc.wantNamed {
				t.Errorf("%d accounts name job r, want %d", len(named), tc.wantNamed)
			}
			raw, err := json.Marshal(&batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
				ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: ns}})
			if err != nil {
				t.Fatal(err)
			}
			resp := admit(t, admission.HandlerFunc(ScopeStamper{Reader: admitted}.handleJob), raw)
			if got := metaScope(patchOf(t, resp), ""); got != tc.wantScope {
				t.Errorf("scope stamped on the new Job = %q, want %q", got, tc.wantScope)
			}
		})
	}
}
