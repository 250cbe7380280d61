package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// apiServer is a fake API server holding objs, which lists accounts by name as the real
// one does (a metadata.name field selector), and counts the lists of full accounts:
// the reads of single accounts by name.
func apiServer(t *testing.T, listErr error, objs ...client.Object) (client.Reader, *int) {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	reads := new(int)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&v1alpha1.BatchAccount{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if listErr != nil {
				return listErr
			}
			if _, ok := list.(*v1alpha1.BatchAccountList); ok {
				*reads++
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	return c, reads
}

// generation sets an account's generation, as the API server counts its spec changes.
func generation(ba *v1alpha1.BatchAccount, g int64) *v1alpha1.BatchAccount {
	ba.Generation = g
	return ba
}

// TestUndeliveredAccountsStampJobsAnotherReplicaAdmitted: with several replicas, the
// account applied with a Job may have been admitted by another replica and not be in
// this replica's cache yet. With UndeliveredAccounts the scope webhook finds it at the
// API server and stamps the Job; a stored spec newer than the cache's replaces it (also
// when it no longer names the Job), and so does an account created again under the name
// of one the cache holds; an account the cache holds at its stored generation is not read
// again, and one of another namespace stamps nothing. Without it, the Job is
// created unstamped: what the feature closes.
func TestUndeliveredAccountsStampJobsAnotherReplicaAdmitted(t *testing.T) {
	const ns = "ml-team"
	results := func() *v1alpha1.BatchAccount {
		return wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").RequireResults("true").Obj()
	}
	coverage := func() *v1alpha1.BatchAccount {
		return wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").Obj()
	}
	other := func() *v1alpha1.BatchAccount {
		return wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("other", "0", "A").Obj()
	}
	cases := map[string]struct {
		cached, stored []client.Object
		off            bool
		listErr        error
		wantScope      string
		wantReads      int
		wantWarning    bool
	}{
		"admitted by another replica, not in the cache": {
			stored: []client.Object{generation(results(), 1)}, wantScope: v1alpha1.ScopeResults, wantReads: 1,
		},
		"the same, without live reads: created unstamped": {
			stored: []client.Object{generation(results(), 1)}, off: true,
		},
		"updated to name the Job, the cache holding the old spec": {
			cached: []client.Object{generation(other(), 1)}, stored: []client.Object{generation(results(), 2)},
			wantScope: v1alpha1.ScopeResults, wantReads: 1,
		},
		"updated to require results, the cache holding coverage": {
			cached: []client.Object{generation(coverage(), 1)}, stored: []client.Object{generation(results(), 2)},
			wantScope: v1alpha1.ScopeResults, wantReads: 1,
		},
		"updated to name another Job, the cache holding the old spec": {
			cached: []client.Object{generation(coverage(), 1)}, stored: []client.Object{generation(other(), 2)},
			wantReads: 1,
		},
		"created again requiring results, the cache holding its predecessor at a later generation": {
			cached:    []client.Object{generation(wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").UID("old").Obj(), 3)},
			stored:    []client.Object{generation(wrappers.MakeBatchAccount("acct", ns).Shards("A").AssignJob("r", "0", "A").RequireResults("true").UID("new").Obj(), 1)},
			wantScope: v1alpha1.ScopeResults, wantReads: 1,
		},
		"in the cache at its stored generation: not read again": {
			cached: []client.Object{generation(coverage(), 3)}, stored: []client.Object{generation(coverage(), 3)},
			wantScope: v1alpha1.ScopeCoverage,
		},
		"in the cache with the results scope: the API server is not asked": {
			cached: []client.Object{generation(results(), 1)}, wantScope: v1alpha1.ScopeResults, listErr: errors.New("not asked"),
		},
		"of another namespace": {
			stored: []client.Object{generation(wrappers.MakeBatchAccount("acct", "elsewhere").Shards("A").AssignJob("r", "0", "A").Obj(), 1)},
		},
		"the API server fails: admitted unchanged, with a warning": {
			listErr: errors.New("connection refused"), wantWarning: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cache := indexedReader(t, nil, tc.cached...)
			api, reads := apiServer(t, tc.listErr, tc.stored...)
			h := ScopeStamper{Reader: cache}
			if !tc.off {
				h.Undelivered = &UndeliveredAccounts{API: api}
			}
			raw, err := json.Marshal(&batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
				ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: ns}})
			if err != nil {
				t.Fatal(err)
			}
			resp := admit(t, admission.HandlerFunc(h.handleJob), raw)
			if !resp.Allowed {
				t.Fatalf("the Job was refused: %v", resp.Result)
			}
			if got := metaScope(patchOf(t, resp), ""); got != tc.wantScope {
				t.Errorf("scope stamped on the new Job = %q, want %q", got, tc.wantScope)
			}
			if *reads != tc.wantReads {
				t.Errorf("%d accounts read by name from the API server, want %d", *reads, tc.wantReads)
			}
			if got := len(resp.Warnings) > 0; got != tc.wantWarning {
				t.Errorf("warnings %q, want any: %v", resp.Warnings, tc.wantWarning)
			}
		})
	}
}

// TestUndeliveredAccountsStampJobSets: a JobSet's replicatedJob named by an account the
// cache has not delivered is stamped, and one no account names is not.
func TestUndeliveredAccountsStampJobSets(t *testing.T) {
	const ns = "ml-team"
	train := wrappers.MakeBatchAccount("train", ns).Shards("A", "B").
		AssignJobSet("ts", "workers", 0, "0", "A").AssignJobSet("ts", "workers", 1, "0", "B").RequireResults("true").Obj()
	cache := indexedReader(t, nil)
	api, _ := apiServer(t, nil, generation(train, 1))
	h := ScopeStamper{Reader: cache, Undelivered: &UndeliveredAccounts{API: api}}
	js := &jobsetapi.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "ts", Namespace: ns},
		Spec: jobsetapi.JobSetSpec{ReplicatedJobs: []jobsetapi.ReplicatedJob{
			{Name: "leader", Replicas: 1}, {Name: "workers", Replicas: 2}}},
	}
	raw, err := json.Marshal(js)
	if err != nil {
		t.Fatal(err)
	}
	ops := patchOf(t, admit(t, admission.HandlerFunc(h.handleJobSet), raw))
	for path, want := range map[string]string{
		"":                                v1alpha1.ScopeResults,
		"/spec/replicatedJobs/0/template": "",
		"/spec/replicatedJobs/1/template": v1alpha1.ScopeResults,
		"/spec/replicatedJobs/1/template/spec/template": v1alpha1.ScopeResults,
	} {
		if got := metaScope(ops, path); got != want {
			t.Errorf("scope stamped at %q = %q, want %q", path, got, want)
		}
	}
}
