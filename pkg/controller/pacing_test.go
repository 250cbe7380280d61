package controller

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// statusOf is an account status with the given covered count and conditions
// ("Type=Status/Reason").
func statusOf(covered int32, conds ...metav1.Condition) *v1alpha1.BatchAccountStatus {
	return &v1alpha1.BatchAccountStatus{Shards: v1alpha1.ShardSummary{Total: 2, Covered: covered}, Conditions: conds}
}

func condition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason}
}

// TestWaitingOnly: an account status waits only when it changes nothing but which wait
// the account is in; coverage, a milestone, a fall from True and a problem are written at
// once.
func TestWaitingOnly(t *testing.T) {
	const (
		T = metav1.ConditionTrue
		F = metav1.ConditionFalse
		U = metav1.ConditionUnknown
	)
	valid := condition(v1alpha1.ConditionAssignmentValid, T, v1alpha1.ReasonValid)
	noWorkload := condition(v1alpha1.ConditionAdmitted, U, v1alpha1.ReasonNoWorkload)
	notFound := condition(v1alpha1.ConditionAdmitted, F, v1alpha1.ReasonTargetsNotFound)
	pending := condition(v1alpha1.ConditionAdmitted, F, v1alpha1.ReasonPending)
	admitted := condition(v1alpha1.ConditionAdmitted, T, v1alpha1.ReasonAdmitted)
	evicted := condition(v1alpha1.ConditionAdmitted, F, v1alpha1.ReasonEvicted)
	missing := condition(v1alpha1.ConditionShardsCovered, F, v1alpha1.ReasonShardsMissing)
	covered := condition(v1alpha1.ConditionShardsCovered, T, v1alpha1.ReasonAllShardsCovered)
	invalid := condition(v1alpha1.ConditionAssignmentValid, F, v1alpha1.ReasonDuplicateShard)
	notRequired := condition(v1alpha1.ConditionResultsAccepted, T, v1alpha1.ReasonResultsNotRequired)
	cases := []struct {
		name       string
		prev, next *v1alpha1.BatchAccountStatus
		changed    []metav1.Condition
		want       bool
	}{
		{"the first status: a new account shows at once where it stands", statusOf(0), statusOf(0, valid, notFound, missing, notRequired),
			[]metav1.Condition{valid, notFound, missing, notRequired}, false},
		{"a condition that was not there", statusOf(0, valid, notFound, missing), statusOf(0, valid, notFound, missing, notRequired),
			[]metav1.Condition{notRequired}, false},
		{"the Jobs appeared, their Workloads not yet", statusOf(0, valid, notFound, missing), statusOf(0, valid, noWorkload, missing),
			[]metav1.Condition{noWorkload}, true},
		{"the Workloads appeared, pending", statusOf(0, valid, noWorkload, missing), statusOf(0, valid, pending, missing),
			[]metav1.Condition{pending}, true},
		{"only observations of the targets changed", statusOf(0, valid, pending, missing), statusOf(0, valid, pending, missing),
			nil, true},
		{"admitted: a step towards the verdict", statusOf(0, valid, pending, missing), statusOf(0, valid, admitted, missing),
			[]metav1.Condition{admitted}, true},
		{"all shards covered: a milestone", statusOf(2, valid, admitted, missing), statusOf(2, valid, admitted, covered),
			[]metav1.Condition{covered}, false},
		{"evicted: a fall from True", statusOf(0, valid, admitted, missing), statusOf(0, valid, evicted, missing),
			[]metav1.Condition{evicted}, false},
		{"evicted while pending: a problem", statusOf(0, valid, pending, missing), statusOf(0, valid, evicted, missing),
			[]metav1.Condition{evicted}, false},
		{"a shard covered", statusOf(0, valid, admitted, missing), statusOf(1, valid, admitted, missing),
			nil, false},
		{"all shards covered", statusOf(1, valid, admitted, missing), statusOf(2, valid, admitted, covered),
			[]metav1.Condition{covered}, false},
		{"an invalid assignment", statusOf(0, valid, pending, missing), statusOf(0, invalid, pending, missing),
			[]metav1.Condition{invalid}, false},
		{"a result verdict", statusOf(0, valid, pending, missing),
			func() *v1alpha1.BatchAccountStatus {
				s := statusOf(0, valid, pending, missing)
				s.Results.Rejected = 1
				return s
			}(), nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := waitingOnly(tc.prev, tc.next, tc.changed); got != tc.want {
				t.Errorf("waitingOnly = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAwaitingCompletion: a status waits for the Job controller's Complete only when a
// Job met its success criteria without it, the account has a status already, and nothing
// in the change is a problem or a fall from True.
func TestAwaitingCompletion(t *testing.T) {
	const (
		T = metav1.ConditionTrue
		F = metav1.ConditionFalse
	)
	valid := condition(v1alpha1.ConditionAssignmentValid, T, v1alpha1.ReasonValid)
	admitted := condition(v1alpha1.ConditionAdmitted, T, v1alpha1.ReasonAdmitted)
	evicted := condition(v1alpha1.ConditionAdmitted, F, v1alpha1.ReasonEvicted)
	missing := condition(v1alpha1.ConditionShardsCovered, F, v1alpha1.ReasonShardsMissing)
	covered := condition(v1alpha1.ConditionShardsCovered, T, v1alpha1.ReasonAllShardsCovered)
	rejected := condition(v1alpha1.ConditionResultsAccepted, F, v1alpha1.ReasonResultRejected)
	pendingResults := condition(v1alpha1.ConditionResultsAccepted, F, v1alpha1.ReasonResultsPending)
	withTarget := func(s *v1alpha1.BatchAccountStatus, criteriaMet bool, terminal string) *v1alpha1.BatchAccountStatus {
		s.Targets = []v1alpha1.TargetStatus{{Name: "job/j", SuccessCriteriaMet: criteriaMet, Terminal: terminal}}
		return s
	}
	cases := []struct {
		name       string
		prev, next *v1alpha1.BatchAccountStatus
		changed    []metav1.Condition
		want       bool
	}{
		{"all covered, success criteria met, Complete to come", statusOf(1, valid, admitted, missing),
			withTarget(statusOf(2, valid, admitted, covered), true, ""), []metav1.Condition{covered}, true},
		{"all covered, the Job's criteria not met yet", statusOf(1, valid, admitted, missing),
			withTarget(statusOf(2, valid, admitted, covered), false, ""), []metav1.Condition{covered}, false},
		{"Complete recorded", statusOf(2, valid, admitted, covered),
			withTarget(statusOf(2, valid, admitted, covered), true, "Complete"), nil, false},
		{"the account's first status", statusOf(0),
			withTarget(statusOf(2, valid, admitted, covered), true, ""), []metav1.Condition{valid, admitted, covered}, false},
		{"a fall from True besides", statusOf(1, valid, admitted, missing),
			withTarget(statusOf(2, valid, evicted, covered), true, ""), []metav1.Condition{evicted, covered}, false},
		{"a rejected result besides", statusOf(1, valid, admitted, missing, pendingResults),
			withTarget(statusOf(2, valid, admitted, covered, rejected), true, ""), []metav1.Condition{covered, rejected}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := awaitingCompletion(tc.prev, tc.next, tc.changed); got != tc.want {
				t.Errorf("awaitingCompletion = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReconcileWaitsOnlyForWaits: with WaitingStatusDelay, a new account's first status
// is written at once; the steps that follow on its way to the verdict (its Job's
// Workload appearing, Kueue admitting it) wait, and go in one write with what comes
// within the delay: the Workload's appearance alone once the delay has passed, the
// admission with the first covered shard, which is written at once. The last shard,
// covered with the Job's SuccessCriteriaMet, waits for its Complete, and both go in one
// write.
func TestReconcileWaitsOnlyForWaits(t *testing.T) {
	const delay = 10 * time.Second
	j := jobJ(v1alpha1.ScopeCoverage).Suspend(true).ResourceVersion("").Obj()
	f := newFixture(t, hooks{}, accountOfJ().Obj())
	at := testNow
	r := f.reconciler()
	r.WaitingStatusDelay = delay
	r.Now = func() time.Time { return at }
	create := func(obj client.Object) func() {
		return func() {
			if err := f.c.Create(context.Background(), obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps := []struct {
		name        string
		after       time.Duration
		change      func()
		wantWrites  int
		wantRequeue time.Duration
		// wantAdmitted, wantCovered and wantTerminated are the stored Admitted,
		// ShardsCovered and Terminated conditions ("" before the first write; the last two
		// checked when set).
		wantAdmitted, wantCovered, wantTerminated string
	}{
		{name: "the account and its Job: the first status, at once", change: create(j), wantWrites: 1,
			wantAdmitted: "Unknown NoWorkload"},
		{name: "the Workload appears, pending: waits", after: 500 * time.Millisecond,
			change: create(wrappers.MakeWorkload("job-j", "ns").UID("wl-uid").ForJob(j).Obj()), wantRequeue: delay,
			wantAdmitted: "Unknown NoWorkload"},
		{name: "still waiting", after: 4 * time.Second, wantRequeue: 6 * time.Second, wantAdmitted: "Unknown NoWorkload"},
		{name: "the delay has passed: one write of where it stands", after: 6 * time.Second, wantWrites: 1,
			wantAdmitted: "False Pending"},
		{name: "admitted: waits", after: 100 * time.Millisecond,
			change: func() {
				writeStatus(t, f.c, wrappers.MakeWorkload("job-j", "ns").UID("wl-uid").ForJob(j).Admitted("gpu", at).Obj())
			},
			wantRequeue: delay, wantAdmitted: "False Pending"},
		{name: "a shard covered: written at once, with the admission", after: 500 * time.Millisecond,
			change: func() {
				writeStatus(t, f.c, jobJ(v1alpha1.ScopeCoverage).Suspend(false).StartTime(at).Completed("0", 1).Obj())
			},
			wantWrites: 1, wantAdmitted: "True Admitted"},
		{name: "the last shard covered, success criteria met: waits for Complete", after: 5 * time.Second,
			change: func() {
				writeStatus(t, f.c, jobJ(v1alpha1.ScopeCoverage).Suspend(false).StartTime(at).Completed("0-1", 2).
					Condition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, at).Obj())
			},
			wantRequeue: delay, wantAdmitted: "True Admitted", wantCovered: "False ShardsMissing"},
		{name: "Complete: coverage and termination in one write", after: time.Second,
			change: func() {
				writeStatus(t, f.c, jobJ(v1alpha1.ScopeCoverage).Suspend(false).StartTime(at).Completed("0-1", 2).Complete(at).Obj())
			},
			wantWrites: 1, wantAdmitted: "True Finished", wantCovered: "True AllShardsCovered", wantTerminated: "True Complete"},
	}
	for _, s := range steps {
		at = at.Add(s.after)
		if s.change != nil {
			s.change()
		}
		f.reset()
		res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := len(f.writesOf("status-update")); got != s.wantWrites {
			t.Errorf("%s: %d status writes, want %d", s.name, got, s.wantWrites)
		}
		if res.RequeueAfter != s.wantRequeue {
			t.Errorf("%s: requeue after %v, want %v", s.name, res.RequeueAfter, s.wantRequeue)
		}
		stored := f.account(t, "acct").Status.Conditions
		if diff := cmp.Diff(s.wantAdmitted, conditionOf(stored, v1alpha1.ConditionAdmitted)); diff != "" {
			t.Errorf("%s: stored Admitted (-want +got):\n%s", s.name, diff)
		}
		for typ, want := range map[string]string{v1alpha1.ConditionShardsCovered: s.wantCovered, v1alpha1.ConditionTerminated: s.wantTerminated} {
			if got := conditionOf(stored, typ); want != "" && got != want {
				t.Errorf("%s: stored %s = %q, want %q", s.name, typ, got, want)
			}
		}
	}
}
