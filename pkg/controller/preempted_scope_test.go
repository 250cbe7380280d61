package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// resultsPodCache is the manager's cache over a fake API server as it holds pods: only
// those of the results scope (CacheOptions), in every phase.
type resultsPodCache struct{ client.Client }

func (c resultsPodCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if _, ok := list.(*corev1.PodList); ok {
		return keepScope(list, v1alpha1.ScopeResults)
	}
	return nil
}

// coveragePodCache stands for the cache of succeeded coverage pods over a fake API
// server: the metadata of the coverage scope's pods alone.
type coveragePodCache struct {
	cache.Cache
	reader client.Reader
}

func (c coveragePodCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.reader.List(ctx, list, opts...); err != nil {
		return err
	}
	if _, ok := list.(*metav1.PartialObjectMetadataList); ok {
		return keepScope(list, v1alpha1.ScopeCoverage)
	}
	return nil
}

// keepScope keeps in list only the objects labelled with scope, as a cache selecting
// that scope would hold them.
func keepScope(list client.ObjectList, scope string) error {
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return err
	}
	kept := slices.DeleteFunc(items, func(o runtime.Object) bool {
		return o.(client.Object).GetLabels()[v1alpha1.LabelScope] != scope
	})
	return apimeta.SetList(list, kept)
}

// TestPreemptedJobKeepsItsPodsInSight: Kueue preempts a Job by suspending it, and the Job
// controller then clears its startTime, so its pod template may change again; its pods
// that succeeded stay (and those it is deleting may still exit 0), labelled with the
// scope of their creation: the coverage scope of an account that did not require
// results, whose webhook marked them. An account requiring results raises the template
// to the results scope all the same, so that the pods the Job runs once admitted again
// are held by the result finalizer (a Job deleted by its TTL, pod GC, the controller
// down when they end: none of their results is lost); the manager's cache holds only
// those, so the pods of the coverage scope that ran before are read beside them, on
// every reconcile, not only on the one that raised the template (whose chunk write may
// have failed, or the manager stopped before it).
func TestPreemptedJobKeepsItsPodsInSight(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	coverage := func() *wrappers.JobWrapper {
		return wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").Suspend(true).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage)
	}
	stopping := coverage().Obj()
	stopping.Status.Terminating = ptr.To[int32](1)
	earlier := func(job *batchv1.Job) *corev1.Pod {
		return wrappers.MakeIndexPod(job, "j-0", 0).Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
			Succeeded(now.Add(-time.Hour), reportOf(t, "A")).Obj()
	}
	later := func(job *batchv1.Job) *corev1.Pod {
		return wrappers.MakeIndexPod(job, "j-1", 1).Label(v1alpha1.LabelScope, v1alpha1.ScopeResults).
			Finalizers(v1alpha1.ResultFinalizer).Succeeded(now.Add(-time.Minute), reportOf(t, "B")).Obj()
	}
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		// pods are the Job's pods, made from it.
		pods []func(*batchv1.Job) *corev1.Pod
		// wantRecorded are the pods whose results the second reconcile records.
		wantRecorded []string
	}{
		{"preempted after index 0 succeeded", coverage().Completed("0", 1).Obj(),
			[]func(*batchv1.Job) *corev1.Pod{earlier}, []string{"j-0"}},
		{"admitted again, index 1 succeeded in the results scope: both read", coverage().Completed("0,1", 2).Obj(),
			[]func(*batchv1.Job) *corev1.Pod{earlier, later}, []string{"j-0", "j-1"}},
		{"preempted while its pods stop: one may still exit 0", stopping, nil, nil},
		{"suspended, never ran", coverage().Obj(), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{tc.job}
			for _, pod := range tc.pods {
				objs = append(objs, pod(tc.job))
			}
			c := fakeClient(t, objs...)
			ba := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Revisions("D", "m").Shards("A", "B").
				AssignJob("j", "0-1", "A", "B").RequireResults("").Obj()
			r := &Reconciler{Client: resultsPodCache{c}, APIReader: c, CoveragePods: coveragePodCache{reader: c}, Now: func() time.Time { return now }}
			// The first reconcile observes and stamps, and records nothing: its chunk write
			// failed, or the manager stopped before it.
			if _, _, err := r.observeAccount(context.Background(), ba, account.Compile(ba.Namespace, &ba.Spec)); err != nil {
				t.Fatal(err)
			}
			results, _ := captureWith(t, r, ba)
			recorded := sets.New[string]()
			for _, res := range results {
				recorded.Insert(res.Pod)
			}
			if !recorded.Equal(sets.New(tc.wantRecorded...)) {
				t.Errorf("recorded the results of %v, want %v", sets.List(recorded), tc.wantRecorded)
			}
			var job batchv1.Job
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(tc.job), &job); err != nil {
				t.Fatal(err)
			}
			if got := job.Spec.Template.Labels[v1alpha1.LabelScope]; got != v1alpha1.ScopeResults {
				t.Errorf("the Job's template scope = %q, want %q: the pods it runs next are held", got, v1alpha1.ScopeResults)
			}
		})
	}
}

