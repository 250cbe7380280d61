package controller

import (
	"context"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestReconcileAccountsForADispatchedJob: on a MultiKueue manager the Job has no pod and
// the status Kueue copied from its worker's Job. The account covers from that status
// under the manager's Job UID, names the worker on the Workload observation and the
// admission, publishes its verdict on the manager's Workload, and never counts a result
// as lost for want of a pod it could not have seen. The same Job not dispatched (its
// pods would be here) makes the results account's covered indexes MissingResult, which
// is what the dispatched case must not do.
func TestReconcileAccountsForADispatchedJob(t *testing.T) {
	cases := []struct {
		name         string
		dispatched   bool
		results      bool
		wantCovered  string
		wantAccepted string
		wantCluster  string
	}{
		{name: "coverage account, dispatched to worker-a", dispatched: true,
			wantCovered: "True AllShardsCovered", wantAccepted: "True Accepted", wantCluster: "worker-a"},
		{name: "results account, dispatched: results pending, none lost", dispatched: true, results: true,
			wantCovered: "True AllShardsCovered", wantAccepted: "False ResultsPending", wantCluster: "worker-a"},
		{name: "results account, not dispatched, no pod left: MissingResult", results: true,
			wantCovered: "True AllShardsCovered", wantAccepted: "False MissingResult"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := jobJ(v1alpha1.ScopeCoverage)
			wl := workloadOfJ(j.Obj())
			if tc.dispatched {
				j = j.ManagedBy(multikueue.ManagedBy)
				wl = wl.DispatchedTo("worker-a")
			}
			job := j.Completed("0-1", 2).Complete(testNow).Obj()
			acct := accountOfJ()
			if tc.results {
				acct = acct.RequireResults("")
			}
			f := newFixture(t, hooks{}, acct.Obj(), job, wl.Obj())
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			st := f.account(t, "acct").Status
			if got := conditionOf(st.Conditions, v1alpha1.ConditionShardsCovered); got != tc.wantCovered {
				t.Errorf("ShardsCovered = %q, want %q", got, tc.wantCovered)
			}
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != tc.wantAccepted {
				t.Errorf("Accepted = %q, want %q", got, tc.wantAccepted)
			}
			tgt := st.Targets[0]
			if tgt.UID != "j-uid" || tgt.CompletedIndexes != "0,1" {
				t.Errorf("target identity %q completed %q, want the manager's j-uid, 0,1", tgt.UID, tgt.CompletedIndexes)
			}
			if tgt.Workload == nil || tgt.Workload.Cluster != tc.wantCluster {
				t.Errorf("workload observation %+v, want cluster %q", tgt.Workload, tc.wantCluster)
			}
			if len(tgt.Admissions) != 1 || tgt.Admissions[0].Cluster != tc.wantCluster {
				t.Errorf("admissions %+v, want one on %q", tgt.Admissions, tc.wantCluster)
			}
			var got kueue.Workload
			if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "job-j"}, &got); err != nil {
				t.Fatal(err)
			}
			if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.WorkloadConditionShardsCovered); c == nil || c.Status != "True" {
				t.Errorf("manager Workload ShardsCovered = %+v, want True", c)
			}
		})
	}
}

// TestObserveNominatedClusters: while MultiKueue dispatches a Workload, the observation
// lists the clusters it is nominated to, and names none as its cluster.
func TestObserveNominatedClusters(t *testing.T) {
	wl := wrappers.MakeWorkload("job-j", "ns").Nominated("worker-a", "worker-b").Obj()
	w := workloadObservation(wl)
	if w.Cluster != "" || len(w.NominatedClusters) != 2 || w.NominatedClusters[1] != "worker-b" {
		t.Errorf("observation %+v, want no cluster, nominated worker-a, worker-b", w)
	}
}
