package controller

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// podsOnlyCache stands in for the cache of succeeded coverage pods: a cache.Cache whose
// reads go to its own fake client (the informer half is never called by observeTarget).
type podsOnlyCache struct {
	cache.Cache
	reader client.Reader
}

func (c podsOnlyCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.reader.List(ctx, list, opts...)
}

// Each scope's pods are read where they are cached: the results scope's from the
// manager's cache, the coverage scope's from the cache of succeeded coverage pods, and an
// unlabelled Job's (it started before its account) from the API server, and so are the
// coverage scope's when the account requires results (the coverage cache keeps only
// metadata: no termination message to read). A pod placed anywhere else would not be
// counted.
func TestObserveReadsPodsFromTheCacheOfTheirScope(t *testing.T) {
	cases := map[string]struct {
		scope string
		// where the succeeded pod of index 0 is: "manager", "coverage" or "api".
		podIn string
		// results: the account requires results, so the whole pod must be read.
		results bool
	}{
		"results scope from the manager's cache":                   {scope: v1alpha1.ScopeResults, podIn: "manager"},
		"coverage scope from the coverage cache":                   {scope: v1alpha1.ScopeCoverage, podIn: "coverage"},
		"unlabelled Job from the API server":                       {scope: "", podIn: "api"},
		"coverage scope of a results account from the API server":  {scope: v1alpha1.ScopeCoverage, podIn: "api", results: true},
		"results account of an unlabelled Job from the API server": {scope: "", podIn: "api", results: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").ResourceVersion("1")
			if tc.scope != "" {
				j = j.PodLabel(v1alpha1.LabelScope, tc.scope)
			}
			job := j.Completed("0", 1).Obj()
			pod := wrappers.MakeIndexPod(job, "j-0", 0).Succeeded(testNow.Add(-time.Minute), "").Obj()
			stores := map[string]*fixture{}
			for _, where := range []string{"manager", "coverage", "api"} {
				objs := []client.Object{job.DeepCopy()}
				if where == tc.podIn {
					objs = append(objs, pod)
				}
				stores[where] = newFixture(t, hooks{}, objs...)
			}
			r := &Reconciler{
				Client:       stores["manager"].c,
				APIReader:    stores["api"].c,
				CoveragePods: podsOnlyCache{reader: stores["coverage"].c},
			}
			ba := accountOfJ().Obj()
			m := account.Compile(ba.Namespace, &ba.Spec)
			o, err := r.observeTarget(context.Background(), ba.Namespace, m.Targets[0], tc.results)
			if err != nil {
				t.Fatal(err)
			}
			if len(o.obs.SuccessfulPods) != 1 || o.obs.SuccessfulPods[0].Index != 0 {
				t.Fatalf("successful pods = %+v, want index 0's pod, read from the %s store", o.obs.SuccessfulPods, tc.podIn)
			}
			if tc.results && (len(o.pods) != 1 || len(o.pods[0].Spec.Containers) == 0) {
				t.Fatalf("pods = %+v, want the whole pod, whose result can be read", o.pods)
			}
		})
	}
}
