package controller

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestDispatchedChildWithASuccessPolicy: a dispatched JobSet's child Job whose template
// has a successPolicy (index 0 is enough) is Complete on the worker with index 0 alone.
// The account reads it as on one cluster: an Indexed Job of 2 completions that succeeded
// by its successPolicy with index 1 not covered (ShardsMissing), not a Job of 1 completion
// the mapping assigns index 1 beyond (IndexOutOfRange, which says the mapping is wrong
// and finishes the account). A child without one reads as before.
func TestDispatchedChildWithASuccessPolicy(t *testing.T) {
	byPolicy := workerChild("js", 1, 0, "0")
	byPolicy.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
	byPolicy.Status.Conditions = wrappers.MakeJob("x", "ns").Complete(testNow.Add(-time.Minute)).Obj().Status.Conditions
	for _, tc := range []struct {
		name        string
		child       *batchv1.Job
		wantValid   string
		wantCovered int32
		wantMessage string // a part of ShardsCovered's message
	}{
		{name: "Complete by its successPolicy", child: byPolicy, wantValid: "True Valid", wantCovered: 3,
			wantMessage: "succeeded by its successPolicy (succeeds when indexes 0 succeeded)"},
		{name: "Complete without one", child: workerChild("js", 1, 0, "0-1"), wantValid: "True Valid", wantCovered: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newDispatchedJobSet(t, wrappers.MakeJobSet("js", "ns"), testNow.Add(-time.Hour))
			st := fx.reconcile(t, readWorkerA(jobSetRecords(workerChild("js", 0, 0, "0-1"), tc.child)...)).Status
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAssignmentValid); got != tc.wantValid {
				t.Errorf("AssignmentValid = %q (%s), want %q", got, apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAssignmentValid).Message, tc.wantValid)
			}
			if st.Shards.Covered != tc.wantCovered {
				t.Errorf("covered %d, want %d", st.Shards.Covered, tc.wantCovered)
			}
			if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionShardsCovered); c == nil || !strings.Contains(c.Message, tc.wantMessage) {
				t.Errorf("ShardsCovered %+v, want its message to say %q", c, tc.wantMessage)
			}
			if got := st.Targets[1].Completions; got != 2 {
				t.Errorf("target %s completions %d, want 2", st.Targets[1].Name, got)
			}
		})
	}
}
