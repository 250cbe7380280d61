package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/result"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
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
			wantAccount: []verdictEvent{{corev1.EventTypeNormal, "ShardsCovered",
				"ShardsCovered=True: 4/4 shards covered"}},
			wantWorkload: []verdictEvent{{corev1.EventTypeNormal, "ShardsCovered",
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
			wantAccount: []verdictEvent{{corev1.EventTypeNormal, "AssignmentValid", "AssignmentValid=True: a partition"}},
		},
		"True for another reason is no event": {
			prev:    []metav1.Condition{admitted},
			changed: []metav1.Condition{finished},
		},
		"a wait after a milestone is a fall from True: a Warning": {
			prev:        []metav1.Condition{admitted},
			changed:     []metav1.Condition{queued},
			wantAccount: []verdictEvent{{corev1.EventTypeWarning, "NoLongerAdmitted", "Admitted=False: not admitted by Kueue yet: job j"}},
		},
		"problems are Warnings; account-only conditions stay off the Workload": {
			changed: []metav1.Condition{duplicate, rejected, terminated},
			wantAccount: []verdictEvent{
				{corev1.EventTypeWarning, "AssignmentInvalid", "AssignmentValid=False: shard A assigned twice"},
				{corev1.EventTypeWarning, "NotAccepted", "Accepted=False: result of C rejected"},
				{corev1.EventTypeNormal, "Terminated", "Terminated=True: job j Complete"},
			},
			wantWorkload: []verdictEvent{
				{corev1.EventTypeWarning, "NotAccepted", "batchledger.dev/Accepted=False: result of C rejected"},
			},
		},
		"a fall from Accepted is a Warning, even for a reason that is otherwise a wait": {
			prev:         []metav1.Condition{accepted},
			changed:      []metav1.Condition{pending},
			wantAccount:  []verdictEvent{{corev1.EventTypeWarning, "NoLongerAccepted", "Accepted=False: waiting for results of A-D"}},
			wantWorkload: []verdictEvent{{corev1.EventTypeWarning, "NoLongerAccepted", "batchledger.dev/Accepted=False: waiting for results of A-D"}},
		},
		"durable-ledger reasons are Warnings": {
			changed: []metav1.Condition{
				cond(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonMissingResult, "no result for A"),
				cond(v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonTargetDeleted, "job j deleted"),
				cond(v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonRuleInvalid, "rule does not compile"),
			},
			wantAccount: []verdictEvent{
				{corev1.EventTypeWarning, "NotAccepted", "Accepted=False: no result for A"},
				{corev1.EventTypeWarning, "TargetDeleted", "Terminated=False: job j deleted"},
				{corev1.EventTypeWarning, "RuleInvalid", "ResultsAccepted=False: rule does not compile"},
			},
			wantWorkload: []verdictEvent{{corev1.EventTypeWarning, "NotAccepted", "batchledger.dev/Accepted=False: no result for A"}},
		},
		"a failed Job is named by its reason, a Workload evicted as Kueue says it": {
			prev: []metav1.Condition{admitted},
			changed: []metav1.Condition{
				cond(v1alpha1.ConditionTerminated, metav1.ConditionTrue, v1alpha1.ReasonTargetFailed, "job j Failed (BackoffLimitExceeded)"),
				cond(v1alpha1.ConditionAdmitted, metav1.ConditionFalse, v1alpha1.ReasonEvicted, "evicted by Kueue: job j"),
			},
			wantAccount: []verdictEvent{
				{corev1.EventTypeNormal, "TargetFailed", "Terminated=True: job j Failed (BackoffLimitExceeded)"},
				{corev1.EventTypeWarning, "Evicted", "Admitted=False: evicted by Kueue: job j"},
			},
		},
		"a problem copied by Accepted is NotAccepted there, the cause on its own condition": {
			changed: []metav1.Condition{
				cond(v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected, "result of C rejected"),
				rejected,
				cond(v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid, "by index only"),
			},
			wantAccount: []verdictEvent{
				{corev1.EventTypeWarning, "ResultRejected", "ResultsAccepted=False: result of C rejected"},
				{corev1.EventTypeWarning, "NotAccepted", "Accepted=False: result of C rejected"},
				{corev1.EventTypeWarning, "ShardsNotCovered", "ShardsCovered=False: by index only"},
			},
			wantWorkload: []verdictEvent{
				{corev1.EventTypeWarning, "NotAccepted", "batchledger.dev/Accepted=False: result of C rejected"},
				{corev1.EventTypeWarning, "ShardsNotCovered", "batchledger.dev/ShardsCovered=False: by index only"},
			},
		},
		"a Job deleted after covering its shards terminates it plainly": {
			changed:     []metav1.Condition{cond(v1alpha1.ConditionTerminated, metav1.ConditionTrue, v1alpha1.ReasonTargetDeleted, "job j deleted")},
			wantAccount: []verdictEvent{{corev1.EventTypeNormal, "Terminated", "Terminated=True: job j deleted"}},
		},
		"accepted": {
			changed:      []metav1.Condition{accepted},
			wantAccount:  []verdictEvent{{corev1.EventTypeNormal, "Accepted", "Accepted=True: 4/4 shards accepted"}},
			wantWorkload: []verdictEvent{{corev1.EventTypeNormal, "Accepted", "batchledger.dev/Accepted=True: 4/4 shards accepted"}},
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

// TestEventReasonsOneToOne: no two conditions share an event reason (whatever their
// status and reason), since the recorder folds events of one reason on one object
// into a series that keeps only the first note.
func TestEventReasonsOneToOne(t *testing.T) {
	reasons := []string{
		v1alpha1.ReasonValid, v1alpha1.ReasonAssignmentInvalid, v1alpha1.ReasonDuplicateShard, v1alpha1.ReasonAdmitted,
		v1alpha1.ReasonFinished, v1alpha1.ReasonPending, v1alpha1.ReasonEvicted, v1alpha1.ReasonAPINotServed,
		v1alpha1.ReasonTargetDeleted, v1alpha1.ReasonAllShardsCovered, v1alpha1.ReasonComplete, v1alpha1.ReasonTargetFailed,
		v1alpha1.ReasonAllResultsAccepted, v1alpha1.ReasonResultRejected, v1alpha1.ReasonMissingResult,
		v1alpha1.ReasonRuleInvalid, v1alpha1.ReasonAccepted,
	}
	type kind struct{ condition, change string }
	owner := map[string]kind{}
	for typ := range verdictWords {
		for _, reason := range reasons {
			for _, status := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse} {
				for _, wasTrue := range []bool{false, true} {
					if wasTrue && status == metav1.ConditionTrue {
						continue
					}
					var prev []metav1.Condition
					change := "turned " + string(status)
					if wasTrue {
						prev = []metav1.Condition{cond(typ, metav1.ConditionTrue, "X", "")}
						change = "fell to False"
					}
					got := eventReason(prev, cond(typ, status, reason, ""))
					if status == metav1.ConditionFalse && !wasTrue && !ownReasons[typ][reason] {
						change = "problem"
					}
					if status == metav1.ConditionTrue && !ownReasons[typ][reason] {
						change = "milestone"
					}
					k := kind{typ, change}
					if ownReasons[typ][reason] {
						k = kind{typ, reason}
					}
					if o, seen := owner[got]; seen && o.condition != typ {
						t.Errorf("reason %s is both %v and %v", got, o, k)
					}
					owner[got] = k
				}
			}
		}
	}
}

// TestVerdictEventNotesFitTheAPI: a condition message may be up to 32 KiB, an event's
// note at most maxEventNote bytes (the API server refuses a longer event). A result that
// claims a shard of a long name, or fails a long rule, makes the ResultsAccepted and
// Accepted messages long; their Warnings, on the account and on the Workload, must still
// be events the API server takes, not be dropped.
func TestVerdictEventNotesFitTheAPI(t *testing.T) {
	longClaim, err := result.Encode(result.Report{Shard: strings.Repeat("B", 2000), InputRevision: "D", ModelRevision: "m-2026-11",
		Digest: "sha256:B", Records: 10, Valid: 10})
	if err != nil {
		t.Fatal(err)
	}
	failingB, err := result.Encode(result.Report{Shard: "B", InputRevision: "D", ModelRevision: "m-2026-11",
		Digest: "sha256:B", Records: 10, Valid: 7})
	if err != nil {
		t.Fatal(err)
	}
	longRule := "result.valid == result.records" + strings.Repeat(" && result.records >= 0", 60)
	for _, tc := range []struct {
		name, rule, msg1 string
	}{
		{name: "a claim of a long shard name", rule: "result.valid == result.records", msg1: longClaim},
		{name: "a long rule not met", rule: longRule, msg1: failingB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
			pod0 := wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-2*time.Minute), report(t, "A")).Obj()
			pod1 := wrappers.MakeIndexPod(j, "j-1", 1).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), tc.msg1).Obj()
			f := newFixture(t, hooks{}, accountOfJ().RequireResults(tc.rule).Obj(), j, workloadOfJ(j).Obj(), pod0, pod1)
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			if got := conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionAccepted); got != "False "+v1alpha1.ReasonResultRejected {
				t.Fatalf("Accepted = %q, want False %s", got, v1alpha1.ReasonResultRejected)
			}
			warned := false
			for _, e := range f.events {
				warned = warned || e.Type == corev1.EventTypeWarning && e.Kind == "Workload"
				if len(e.Note) > maxEventNote {
					t.Errorf("%s %s event on %s %s: note of %d bytes, over the API server's %d", e.Type, e.Reason, e.Kind, e.Name, len(e.Note), maxEventNote)
				}
			}
			if !warned {
				t.Errorf("no Warning on the Workload; events %+v", f.events)
			}
		})
	}
}
