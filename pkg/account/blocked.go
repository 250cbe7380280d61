package account

import (
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// Blocker is the condition of an account's status that says it can no longer be
// Accepted without a repair or a spec change, whatever its Jobs still do: an invalid
// mapping (AssignmentValid False), a target deleted before it terminated (Accepted
// TargetDeleted), or a result rejected or no longer able to arrive (ResultsAccepted
// ResultRejected, MissingResult). nil when the status shows none. The controller's
// verdict metric and the plugin's watch both decide "blocked" by it.
func Blocker(st *v1alpha1.BatchAccountStatus) *metav1.Condition {
	if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAssignmentValid); c != nil && c.Status == metav1.ConditionFalse {
		return c
	}
	if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAccepted); c != nil && c.Reason == v1alpha1.ReasonTargetDeleted {
		return c
	}
	if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted); c != nil &&
		(c.Reason == v1alpha1.ReasonResultRejected || c.Reason == v1alpha1.ReasonMissingResult) {
		return c
	}
	return nil
}

// notTerminatedMark introduces, in the message of Terminated False TargetDeleted, the
// targets that have not terminated besides those deleted before they did
// (AwaitsTermination).
const notTerminatedMark = "; not terminated: "

// AwaitsTermination reports whether the status says a target of the batch has not
// terminated yet (a Job still running, a JobSet or TrainJob child its owner may still
// restart): Terminated is AwaitingTermination, or TargetDeleted, which names first a target
// deleted before it terminated, while it names others still to terminate.
func AwaitsTermination(st *v1alpha1.BatchAccountStatus) bool {
	c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionTerminated)
	if c == nil || c.Status == metav1.ConditionTrue {
		return false
	}
	return c.Reason == v1alpha1.ReasonAwaitingTermination ||
		c.Reason == v1alpha1.ReasonTargetDeleted && strings.Contains(c.Message, notTerminatedMark)
}

// ResultsUnjudged reports whether the status judged no recorded result: the acceptance
// rule does not compile in the controller (ResultsAccepted RuleInvalid), so no result
// stands, whatever the rule would have said of it.
func ResultsUnjudged(st *v1alpha1.BatchAccountStatus) bool {
	c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted)
	return c != nil && c.Reason == v1alpha1.ReasonRuleInvalid
}
