package controller

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
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
	if l, ok := list.(*corev1.PodList); ok {
		var kept []corev1.Pod
		for _, p := range l.Items {
			if p.Labels[v1alpha1.LabelScope] == v1alpha1.ScopeResults {
				kept = append(kept, p)
			}
		}
		l.Items = kept
	}
	return nil
}

// unreadCache stands for the coverage scope's pod cache, which an account requiring
// results never reads.
type unreadCache struct{ cache.Cache }

// TestPreemptedJobKeepsItsPodsInSight: Kueue preempts a Job by suspending it, and the Job
// controller then clears its startTime, so its pod template may change again; its pods
// that succeeded stay (and those it is deleting may still exit 0), labelled with the
// scope of their creation: the coverage scope of an account that did not require
// results, whose webhook marked them. Raising the template to the results scope when an
// account starting to require results (or a second one that does) stamped it filed the
// Job's pods under the manager's cache, which holds only results-scope pods: once a
// reconcile stamped the template without recording those pods' results (a failed chunk
// write, an error observing another target, the signing key not loaded yet, a restart
// between the two), they were never read again, and once the Job ended their shards
// counted as MissingResult though the pods and their results were there. A Job whose pods
// ran keeps its template's scope, and its succeeded pods are read as those of a Job
// running when its account came; one that never ran is stamped as ever.
func TestPreemptedJobKeepsItsPodsInSight(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	coverage := func() *wrappers.JobWrapper {
		return wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").Suspend(true).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage)
	}
	stopping := coverage().Obj()
	stopping.Status.Terminating = ptr.To[int32](1)
	for _, tc := range []struct {
		name         string
		job          *batchv1.Job
		wantTemplate string
		// wantRecorded are the pods whose results are recorded after the second reconcile.
		wantRecorded []string
	}{
		{"preempted after index 0 succeeded", coverage().Completed("0", 1).Obj(), v1alpha1.ScopeCoverage, []string{"j-0"}},
		{"preempted while its pods stop: one may still exit 0", stopping, v1alpha1.ScopeCoverage, nil},
		{"suspended, never ran: stamped so that every pod is held", coverage().Obj(), v1alpha1.ScopeResults, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{tc.job}
			if tc.job.Status.Succeeded > 0 {
				objs = append(objs, wrappers.MakeIndexPod(tc.job, "j-0", 0).Succeeded(now.Add(-time.Hour), reportOf(t, "A")).Obj())
			}
			c := fakeClient(t, objs...)
			ba := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Revisions("D", "m").Shards("A", "B").
				AssignJob("j", "0-1", "A", "B").RequireResults("").Obj()
			r := &Reconciler{Client: resultsPodCache{c}, APIReader: c, CoveragePods: unreadCache{}, Now: func() time.Time { return now }}
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
			if got := job.Spec.Template.Labels[v1alpha1.LabelScope]; got != tc.wantTemplate {
				t.Errorf("the Job's template scope = %q, want %q", got, tc.wantTemplate)
			}
		})
	}
}
