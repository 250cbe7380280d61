package controller

import (
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// EventActionVerdict is the action of every event batchledger emits.
const EventActionVerdict = "Verdict"

// verdictEvent is one event to emit about a verdict change.
type verdictEvent struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type string
	// Reason is <Condition><Reason>, e.g. ShardsCoveredAllShardsCovered: one event
	// series per transition, so a repeat of the same transition aggregates.
	Reason string
	// Note is <Condition>=<Status>: <message>.
	Note string
}

// expectedWaits are reasons a condition is False for while a batch makes normal
// progress; they are no cause for a Warning. TargetsNotFound is one: an account that
// requires results is created before its Jobs on purpose (so that every pod is held),
// and would otherwise open every such batch with Warnings.
var expectedWaits = map[string]bool{
	v1alpha1.ReasonTargetsNotFound:     true,
	v1alpha1.ReasonAwaitingTermination: true,
	v1alpha1.ReasonResultsPending:      true,
	v1alpha1.ReasonShardsMissing:       true,
	v1alpha1.ReasonPending:             true,
}

// accountEvents are the events for the account's verdict changes: one per condition
// whose change is news (newsworthy); never on a message-only change such as one more
// covered shard, so a batch of many shards does not flood the account's events.
func accountEvents(prev, changed []metav1.Condition) []verdictEvent {
	out := make([]verdictEvent, 0, len(changed))
	for _, c := range changed {
		if newsworthy(prev, c) {
			out = append(out, eventOf(prev, c, c.Type))
		}
	}
	return out
}

// workloadEvents are the events for a Workload: only the newsworthy changes of the
// verdicts published on Workloads (ShardsCovered and Accepted), named as the Workload
// condition is, so that an admin reading `kubectl describe workload` sees the same words
// as in its conditions.
func workloadEvents(prev, changed []metav1.Condition) []verdictEvent {
	var out []verdictEvent
	for _, c := range changed {
		if typ, ok := v1alpha1.WorkloadConditionFor(c.Type); ok && newsworthy(prev, c) {
			out = append(out, eventOf(prev, c, typ))
		}
	}
	return out
}

// startingReasons are the reasons a condition may first appear with, True, that are
// where every well-formed account starts: its mapping is valid, it requires no results.
var startingReasons = map[string]bool{
	v1alpha1.ReasonValid:              true,
	v1alpha1.ReasonResultsNotRequired: true,
}

// newsworthy reports whether a changed condition deserves an event: it turned True (a
// milestone, but not the True every well-formed account starts with), fell from True, or
// turned False for a reason that is no expected wait (a problem). A condition entering or
// moving between expected waits (TargetsNotFound, NoWorkload, Pending, ShardsMissing,
// AwaitingTermination, ResultsPending) is none: the condition itself says where the batch
// waits, and each event is a write to the API server: under the Kueue baseline a
// single-Job account cost 15.9 event writes, of which 6.1 were news. A True condition
// whose reason changed (Admitted giving way to Finished) is none either.
func newsworthy(prev []metav1.Condition, c metav1.Condition) bool {
	old := apimeta.FindStatusCondition(prev, c.Type)
	wasTrue := old != nil && old.Status == metav1.ConditionTrue
	if c.Status == metav1.ConditionTrue {
		return !wasTrue && (old != nil || !startingReasons[c.Reason])
	}
	return wasTrue || (c.Status == metav1.ConditionFalse && !expectedWaits[c.Reason])
}

// eventOf is the event of one changed condition. It is a Warning when the condition
// turns False for a reason that is no expected wait, and whenever it falls from True: a
// batch that was covered or accepted and no longer is always deserves attention.
func eventOf(prev []metav1.Condition, c metav1.Condition, typ string) verdictEvent {
	kind := corev1.EventTypeNormal
	if c.Status == metav1.ConditionFalse && (!expectedWaits[c.Reason] || apimeta.IsStatusConditionTrue(prev, c.Type)) {
		kind = corev1.EventTypeWarning
	}
	return verdictEvent{Type: kind, Reason: c.Type + c.Reason, Note: typ + "=" + string(c.Status) + ": " + c.Message}
}
