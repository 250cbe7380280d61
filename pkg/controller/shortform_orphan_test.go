package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestOrphanedShortFormDeleted: a short-form account whose object (Job, JobSet,
// TrainJob) is gone before the account observed anything of it — a JobSet or TrainJob
// deleted while Kueue kept it queued, a Job deleted at once — is deleted at its next
// reconcile: it could only wait for targets that will not come, and its TTL, counted from
// the batch's end, would never start. An account written by hand ahead of its Jobs, a
// short-form account whose object stands (in the cache or only on the API server), and one
// that recorded anything of its batch are kept. Only a Job is read from the API server (the
// cache holds only labelled ones): the manager may not get JobSets or TrainJobs there.
func TestOrphanedShortFormDeleted(t *testing.T) {
	shortForm := func(of, name string) *wrappers.BatchAccountWrapper {
		w := wrappers.MakeBatchAccount(name, "ns").UID(name+"-acct-uid").Generation(1).Shards("A", "B").
			Creation(testNow.Add(-time.Hour))
		if of != "" {
			w = w.Label(v1alpha1.LabelShortFormOf, of)
		}
		switch of {
		case "JobSet":
			return w.AssignJobSet(name, "workers", 0, "0-1", "0-1")
		case "TrainJob":
			return w.AssignTrainJob(name, "node", 0, "0-1", "0-1")
		}
		return w.AssignJob(name, "0-1", "A", "B")
	}
	queuedJobSet := wrappers.MakeJobSet("js", "ns").Suspend(true).
		ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
	cases := []struct {
		name    string
		account *v1alpha1.BatchAccount
		// cached are the objects the manager's cache (and the API server) holds; live are
		// those only the API server holds.
		cached, live []client.Object
		wantDeleted  bool
	}{
		{name: "Job deleted before the account observed it: deleted",
			account: shortForm("Job", "j").Obj(), wantDeleted: true},
		{name: "JobSet deleted while queued, no child ever observed: deleted",
			account: shortForm("JobSet", "js").Obj(), wantDeleted: true},
		{name: "TrainJob deleted while queued: deleted",
			account: shortForm("TrainJob", "tj").Obj(), wantDeleted: true},
		{name: "JobSet still queued (no child yet): kept",
			account: shortForm("JobSet", "js").Obj(), cached: []client.Object{queuedJobSet}},
		{name: "Job on the API server but not in the cache (unlabelled): kept",
			account: shortForm("Job", "j").Obj(), live: []client.Object{jobJ(v1alpha1.ScopeCoverage).Suspend(true).Obj()}},
		{name: "account written by hand ahead of its Job, TTL 0: kept",
			account: shortForm("", "j").TTLSecondsAfterFinished(0).Obj()},
		{name: "short form that recorded its Job, deleted since: kept (its TTL applies)",
			account: shortForm("Job", "j").TargetStatus(v1alpha1.TargetStatus{
				Name: "job/j", Job: "j", UID: "j-uid", Deleted: true, DeletedAt: &metav1.Time{Time: testNow.Add(-time.Minute)},
			}).Obj()},
		{name: "short form with a result recorded: kept",
			account: shortForm("Job", "j").ResultsRecorded(1).Obj()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, append([]client.Object{tc.account}, tc.cached...)...)
			m := newMetrics(prometheus.NewRegistry())
			r := f.reconciler()
			r.Metrics = m
			r.APIReader = jobsOnlyReader{newFixture(t, hooks{}, append(tc.cached, tc.live...)...).c}
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: tc.account.Name}}); err != nil {
				t.Fatal(err)
			}
			err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: tc.account.Name}, &v1alpha1.BatchAccount{})
			if deleted := apierrors.IsNotFound(err); deleted != tc.wantDeleted {
				t.Fatalf("deleted = %v (%v), want %v", deleted, err, tc.wantDeleted)
			}
			wantCollected := 0.0
			if tc.wantDeleted {
				wantCollected = 1
			}
			if got := testutil.ToFloat64(m.Collected); got != wantCollected {
				t.Errorf("batchledger_accounts_collected_total = %v, want %v", got, wantCollected)
			}
		})
	}
}

// jobsOnlyReader reads Jobs from the API server and refuses every other kind, as the API
// server refuses the manager, whose ClusterRole grants it no get of JobSets or TrainJobs.
type jobsOnlyReader struct{ client.Reader }

func (r jobsOnlyReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*batchv1.Job); !ok {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "other"}, key.Name, errors.New("no get"))
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}
