package controller

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// dispatchedJobSet is a JobSet js that MultiKueue dispatched to worker-a, as the manager
// holds it: the JobSet (two workers replicas, UID js-uid, managed by MultiKueue), its
// Workload jobset-js admitted at a given time, and account acct mapping the indexes 0-1
// of workers[0] onto shards A, B and those of workers[1] onto C, D.
type dispatchedJobSet struct {
	f  *fixture
	r  *Reconciler
	js *jobsetapi.JobSet
	wl *kueue.Workload
}

// newDispatchedJobSet builds the fixture from js (without its replicatedJobs) and the
// Workload's admission time.
func newDispatchedJobSet(t *testing.T, js *wrappers.JobSetWrapper, admitted time.Time) *dispatchedJobSet {
	t.Helper()
	d := &dispatchedJobSet{js: js.ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Obj()).Obj()}
	d.js.UID, d.js.Spec.ManagedBy = "js-uid", ptr.To(multikueue.ManagedBy)
	d.wl = wrappers.MakeWorkload("jobset-js", "ns").UID("wl-uid").ForJobSet(d.js).Admitted("gpu", admitted).DispatchedTo("worker-a").Obj()
	acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B", "C", "D").Revisions("D", "m").
		AssignJobSet("js", "workers", 0, "0-1", "0-1").AssignJobSet("js", "workers", 1, "0-1", "2-3")
	d.f = newFixture(t, hooks{}, d.js, d.wl, acct.Obj())
	d.r = d.f.reconciler()
	return d
}

// reconcile reconciles acct reading the worker records w tells, and returns acct as
// written.
func (d *dispatchedJobSet) reconcile(t *testing.T, w fakeWorkers) *v1alpha1.BatchAccount {
	t.Helper()
	d.r.WorkerResults = w
	if _, err := d.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}); err != nil {
		t.Fatal(err)
	}
	return d.f.account(t, "acct")
}

// end gives the JobSet the condition typ (JobSetCompleted, JobSetFailed), as Kueue copies
// the worker's JobSet's end back.
func (d *dispatchedJobSet) end(t *testing.T, typ jobsetapi.JobSetConditionType, reason string) {
	t.Helper()
	if err := d.f.c.Get(context.Background(), client.ObjectKeyFromObject(d.js), d.js); err != nil {
		t.Fatal(err)
	}
	d.js.Status.Conditions = []metav1.Condition{{Type: string(typ), Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(testNow)}}
	if err := d.f.c.Update(context.Background(), d.js); err != nil {
		t.Fatal(err)
	}
}

// updateWorkload changes the Workload's status with change.
func (d *dispatchedJobSet) updateWorkload(t *testing.T, change func(*kueue.Workload)) {
	t.Helper()
	var w kueue.Workload
	if err := d.f.c.Get(context.Background(), client.ObjectKeyFromObject(d.wl), &w); err != nil {
		t.Fatal(err)
	}
	change(&w)
	if err := d.f.c.Status().Update(context.Background(), &w); err != nil {
		t.Fatal(err)
	}
}
