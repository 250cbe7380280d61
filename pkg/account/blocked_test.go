package account

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

func TestBlocker(t *testing.T) {
	c := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason}
	}
	cases := []struct {
		name  string
		conds []metav1.Condition
		want  string // the blocking condition's type/reason, "" for none
	}{
		{name: "no status yet"},
		{name: "waiting for results is no block", conds: []metav1.Condition{
			c(v1alpha1.ConditionAssignmentValid, metav1.ConditionTrue, v1alpha1.ReasonValid),
			c(v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultsPending),
			c(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultsPending)}},
		{name: "an invalid mapping", want: v1alpha1.ConditionAssignmentValid + "/" + v1alpha1.ReasonDuplicateIndex, conds: []metav1.Condition{
			c(v1alpha1.ConditionAssignmentValid, metav1.ConditionFalse, v1alpha1.ReasonDuplicateIndex),
			c(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonTargetDeleted)}},
		{name: "a target deleted before it terminated", want: v1alpha1.ConditionAccepted + "/" + v1alpha1.ReasonTargetDeleted, conds: []metav1.Condition{
			c(v1alpha1.ConditionAssignmentValid, metav1.ConditionTrue, v1alpha1.ReasonValid),
			c(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonTargetDeleted)}},
		{name: "a rejected result", want: v1alpha1.ConditionResultsAccepted + "/" + v1alpha1.ReasonResultRejected, conds: []metav1.Condition{
			c(v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected)}},
		{name: "a result that can no longer arrive", want: v1alpha1.ConditionResultsAccepted + "/" + v1alpha1.ReasonMissingResult, conds: []metav1.Condition{
			c(v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonMissingResult)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if b := Blocker(&v1alpha1.BatchAccountStatus{Conditions: tc.conds}); b != nil {
				got = b.Type + "/" + b.Reason
			}
			if got != tc.want {
				t.Errorf("Blocker = %q, want %q", got, tc.want)
			}
		})
	}
}
