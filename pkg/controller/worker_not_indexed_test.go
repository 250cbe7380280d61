package controller

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestDispatchedChildNotIndexed: a dispatched JobSet's child Job whose template sets
// completionMode NonIndexed (JobSet allows it) completed on the worker. Its pods have no
// completion index: the account judges it as on one cluster, the mapping onto it
// invalid (AssignmentValid False NotIndexedJob), not an Indexed Job whose indexes are
// missing. So does it while worker-a is not read and the account makes it back from its
// status. An Indexed child reads as before, and so does the record of an earlier worker
// role, which does not say (as an Indexed Job).
func TestDispatchedChildNotIndexed(t *testing.T) {
	unread := multikueue.WorkerState{Configured: true, UnreachableSince: testNow.Add(-time.Minute), Err: "connection refused"}
	js := wrappers.MakeJobSet("js", "ns").Obj()
	js.UID = "worker-js-uid"
	notIndexed := wrappers.MakeJob("js-workers-1", "ns").UID("worker-c1-a0-uid").Completions(2).Parallelism(2).
		CompletionMode(batchv1.NonIndexedCompletion).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).JobSetChild(js, "workers", 1, 0).
		Completed("", 2).Complete(testNow.Add(-time.Minute)).Obj()
	for _, tc := range []struct {
		name           string
		child          *batchv1.Job
		earlier        bool // recorded by an earlier worker role
		wantValid      string
		wantNotIndexed bool
	}{
		{name: "NonIndexed", child: notIndexed, wantValid: "False " + v1alpha1.ReasonNotIndexed, wantNotIndexed: true},
		{name: "NonIndexed, recorded by an earlier worker role", child: notIndexed, earlier: true, wantValid: "True Valid"},
		{name: "Indexed", child: workerChild("js", 1, 0, "0-1"), wantValid: "True Valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newDispatchedJobSet(t, wrappers.MakeJobSet("js", "ns"), testNow.Add(-time.Hour))
			read := readWorkerA(jobSetRecords(workerChild("js", 0, 0, "0-1"), tc.child)...)
			if tc.earlier {
				read.jobs["worker-a"][1].NotIndexed = false
			}
			for _, step := range []struct {
				name    string
				workers fakeWorkers
			}{
				{name: "worker-a read", workers: read},
				{name: "worker-a not read since", workers: fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": unread}}},
			} {
				st := fx.reconcile(t, step.workers).Status
				if got := conditionOf(st.Conditions, v1alpha1.ConditionAssignmentValid); got != tc.wantValid {
					t.Errorf("%s: AssignmentValid = %q (%s), want %q", step.name, got, apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAssignmentValid).Message, tc.wantValid)
				}
				if got := st.Targets[1]; got.UID != tc.child.UID || got.NotIndexed != tc.wantNotIndexed {
					t.Errorf("%s: target %s uid %q notIndexed %v, want %s, %v", step.name, got.Name, got.UID, got.NotIndexed, tc.child.UID, tc.wantNotIndexed)
				}
			}
		})
	}
}