// TestResumedChildReadsItsEarlierPods: a JobSet Kueue preempted after its child's pods ran
// has its template raised to the results scope, which JobSet merges into the child as it
// resumes it: the child's pods that ran before keep the coverage scope and are read
// beside those it runs next, which the manager's cache holds.
func TestResumedChildReadsItsEarlierPods(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	js := wrappers.MakeJobSet("js", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(1).Obj()).Obj()
	js.UID = "js-uid"
	child := wrappers.MakeJob("js-workers-0", "ns").Indexed(2).UID("c-uid").JobSetChild(js, "workers", 0, 0).
		PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).Completed("0,1", 2).Obj()
	earlier := wrappers.MakeIndexPod(child, "c-0", 0).Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
		Succeeded(now.Add(-time.Hour), reportOf(t, "A")).Obj()
	later := wrappers.MakeIndexPod(child, "c-1", 1).Finalizers(v1alpha1.ResultFinalizer).
		Succeeded(now.Add(-time.Minute), reportOf(t, "B")).Obj()
	for _, tc := range []struct {
		name         string
		pods         []client.Object
		wantRecorded []string
	}{
		{"the pods of both scopes", []client.Object{earlier, later}, []string{"c-0", "c-1"}},
		{"only the resumed child's pods", []client.Object{later}, []string{"c-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeClient(t, append([]client.Object{js, child}, tc.pods...)...)
			ba := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Revisions("D", "m").Shards("A", "B").
				AssignJobSet("js", "workers", 0, "0-1", "0-1").RequireResults("").Obj()
			r := &Reconciler{Client: resultsPodCache{c}, APIReader: c, CoveragePods: coveragePodCache{reader: c}, Now: func() time.Time { return now }}
			results, _ := captureWith(t, r, ba)
			recorded := sets.New[string]()
			for _, res := range results {
				recorded.Insert(res.Pod)
			}
			if !recorded.Equal(sets.New(tc.wantRecorded...)) {
				t.Errorf("recorded the results of %v, want %v", sets.List(recorded), tc.wantRecorded)
			}
		})
	}
}

// TestRaisedJobCountsItsEarlierPodsForCoverage: a Job Kueue preempted after a pod of it
// succeeded in the coverage scope had its template raised to the results scope by an
// account requiring results. An account of the same Job that counts coverage only reads
// the manager's cache for a results-scope Job, which holds none of the pods that ran
// before: their successes must still be seen (attempts, a success the Job controller
// has yet to count), as they were before the raise, from the coverage pods' cache.
func TestRaisedJobCountsItsEarlierPodsForCoverage(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	raised := wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).
		Label(v1alpha1.LabelScope, v1alpha1.ScopeResults).Completed("0,1", 2).Obj()
	earlier := wrappers.MakeIndexPod(raised, "j-0", 0).Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
		Succeeded(now.Add(-time.Hour), "").Obj()
	again := wrappers.MakeIndexPod(raised, "j-0b", 0).Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
		Succeeded(now.Add(-50*time.Minute), "").Obj()
	later := wrappers.MakeIndexPod(raised, "j-1", 1).Label(v1alpha1.LabelScope, v1alpha1.ScopeResults).
		Finalizers(v1alpha1.ResultFinalizer).Succeeded(now.Add(-time.Minute), "").Obj()
	other := wrappers.MakeJob("o", "ns").Indexed(2).UID("o-uid").Obj()
	foreign := wrappers.MakeIndexPod(other, "o-0", 0).Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
		Succeeded(now.Add(-time.Hour), "").Obj()
	for _, tc := range []struct {
		name string
		pods []client.Object
		want []string
	}{
		{"the pods of both scopes", []client.Object{earlier, later}, []string{"j-0", "j-1"}},
		{"an index's two successes before the raise", []client.Object{earlier, again, later}, []string{"j-0", "j-0b", "j-1"}},
		{"only the pods run since", []client.Object{later}, []string{"j-1"}},
		{"another Job's coverage pod is not its", []client.Object{later, foreign}, []string{"j-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeClient(t, append([]client.Object{raised, other}, tc.pods...)...)
			ba := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Revisions("D", "m").Shards("A", "B").
				AssignJob("j", "0-1", "A", "B").Obj()
			r := &Reconciler{Client: resultsPodCache{c}, APIReader: c, CoveragePods: coveragePodCache{reader: c}, Now: func() time.Time { return now }}
			obs, _, err := r.observeAccount(context.Background(), ba, account.Compile(ba.Namespace, &ba.Spec))
			if err != nil {
				t.Fatal(err)
			}
			seen := sets.New[string]()
			uids := map[string]string{"j-0": string(earlier.UID), "j-0b": string(again.UID), "j-1": string(later.UID), "o-0": string(foreign.UID)}
			for _, o := range obs {
				for _, a := range o.SuccessfulPods {
					for name, uid := range uids {
						if uid == string(a.UID) {
							seen.Insert(name)
						}
					}
				}
			}
			if !seen.Equal(sets.New(tc.want...)) {
				t.Errorf("successful pods %v, want %v", sets.List(seen), tc.want)
			}
		})
	}
}
