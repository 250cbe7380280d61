package controller

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
		{"the first status of a new generation, nothing else changed", statusOf(0, valid, pending, missing),
			func() *v1alpha1.BatchAccountStatus {
				s := statusOf(0, valid, pending, missing)
				s.ObservedGeneration = 2
				return s
			}(), nil, false},
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

// TestReconcileWaitsOnlyForWaits: with WaitingStatusDelay, a new account's first status
// is written at once; the steps that follow on its way to the verdict (its Job's
// Workload appearing, Kueue admitting it) wait, and go in one write with what comes
// within the delay: the Workload's appearance alone once the delay has passed, the
// admission with the first covered shard, which is written at once.
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
		// wantAdmitted is the stored Admitted condition ("" before the first write).
		wantAdmitted string
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
		{name: "the Job starts: waits", after: 100 * time.Millisecond,
			change: func() {
				writeStatus(t, f.c, jobJ(v1alpha1.ScopeCoverage).Suspend(false).StartTime(at).Obj())
			},
			wantRequeue: delay - 100*time.Millisecond, wantAdmitted: "False Pending"},
		{name: "a shard covered: written at once, with the admission and the start", after: 500 * time.Millisecond,
			change: func() {
				writeStatus(t, f.c, jobJ(v1alpha1.ScopeCoverage).Suspend(false).StartTime(at.Add(-500*time.Millisecond)).Completed("0", 1).Obj())
			},
			wantWrites: 1, wantAdmitted: "True Admitted"},
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
		if diff := cmp.Diff(s.wantAdmitted, conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionAdmitted)); diff != "" {
			t.Errorf("%s: stored Admitted (-want +got):\n%s", s.name, diff)
		}
	}
}

// TestFirstStatusWaitsForKueuesWorkload: a new account whose Job is queued in Kueue (it
// carries Kueue's queue label) but has no Workload yet waits for the Workload, at most
// WaitingStatusDelay, so that its first status says where the Job stands in Kueue and the
// Workload appearing costs no second write. Kueue never creating it, the first status is
// written once the delay has passed.
func TestFirstStatusWaitsForKueuesWorkload(t *testing.T) {
	const delay = 10 * time.Second
	for name, tc := range map[string]struct {
		// workloadAfter is when Kueue creates the Workload (0: never).
		workloadAfter time.Duration
		wantAdmitted  string
	}{
		"the Workload appears within the delay": {workloadAfter: 3 * time.Second, wantAdmitted: "False Pending"},
		"Kueue never creates it":                {wantAdmitted: "Unknown NoWorkload"},
	} {
		t.Run(name, func(t *testing.T) {
			j := jobJ(v1alpha1.ScopeCoverage).Suspend(true).Queue("default").ResourceVersion("").Obj()
			f := newFixture(t, hooks{}, accountOfJ().Obj(), j)
			at := testNow
			r := f.reconciler()
			r.WaitingStatusDelay = delay
			r.Now = func() time.Time { return at }
			reconcile := func() ctrl.Result {
				t.Helper()
				f.reset()
				res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			if res := reconcile(); len(f.writesOf("status-update")) != 0 || res.RequeueAfter != delay {
				t.Fatalf("queued Job without a Workload: %d status writes, requeue after %v; want none, %v",
					len(f.writesOf("status-update")), res.RequeueAfter, delay)
			}
			if tc.workloadAfter > 0 {
				at = at.Add(tc.workloadAfter)
				if err := f.c.Create(context.Background(), wrappers.MakeWorkload("job-j", "ns").UID("wl-uid").ForJob(j).Obj()); err != nil {
					t.Fatal(err)
				}
			} else {
				at = at.Add(delay)
			}
			reconcile()
			if got := len(f.writesOf("status-update")); got != 1 {
				t.Errorf("%d status writes, want the first status written once", got)
			}
			if diff := cmp.Diff(tc.wantAdmitted, conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionAdmitted)); diff != "" {
				t.Errorf("stored Admitted (-want +got):\n%s", diff)
			}
		})
	}
}
