package controller

import (
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	jobsetkind "batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// jobSetWith is JobSet ends with its terminal condition typ True ("" for none).
func jobSetWith(typ string) *jobset.JobSet {
	js := wrappers.MakeJobSet("ends", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(3).Obj()).Obj()
	if typ != "" {
		js.Status.Conditions = []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.NewTime(testNow)}}
	}
	return js
}

// TestReconcileOwnerEndedRestoresTheRecord: an account took a JobSet child's
// disappearance for a restart (its identity in history, the target waiting for a
// successor). When the reconcile then finds the JobSet ended (Failed, Completed, or gone)
// the child is a Job deleted before it terminated: its identity is the target's record
// again, its coverage counts, and the account says how to go on. While the JobSet runs,
// the account keeps waiting for the successor.
func TestReconcileOwnerEndedRestoresTheRecord(t *testing.T) {
	superseded := func() *v1alpha1.BatchAccount {
		ba := wrappers.MakeBatchAccount("ends", "ns").ShardCount("s", 4).AssignJobSet("ends", "workers", 2, "0-3", "0-3").Obj()
		ba.Status.Targets = []v1alpha1.TargetStatus{{Name: "jobset/ends/workers/2"}}
		ba.Status.History = []v1alpha1.SupersededIdentity{{Target: "jobset/ends/workers/2", Job: "ends-workers-2", UID: "uid-w2",
			Completions: 4, CompletedIndexes: "0", SupersededAt: metav1.NewTime(testNow.Add(-time.Minute))}}
		return ba
	}
	for _, tc := range []struct {
		name        string
		objs        []client.Object
		wantRecord  bool
		wantReason  string
		wantMessage string
	}{
		{name: "the JobSet failed", objs: []client.Object{jobSetWith(string(jobset.JobSetFailed))},
			wantRecord: true, wantReason: v1alpha1.ReasonTargetDeleted, wantMessage: "(its JobSet Failed)"},
		{name: "the JobSet completed", objs: []client.Object{jobSetWith(string(jobset.JobSetCompleted))},
			wantRecord: true, wantReason: v1alpha1.ReasonTargetDeleted, wantMessage: "(its JobSet Completed)"},
		{name: "the JobSet is gone",
			wantRecord: true, wantReason: v1alpha1.ReasonTargetDeleted, wantMessage: "(its JobSet was deleted)"},
		{name: "the JobSet runs: a restart in progress", objs: []client.Object{jobSetWith("")},
			wantReason: v1alpha1.ReasonAwaitingTermination},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, append(tc.objs, superseded())...)
			// While the JobSet runs, the account also looks for the successor again
			// (unfoundRecheck); once it ended, there is none to look for.
			want := ctrl.Result{}
			if !tc.wantRecord {
				want.RequeueAfter = MaxUnfoundRecheck
			}
			if res, err := f.reconcile("ends"); err != nil || res != want {
				t.Fatalf("reconcile = %+v, %v; want %+v", res, err, want)
			}
			st := f.account(t, "ends").Status
			tgt := st.Targets[0]
			if tc.wantRecord != (tgt.Deleted && tgt.UID == "uid-w2" && tgt.CompletedIndexes == "0" && st.Shards.Covered == 1 && len(st.History) == 0) {
				t.Errorf("target %+v, covered %d, history %d; want the record restored: %v", tgt, st.Shards.Covered, len(st.History), tc.wantRecord)
			}
			term := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionTerminated)
			if term.Reason != tc.wantReason {
				t.Errorf("Terminated = %s (%q), want %s", term.Reason, term.Message, tc.wantReason)
			}
			cov := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionShardsCovered)
			if tc.wantMessage != "" && (!strings.Contains(cov.Message, tc.wantMessage) || !strings.Contains(cov.Message, "repair")) {
				t.Errorf("ShardsCovered message %q lacks %q and the repair", cov.Message, tc.wantMessage)
			}
		})
	}
}

// TestJobSetEnding: a JobSet wakes its accounts when it ends (a terminal condition, a
// deletion starting, or gone), never for its other updates or its creation.
func TestJobSetEnding(t *testing.T) {
	running, failed := jobSetWith(""), jobSetWith(string(jobset.JobSetFailed))
	deleting := jobSetWith("")
	deleting.DeletionTimestamp = &metav1.Time{Time: testNow}
	relabelled := jobSetWith("")
	relabelled.Labels = map[string]string{"x": "y"}
	for _, tc := range []struct {
		name string
		got  bool
		want bool
	}{
		{"failed", ownerEnding(jobsetkind.Kind{}).Update(event.UpdateEvent{ObjectOld: running, ObjectNew: failed}), true},
		{"deletion starts", ownerEnding(jobsetkind.Kind{}).Update(event.UpdateEvent{ObjectOld: running, ObjectNew: deleting}), true},
		{"deleted", ownerEnding(jobsetkind.Kind{}).Delete(event.DeleteEvent{Object: running}), true},
		{"another update", ownerEnding(jobsetkind.Kind{}).Update(event.UpdateEvent{ObjectOld: running, ObjectNew: relabelled}), false},
		{"created", ownerEnding(jobsetkind.Kind{}).Create(event.CreateEvent{Object: running}), false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// TestChildTheJobSetLacksIsNeverCreated: a JobSet target naming a replicatedJob its
// JobSet does not have, or a jobIndex beyond its replicas, is a child JobSet never
// creates (replicatedJobs are immutable): the account says so, naming what the JobSet
// has, instead of waiting for it to exist.
func TestChildTheJobSetLacksIsNeverCreated(t *testing.T) {
	js := wrappers.MakeJobSet("train", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("leader").Obj()).
		ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Obj()).Obj()
	for _, tc := range []struct {
		name        string
		rj          string
		jobIndex    int32
		wantReason  string
		wantMessage string
	}{
		{name: "a misspelt replicatedJob", rj: "wrkers", wantReason: v1alpha1.ReasonShardsMissing,
			wantMessage: `jobset train wrkers[0] was never created and will not be (its JobSet has no replicatedJob "wrkers" (it has leader, workers))`},
		{name: "a jobIndex beyond the replicas", rj: "workers", jobIndex: 2, wantReason: v1alpha1.ReasonShardsMissing,
			wantMessage: `jobset train workers[2] was never created and will not be (its JobSet has 2 replicas of replicatedJob "workers", none of jobIndex 2)`},
		{name: "a child the JobSet will create", rj: "workers", jobIndex: 1, wantReason: v1alpha1.ReasonTargetsNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("acct", "ns").ShardCount("s", 2).AssignJobSet("train", tc.rj, tc.jobIndex, "0-1", "0-1").Obj()
			f := newFixture(t, hooks{}, js.DeepCopy(), ba)
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			cov := apimeta.FindStatusCondition(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionShardsCovered)
			if cov == nil || cov.Reason != tc.wantReason || !strings.Contains(cov.Message, tc.wantMessage) {
				t.Errorf("ShardsCovered = %+v; want reason %s, message containing %q", cov, tc.wantReason, tc.wantMessage)
			}
		})
	}
}
