package controller

import (
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestJobNamedChildAwaitingItsOwnerIsLookedForAgain: a Job target names a JobSet's child
// by its Job name, and the child was deleted while its JobSet ran, so the account took
// it for a restart in progress (its identity in history). Its JobSet's events wake only
// the accounts naming the JobSet, and the deleted Job sends none, so the reconcile must
// come back by itself while it waits (unfoundRecheck): else a JobSet that ends without
// creating the child again (no Kueue Workload to tell of it) leaves the account waiting
// for good. Once the JobSet ended the record stands again and nothing is awaited.
func TestJobNamedChildAwaitingItsOwnerIsLookedForAgain(t *testing.T) {
	const child = "ends-workers-2"
	for _, tc := range []struct {
		name       string
		owner      string // the JobSet's terminal condition, "" while it runs
		recreated  bool   // the restart created the child again
		wantRecord bool
		wantRetry  bool
	}{
		{name: "the JobSet runs: a restart in progress, looked for again", wantRetry: true},
		{name: "the JobSet failed: the deletion stands", owner: string(jobset.JobSetFailed), wantRecord: true},
		{name: "the restart created the child again: found, not looked for again", recreated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := jobSetWith(tc.owner)
			js.UID = "ends-uid"
			ba := wrappers.MakeBatchAccount("named", "ns").ShardCount("s", 4).AssignJobOrdinals(child, "0-3", "0-3").Obj()
			ba.Status.Targets = []v1alpha1.TargetStatus{{Name: "job/" + child}}
			ba.Status.History = []v1alpha1.SupersededIdentity{{Target: "job/" + child, Job: child, UID: "uid-w2",
				Completions: 4, CompletedIndexes: "0", SupersededAt: metav1.NewTime(testNow.Add(-time.Minute))}}
			objs := []client.Object{js, ba}
			if tc.recreated {
				objs = append(objs, wrappers.MakeJob(child, "ns").UID("uid-w2b").Indexed(4).JobSetChild(js, "workers", 2, 1).
					Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj())
			}
			f := newFixture(t, hooks{}, objs...)
			r := f.reconciler()
			gone := wrappers.MakeJob(child, "ns").UID("uid-w2").Indexed(4).JobSetChild(js, "workers", 2, 0).Completed("0", 1).Obj()
			r.deletedJobs.add(gone, testNow)
			res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ba)})
			if err != nil || (res.RequeueAfter > 0) != tc.wantRetry {
				t.Fatalf("reconcile = %+v, %v; want a recheck: %v", res, err, tc.wantRetry)
			}
			st := f.account(t, "named").Status
			tgt := st.Targets[0]
			if got := tgt.Deleted && tgt.UID == "uid-w2" && len(st.History) == 0; got != tc.wantRecord {
				t.Errorf("target %+v, history %d; want the record restored: %v", tgt, len(st.History), tc.wantRecord)
			}
			if term := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionTerminated); tc.wantRecord != (term.Reason == v1alpha1.ReasonTargetDeleted) {
				t.Errorf("Terminated = %s (%q)", term.Reason, term.Message)
			}
		})
	}
}
