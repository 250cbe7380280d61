package controller

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/relations"
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
			o, err := r.observeTarget(context.Background(), ba.Namespace, m.Targets[0], kinds.Followed{}, tc.results)
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

// TestObserveFollowsOnlyTheJobSetsChildren: a JobSet target follows the child Jobs its
// JobSet controls. A plain Job made by hand with the child's labels and a later restart
// attempt, and a Job an earlier JobSet of the same name controlled, are not its identity,
// wake none of its accounts, and their pods' results are not captured for it (so the pod
// releaser holds none of them for it either).
func TestObserveFollowsOnlyTheJobSetsChildren(t *testing.T) {
	js := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
	js.UID = "ts-uid"
	indexed := func(name, uid string, attempt int) *wrappers.JobWrapper {
		return wrappers.MakeJob(name, "ns").Indexed(1).UID(uid).JobSetChild(js, "workers", 0, attempt).
			PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).Completed("0", 1)
	}
	real := indexed("ts-workers-0", "real-uid", 0).Obj()
	handMade := indexed("ts-workers-0-retry", "hand-made-uid", 5).Obj()
	handMade.OwnerReferences = nil
	earlier := wrappers.MakeJobSet("ts", "ns").Obj()
	earlier.UID = "earlier-ts-uid"
	leftOver := indexed("ts-workers-0-old", "left-over-uid", 4).ControlledBy(earlier, jobsetapi.SchemeGroupVersion.WithKind("JobSet")).Obj()
	pod := func(job *batchv1.Job) *corev1.Pod {
		return wrappers.MakeIndexPod(job, job.Name+"-0", 0).Succeeded(testNow.Add(-time.Minute), reportOf(t, "s0")).
			Finalizers(v1alpha1.ResultFinalizer).Obj()
	}
	realPod, handMadePod := pod(real), pod(handMade)
	acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).ShardCount("s", 1).
		AssignJobSet("ts", "workers", 0, "0", "0").RequireResults("").Revisions("D", "m").Obj()
	f := newFixture(t, hooks{}, acct, js, real, handMade, leftOver, realPod, handMadePod)
	if _, err := f.reconcile("acct"); err != nil {
		t.Fatal(err)
	}
	st := f.account(t, "acct").Status
	if got := st.Targets[0]; got.UID != real.UID || got.RestartAttempt != 0 {
		t.Errorf("target follows UID %q attempt %d; want the JobSet's child %s attempt 0", got.UID, got.RestartAttempt, real.UID)
	}
	var recorded []types.UID
	for _, ch := range chunksOf(t, f.c) {
		for _, r := range ch.Results {
			recorded = append(recorded, r.PodUID)
		}
	}
	if len(recorded) != 1 || recorded[0] != realPod.UID {
		t.Errorf("recorded results of pods %v; want only the child's pod %s", recorded, realPod.UID)
	}
	wantCond := func(typ, status string) {
		t.Helper()
		if c := apimeta.FindStatusCondition(st.Conditions, typ); c == nil || string(c.Status) != status {
			t.Errorf("%s = %+v, want %s", typ, c, status)
		}
	}
	wantCond(v1alpha1.ConditionAssignmentValid, "True")
	wantCond(v1alpha1.ConditionShardsCovered, "True")

	r := f.reconciler()
	ctx := context.Background()
	if reqs := r.jobToAccounts(ctx, handMade); len(reqs) != 0 {
		t.Errorf("the hand-made Job wakes %v", reqs)
	}
	if reqs := r.podToAccounts(ctx, handMadePod); len(reqs) != 0 {
		t.Errorf("the hand-made Job's pod wakes %v", reqs)
	}
	if reqs := r.jobToAccounts(ctx, real); len(reqs) != 1 {
		t.Errorf("the child wakes %v, want its account", reqs)
	}
	if by, err := relations.CapturedBy(ctx, f.c, handMadePod, time.Time{}); err != nil || len(by) != 0 {
		t.Errorf("the hand-made Job's pod is captured by %v (%v); want none", by, err)
	}
}

// TestOrphanedChildWakesItsAccounts: a Job its JobSet stops controlling passes the Job
// predicate, and the update wakes the accounts of the JobSet it was a child of.
func TestOrphanedChildWakesItsAccounts(t *testing.T) {
	js := wrappers.MakeJobSet("ts", "ns").Obj()
	js.UID = "ts-uid"
	was := wrappers.MakeJob("ts-workers-0", "ns").Indexed(1).UID("child-uid").JobSetChild(js, "workers", 0, 0).Obj()
	now := was.DeepCopy()
	now.OwnerReferences = nil
	acct := wrappers.MakeBatchAccount("acct", "ns").ShardCount("s", 1).AssignJobSet("ts", "workers", 0, "0", "0").Obj()
	f := newFixture(t, hooks{}, acct)
	r := f.reconciler()
	e := event.UpdateEvent{ObjectOld: was, ObjectNew: now}
	if !jobChanged.Update(e) {
		t.Error("jobChanged ignores the Job losing its controller")
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	batched(0, r.jobToAccounts).Update(context.Background(), e, q)
	if n := queued(q, 2*time.Second); n != 1 {
		t.Errorf("%d accounts woken, want the JobSet target's", n)
	}
}
