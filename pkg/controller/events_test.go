package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

func cond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}

// TestVerdictEvents: milestones are Normal events, problems and falls from True are
// Warnings, and expected waits, the start every account has and a True condition's new
// reason are no events; only ShardsCovered and Accepted reach the Workload.
func TestVerdictEvents(t *testing.T) {
	covered := cond(v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered, "4/4 shards covered")
	missing := cond(v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, "3/4 shards covered; missing D = job j index 3")
	duplicate := cond(v1alpha1.ConditionAssignmentValid, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid, "shard A assigned twice")
	pending := cond(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultsPending, "waiting for results of A-D")
	rejected := cond(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected, "result of C rejected")
	accepted := cond(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "4/4 shards accepted")
	queued := cond(v1alpha1.ConditionAdmitted, metav1.ConditionFalse, v1alpha1.ReasonPending, "not admitted by Kueue yet: job j")
	notYet := cond(v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonTargetsNotFound, "job j not found")
	terminated := cond(v1alpha1.ConditionTerminated, metav1.ConditionTrue, v1alpha1.ReasonComplete, "job j Complete")
	valid := cond(v1alpha1.ConditionAssignmentValid, metav1.ConditionTrue, v1alpha1.ReasonValid, "a partition")
	notRequired := cond(v1alpha1.ConditionResultsAccepted, metav1.ConditionTrue, v1alpha1.ReasonResultsNotRequired, "no results required")
	admitted := cond(v1alpha1.ConditionAdmitted, metav1.ConditionTrue, v1alpha1.ReasonAdmitted, "admitted")
	finished := cond(v1alpha1.ConditionAdmitted, metav1.ConditionTrue, v1alpha1.ReasonFinished, "finished")

	cases := map[string]struct {
		prev         []metav1.Condition
		changed      []metav1.Condition
		wantAccount  []verdictEvent
		wantWorkload []verdictEvent
	}{
		"no change, no event": {},
		"coverage complete: Normal on both": {
			changed: []metav1.Condition{covered},
			wantAccount: []verdictEvent{{corev1.EventTypeNormal, "ShardsCoveredAllShardsCovered",
				"ShardsCovered=True: 4/4 shards covered"}},
			wantWorkload: []verdictEvent{{corev1.EventTypeNormal, "ShardsCoveredAllShardsCovered",
				"batchledger.dev/ShardsCovered=True: 4/4 shards covered"}},
		},
		"expected waits are no events: the conditions say where the batch waits": {
			changed: []metav1.Condition{missing, pending, queued, notYet},
		},
		"the True every account starts with is no event, unless it follows a problem": {
			changed: []metav1.Condition{valid, notRequired},
		},
		"a mapping fixed is an event": {
			prev:        []metav1.Condition{duplicate},
			changed:     []metav1.Condition{valid},
			wantAccount: []verdictEvent{{corev1.EventTypeNormal, "AssignmentValidValid", "AssignmentValid=True: a partition"}},
		},
		"True for another reason is no event": {
			prev:    []metav1.Condition{admitted},
			changed: []metav1.Condition{finished},
		},
		"a wait after a milestone is a fall from True: a Warning": {
			prev:        []metav1.Condition{admitted},
			changed:     []metav1.Condition{queued},
			wantAccount: []verdictEvent{{corev1.EventTypeWarning, "AdmittedPending", "Admitted=False: not admitted by Kueue yet: job j"}},
		},
		"problems are Warnings; account-only conditions stay off the Workload": {
			changed: []metav1.Condition{duplicate, rejected, terminated},
			wantAccount: []verdictEvent{
				{corev1.EventTypeWarning, "AssignmentValidAssignmentInvalid", "AssignmentValid=False: shard A assigned twice"},
				{corev1.EventTypeWarning, "AcceptedResultRejected", "Accepted=False: result of C rejected"},
				{corev1.EventTypeNormal, "TerminatedComplete", "Terminated=True: job j Complete"},
			},
			wantWorkload: []verdictEvent{
				{corev1.EventTypeWarning, "AcceptedResultRejected", "batchledger.dev/Accepted=False: result of C rejected"},
			},
		},
		"a fall from Accepted is a Warning, even for a reason that is otherwise a wait": {
			prev:         []metav1.Condition{accepted},
			changed:      []metav1.Condition{pending},
			wantAccount:  []verdictEvent{{corev1.EventTypeWarning, "AcceptedResultsPending", "Accepted=False: waiting for results of A-D"}},
			wantWorkload: []verdictEvent{{corev1.EventTypeWarning, "AcceptedResultsPending", "batchledger.dev/Accepted=False: waiting for results of A-D"}},
		},
		"durable-ledger reasons are Warnings": {
			changed: []metav1.Condition{
				cond(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonMissingResult, "no result for A"),
				cond(v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonTargetDeleted, "job j deleted"),
				cond(v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonRuleInvalid, "rule does not compile"),
			},
			wantAccount: []verdictEvent{
				{corev1.EventTypeWarning, "AcceptedMissingResult", "Accepted=False: no result for A"},
				{corev1.EventTypeWarning, "TerminatedTargetDeleted", "Terminated=False: job j deleted"},
				{corev1.EventTypeWarning, "ResultsAcceptedRuleInvalid", "ResultsAccepted=False: rule does not compile"},
			},
			wantWorkload: []verdictEvent{{corev1.EventTypeWarning, "AcceptedMissingResult", "batchledger.dev/Accepted=False: no result for A"}},
		},
		"accepted": {
			changed:      []metav1.Condition{accepted},
			wantAccount:  []verdictEvent{{corev1.EventTypeNormal, "AcceptedAccepted", "Accepted=True: 4/4 shards accepted"}},
			wantWorkload: []verdictEvent{{corev1.EventTypeNormal, "AcceptedAccepted", "batchledger.dev/Accepted=True: 4/4 shards accepted"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantAccount, accountEvents(tc.prev, tc.changed), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("account events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWorkload, workloadEvents(tc.prev, tc.changed), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("workload events (-want +got):\n%s", diff)
			}
		})
	}
}
