package controller

import (
	"cmp"
	"context"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestAcceptedAccountPublishesNoVerdictOnARedispatchedReRun: a TrainJob MultiKueue
// dispatched to worker-a completed there and its account is Accepted. It is deleted and
// created again under the same name; its new Workload is admitted and dispatched, to
// worker-a again or to worker-b. The account follows none but the identities on its record
// (account.Final): whether or not batchledger reads worker-a's records now, the new
// Workload has run nothing of the batch and gets none of the account's conditions, least
// of all Accepted=True; the account's record keeps its identities and their Workload.
func TestAcceptedAccountPublishesNoVerdictOnARedispatchedReRun(t *testing.T) {
	ctx := context.Background()
	oldD := multikueue.Dispatch{Workload: "trainjob-tj-old", JobSet: "tj", TrainJob: "tj"}
	t0, t1 := workerChild("tj", 0, 0, "0-1"), workerChild("tj", 1, 0, "0-1")
	read := fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": {Configured: true, Synced: true}},
		jobs: map[string][]v1alpha1.WorkerJob{"worker-a": {*multikueue.NewJobRecord(t0, oldD), *multikueue.NewJobRecord(t1, oldD)}}}
	unreachable := func(worker string) WorkerResults {
		return fakeWorkers{states: map[string]multikueue.WorkerState{worker: {Configured: true,
			UnreachableSince: testNow.Add(-time.Minute), Err: "connection refused"}}}
	}
	for _, tc := range []struct {
		name string
		// worker is where the new Workload runs (worker-a unless set); after are the
		// workers' records then.
		worker string
		after  WorkerResults
		// dispatched: the new Workload is dispatched, not admitted yet.
		dispatched bool
	}{
		{name: "worker-a read", after: read},
		{name: "worker-a unreachable", after: unreachable("worker-a")},
		{name: "worker-a unreachable, the new Workload dispatched there, not admitted yet", after: unreachable("worker-a"), dispatched: true},
		{name: "on worker-b, unreachable", worker: "worker-b", after: unreachable("worker-b")},
		{name: "without --multikueue-worker-results"},
		{name: "without --multikueue-worker-results, the new Workload dispatched, not admitted yet", dispatched: true},
		{name: "worker-a not read yet (manager just restarted)", after: fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": {Configured: true}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oldTJ := wrappers.MakeTrainJob("tj", "ns", "torch-distributed").UID("tj-old").Condition(trainer.TrainJobComplete, testNow.Add(-30*time.Minute)).Obj()
			oldTJ.Spec.ManagedBy = ptr.To(multikueue.ManagedBy)
			oldWL := wrappers.MakeWorkload("trainjob-tj-old", "ns").UID("wl-old").ControlledBy(oldTJ, trainJobGVK).
				Admitted("gpu", testNow.Add(-time.Hour)).DispatchedTo("worker-a").Obj()
			acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B", "C", "D").Revisions("D", "m").
				AssignTrainJob("tj", "workers", 0, "0-1", "0-1").AssignTrainJob("tj", "workers", 1, "0-1", "2-3")
			f := newFixture(t, hooks{}, oldTJ, oldWL, acct.Obj())
			r := f.reconciler()
			wantAccepted(t, f.reconcileWorkers(t, r, read).Status, "True Accepted")
			for _, o := range []client.Object{oldWL, oldTJ} {
				if err := f.c.Delete(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			// An hour later: created again half an hour ago, admitted 20 minutes ago.
			r.Now = func() time.Time { return testNow.Add(time.Hour) }
			newTJ := wrappers.MakeTrainJob("tj", "ns", "torch-distributed").UID("tj-new").Obj()
			newTJ.CreationTimestamp = metav1.NewTime(testNow.Add(30 * time.Minute))
			newTJ.Spec.ManagedBy = ptr.To(multikueue.ManagedBy)
			w := wrappers.MakeWorkload("trainjob-tj-new", "ns").UID("wl-new").ControlledBy(newTJ, trainJobGVK)
			if !tc.dispatched {
				w = w.Admitted("gpu", testNow.Add(40*time.Minute))
			}
			newWL := w.DispatchedTo(cmp.Or(tc.worker, "worker-a")).Obj()
			for _, o := range []client.Object{newTJ, newWL} {
				if err := f.c.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			st := f.reconcileWorkers(t, r, tc.after).Status
			wantAccepted(t, st, "True Accepted")
			for _, ts := range st.Targets {
				if ts.UID != t0.UID && ts.UID != t1.UID || ts.Workload == nil || ts.Workload.UID != oldWL.UID {
					t.Errorf("target %s: identity %s under Workload %+v; want its record, under %s", ts.Name, ts.UID, ts.Workload, oldWL.Name)
				}
			}
			var wl kueue.Workload
			if err := f.c.Get(ctx, client.ObjectKeyFromObject(newWL), &wl); err != nil {
				t.Fatal(err)
			}
			for _, c := range wl.Status.Conditions {
				if v1alpha1.IsWorkloadCondition(c.Type) {
					t.Errorf("the re-run's Workload carries %s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message)
				}
			}
		})
	}
}
