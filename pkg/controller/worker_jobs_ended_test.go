package controller

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestDispatchedChildCutShortByItsJobSetsEnd: a JobSet MultiKueue dispatched ends on the
// worker (its successPolicy met by workers[0], or Failed) while child workers[1] runs:
// JobSet deletes that child there, and Kueue deletes the worker's JobSet. The worker
// role's last record of the child says it never terminated, and stays for the records'
// retention. On the manager the child stands as on one cluster: deleted before it
// terminated, its record (identity, completed indexes) kept, its missing shard to be
// repaired, never "not terminated" for as long as the record lives. While the JobSet
// runs, the child is followed as found.
func TestDispatchedChildCutShortByItsJobSetsEnd(t *testing.T) {
	c0 := workerChild("js", 0, 0, "0-1")
	c1 := workerChild("js", 1, 0, "0")
	cases := []struct {
		name string
		// seenRunning: the account observed the child while its JobSet ran first.
		seenRunning bool
		// ended, when set, is how the JobSet ended (its condition, its reason).
		ended []string
		// then is the child as the worker role records it last, after the JobSet's end
		// reached the manager (an index finished as the JobSet ended).
		then        *batchv1.Job
		wantCovered int32
		wantDeleted bool
		wantReason  string // Terminated's
		wantMsg     string // part of Terminated's message
	}{
		{name: "JobSet runs: the child is followed", seenRunning: true, wantCovered: 3, wantReason: v1alpha1.ReasonAwaitingTermination,
			wantMsg: "jobset js workers[1]; coverage does not imply termination"},
		{name: "JobSet Completed by its successPolicy", seenRunning: true, ended: []string{string(jobsetapi.JobSetCompleted), "AllJobsCompleted"},
			wantCovered: 3, wantDeleted: true, wantReason: v1alpha1.ReasonTargetDeleted, wantMsg: "jobset js workers[1] deleted before it terminated"},
		{name: "JobSet Failed", seenRunning: true, ended: []string{string(jobsetapi.JobSetFailed), "ReachedMaxRestarts"},
			wantCovered: 3, wantDeleted: true, wantReason: v1alpha1.ReasonTargetDeleted, wantMsg: "jobset js workers[1] deleted before it terminated"},
		{name: "JobSet Completed before the account first saw the child", ended: []string{string(jobsetapi.JobSetCompleted), "AllJobsCompleted"},
			wantCovered: 3, wantDeleted: true, wantReason: v1alpha1.ReasonTargetDeleted, wantMsg: "jobset js workers[1] deleted before it terminated"},
		{name: "the child recorded Complete after its JobSet's end", seenRunning: true, ended: []string{string(jobsetapi.JobSetCompleted), "AllJobsCompleted"},
			then: workerChild("js", 1, 0, "0-1"), wantCovered: 4, wantReason: v1alpha1.ReasonComplete, wantMsg: "every target's Job recorded Complete"},
		{name: "an index recorded after its JobSet's end", seenRunning: true, ended: []string{string(jobsetapi.JobSetCompleted), "AllJobsCompleted"},
			then: wrappers.MakeJob("js-workers-1", "ns").UID(string(c1.UID)).Indexed(2).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).
				JobSetChild(wrappers.MakeJobSet("js", "ns").Obj(), "workers", 1, 0).Completed("0-1", 2).Obj(),
			wantCovered: 4, wantDeleted: true, wantReason: v1alpha1.ReasonTargetDeleted, wantMsg: "jobset js workers[1] deleted before it terminated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fx := newDispatchedJobSet(t, wrappers.MakeJobSet("js", "ns").SuccessPolicy(jobsetapi.OperatorAny, "workers"), testNow.Add(-time.Hour))
			w := readWorkerA(jobSetRecords(c0, c1)...)
			if tc.seenRunning {
				fx.reconcile(t, w)
			}
			if tc.ended != nil {
				fx.end(t, jobsetapi.JobSetConditionType(tc.ended[0]), tc.ended[1])
			}
			before := fx.reconcile(t, w)
			if tc.then != nil {
				w = readWorkerA(jobSetRecords(c0, tc.then)...)
				before = fx.reconcile(t, w)
			}
			after := fx.reconcile(t, w)
			if !equality.Semantic.DeepEqual(before.Status, after.Status) {
				t.Errorf("the status changed on a reconcile that observed nothing new:\n%+v\n%+v", before.Status, after.Status)
			}
			st := after.Status
			for _, c := range st.Conditions {
				t.Logf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
			tgt := st.Targets[1]
			if tgt.UID != c1.UID || tgt.Deleted != tc.wantDeleted {
				t.Errorf("target %s: uid %s deleted %v; want uid %s deleted %v", tgt.Name, tgt.UID, tgt.Deleted, c1.UID, tc.wantDeleted)
			}
			if st.Shards.Covered != tc.wantCovered {
				t.Errorf("covered %d, want %d", st.Shards.Covered, tc.wantCovered)
			}
			c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionTerminated)
			if c == nil || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantMsg) {
				t.Errorf("Terminated = %+v; want reason %s saying %q", c, tc.wantReason, tc.wantMsg)
			}
			for _, c := range st.Conditions {
				if strings.Contains(c.Message, "never created") {
					t.Errorf("%s says %q: the child ran on worker-a", c.Type, c.Message)
				}
			}
		})
	}
}
