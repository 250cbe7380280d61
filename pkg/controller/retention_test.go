package controller

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestRetention: an account is deleted once its batch finished (Accepted, or blocked with
// every target ended) longer ago than its TTL, brought back by a requeue at that moment
// until then, and kept for good while its batch runs or when no TTL applies; short-form
// accounts without a TTL of their own get the manager's default.
func TestRetention(t *testing.T) {
	complete := jobJ(v1alpha1.ScopeCoverage).Completed("0-1", 2).Complete(testNow).Obj()
	running := jobJ(v1alpha1.ScopeCoverage).Completed("0", 1).Obj()
	failed := jobJ(v1alpha1.ScopeCoverage).Completed("0", 1).FailedIndexes("1").Failed("BackoffLimitExceeded", testNow).Obj()
	shortForm := func() *wrappers.BatchAccountWrapper {
		return accountOfJ().Label(v1alpha1.LabelShortFormOf, "Job")
	}
	cases := []struct {
		name         string
		account      *v1alpha1.BatchAccount
		job          *batchv1.Job
		shortFormTTL time.Duration
		// at is how long after the batch finished (testNow) the measured reconcile runs.
		at          time.Duration
		wantDeleted bool
		// wantRequeue is the RequeueAfter of the measured reconcile.
		wantRequeue time.Duration
	}{
		{name: "still running: kept, whatever its TTL", account: accountOfJ().TTLSecondsAfterFinished(0).Obj(), job: running, at: time.Hour},
		{name: "accepted, TTL not passed: requeued when it passes", account: accountOfJ().TTLSecondsAfterFinished(3600).Obj(), job: complete,
			at: 10 * time.Minute, wantRequeue: 50 * time.Minute},
		{name: "accepted, TTL passed: deleted", account: accountOfJ().TTLSecondsAfterFinished(3600).Obj(), job: complete,
			at: time.Hour, wantDeleted: true},
		{name: "accepted, TTL 0: deleted at once", account: accountOfJ().TTLSecondsAfterFinished(0).Obj(), job: complete, wantDeleted: true},
		{name: "blocked (the Job failed, a shard missing), TTL passed: deleted", account: accountOfJ().TTLSecondsAfterFinished(60).Obj(), job: failed,
			at: time.Minute, wantDeleted: true},
		{name: "no TTL: kept for good", account: accountOfJ().Obj(), job: complete, shortFormTTL: time.Hour, at: 365 * 24 * time.Hour},
		{name: "short form without a TTL: the manager's default", account: shortForm().Obj(), job: complete, shortFormTTL: time.Hour,
			at: time.Hour, wantDeleted: true},
		{name: "short form, default not passed: requeued", account: shortForm().Obj(), job: complete, shortFormTTL: time.Hour,
			at: time.Minute, wantRequeue: 59 * time.Minute},
		{name: "short form, default off: kept", account: shortForm().Obj(), job: complete, at: 365 * 24 * time.Hour},
		{name: "short form with a TTL of its own: that one", account: shortForm().TTLSecondsAfterFinished(7200).Obj(), job: complete,
			shortFormTTL: time.Hour, at: time.Hour, wantRequeue: time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, tc.account, tc.job, workloadOfJ(tc.job).Obj())
			m := newMetrics(prometheus.NewRegistry())
			r := f.reconciler()
			r.ShortFormTTL, r.Metrics = tc.shortFormTTL, m
			wantRetention(t, f, r, tc.at, tc.wantDeleted, tc.wantRequeue)
			wantCollected := 0.0
			if tc.wantDeleted {
				wantCollected = 1
			}
			if got := testutil.ToFloat64(m.Collected); got != wantCollected {
				t.Errorf("batchledger_accounts_collected_total = %v, want %v", got, wantCollected)
			}
		})
	}
}

// TestBatchFinished: the final verdict and when it was reached, from the status alone.
func TestBatchFinished(t *testing.T) {
	ended := func(at time.Time) v1alpha1.TargetStatus {
		return v1alpha1.TargetStatus{Name: "j", Terminal: "Complete", TerminalObservedAt: &metav1.Time{Time: at}}
	}
	deleted := func(at time.Time) v1alpha1.TargetStatus {
		return v1alpha1.TargetStatus{Name: "k", Deleted: true, DeletedAt: &metav1.Time{Time: at}}
	}
	base := func() *wrappers.BatchAccountWrapper {
		w := wrappers.MakeBatchAccount("acct", "ns").Generation(2)
		w.Status.ObservedGeneration = 2
		return w
	}
	accepted := v1alpha1.ConditionAccepted
	cases := []struct {
		name     string
		account  *v1alpha1.BatchAccount
		wantAt   time.Time
		finished bool
	}{
		{name: "no status yet", account: base().Obj()},
		{name: "accepted: when it turned True",
			account: base().Condition(accepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "", testNow).
				TargetStatus(ended(testNow.Add(-time.Minute))).Obj(),
			wantAt: testNow, finished: true},
		{name: "the status judges an older spec: not yet",
			account: func() *v1alpha1.BatchAccount {
				ba := base().Condition(accepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "", testNow).TargetStatus(ended(testNow)).Obj()
				ba.Generation = 3
				return ba
			}()},
		{name: "blocked since the start: when the last target ended",
			account: base().Condition(accepted, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, "", testNow.Add(-time.Hour)).
				TargetStatus(ended(testNow.Add(-time.Minute))).TargetStatus(deleted(testNow)).Obj(),
			wantAt: testNow, finished: true},
		{name: "shards missing while a target runs: a wait",
			account: base().Condition(accepted, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, "", testNow).
				TargetStatus(ended(testNow)).TargetStatus(v1alpha1.TargetStatus{Name: "k", Found: true}).Obj()},
		{name: "shards missing, every target ended, but the batch awaits termination (a failed child its JobSet may restart)",
			account: base().Condition(accepted, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, "", testNow).
				Condition(v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination, "", testNow).
				TargetStatus(ended(testNow)).Obj()},
		{name: "results still being captured: a wait",
			account: base().Condition(accepted, metav1.ConditionFalse, v1alpha1.ReasonResultsPending, "", testNow).
				TargetStatus(ended(testNow)).Obj()},
		{name: "a rule that does not compile keeps its results for a fix",
			account: base().Condition(accepted, metav1.ConditionFalse, v1alpha1.ReasonRuleInvalid, "", testNow).
				TargetStatus(ended(testNow)).Obj()},
		{name: "blocked, a child its JobSet ended without creating: when the verdict was reached",
			account: base().Condition(accepted, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, "", testNow).
				TargetStatus(ended(testNow.Add(-time.Minute))).TargetStatus(v1alpha1.TargetStatus{Name: "k", OwnerEndedSeen: true}).Obj(),
			wantAt: testNow, finished: true},
		{name: "a result rejected, every Job ended",
			account: base().Condition(accepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected, "", testNow).
				TargetStatus(ended(testNow)).Obj(),
			wantAt: testNow, finished: true},
		{name: "results rejected, every covered shard decided, their ordinals listed only in part: finished",
			account: withResults(base().Condition(accepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected, "", testNow).
				Condition(v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected, "", testNow).
				TargetStatus(ended(testNow)).Obj(), 10, 4, v1alpha1.ResultSummary{Rejected: 6, RejectedOrdinals: "1,3", OrdinalsTruncated: true}),
			wantAt: testNow, finished: true},
		{name: "a result rejected, another covered shard's still to come: a wait",
			account: withResults(base().Condition(accepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected, "", testNow).
				Condition(v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected, "", testNow).
				TargetStatus(ended(testNow)).Obj(), 10, 8, v1alpha1.ResultSummary{Rejected: 1, RejectedOrdinals: "1"})},
		{name: "a result missing, another covered shard's still to come: a wait",
			account: withResults(base().Condition(accepted, metav1.ConditionFalse, v1alpha1.ReasonMissingResult, "", testNow).
				Condition(v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonMissingResult, "", testNow).
				TargetStatus(ended(testNow)).Obj(), 10, 8, v1alpha1.ResultSummary{Missing: 1, MissingOrdinals: "1"})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			at, ok := batchFinished(tc.account)
			if ok != tc.finished || !at.Equal(tc.wantAt) {
				t.Errorf("batchFinished = %v, %v; want %v, %v", at, ok, tc.wantAt, tc.finished)
			}
		})
	}
}

// withResults sets ba's covered and accepted shard counts and its result summary.
func withResults(ba *v1alpha1.BatchAccount, covered, accepted int32, results v1alpha1.ResultSummary) *v1alpha1.BatchAccount {
	ba.Status.Shards.Covered, ba.Status.Shards.Accepted, ba.Status.Results = covered, accepted, results
	return ba
}

// TestRetentionWaitsForResultsOfCoveredShards: an account whose batch is blocked (a shard
// missing: the Job failed; a result rejected or missing) while the result of a covered
// shard is still to be recorded (the signing key did not load, a rule that does not
// compile, a pod the Job controller counted succeeded that the pod cache does not show
// finished yet) is not finished: its retention would delete it, the garbage collector its
// chunks, and the releaser would let the held pod go, so the result is lost that a
// repair's verdict needs.
func TestRetentionWaitsForResultsOfCoveredShards(t *testing.T) {
	failed := jobJ(v1alpha1.ScopeResults).Completed("0", 1).FailedIndexes("1").Failed("BackoffLimitExceeded", testNow).Obj()
	complete := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
	// j1Finishing is index 1's pod, counted by the Job controller, still running in the
	// pod cache: its result is still to come.
	j1Finishing := func(*testing.T) *corev1.Pod {
		return wrappers.MakeIndexPod(complete, "j-1", 1).Finalizers(v1alpha1.ResultFinalizer).Phase(corev1.PodRunning).Obj()
	}
	for _, tc := range []struct {
		name    string
		account *v1alpha1.BatchAccount
		job     *batchv1.Job
		pods    []func(*testing.T) *corev1.Pod
		ledger  func(f *fixture) *Ledger
		// wantResults is ResultsAccepted after the first reconcile.
		wantResults string
	}{
		{name: "the signing key did not load", account: accountOfJ().RequireResults("").TTLSecondsAfterFinished(60).Obj(), job: failed,
			pods: []func(*testing.T) *corev1.Pod{func(t *testing.T) *corev1.Pod {
				return wrappers.MakeIndexPod(failed, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), reportOf(t, "A")).Obj()
			}},
			ledger: func(*fixture) *Ledger { return &Ledger{Source: missingKey{}} }, wantResults: "False ResultsPending"},
		{name: "the rule does not compile", account: accountOfJ().RequireResults("result.nope(").TTLSecondsAfterFinished(60).Obj(), job: failed,
			pods: []func(*testing.T) *corev1.Pod{func(t *testing.T) *corev1.Pod {
				return wrappers.MakeIndexPod(failed, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), reportOf(t, "A")).Obj()
			}},
			ledger: func(f *fixture) *Ledger { return &f.ledger }, wantResults: "False RuleInvalid"},
		{name: "a result rejected, another still to come", account: accountOfJ().RequireResults("").TTLSecondsAfterFinished(0).Obj(), job: complete,
			pods: []func(*testing.T) *corev1.Pod{func(t *testing.T) *corev1.Pod {
				// Index 0 claims shard B, which is index 1's.
				return wrappers.MakeIndexPod(complete, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), reportOf(t, "B")).Obj()
			}, j1Finishing},
			ledger: func(f *fixture) *Ledger { return &f.ledger }, wantResults: "False ResultRejected"},
		{name: "a result missing, another still to come", account: accountOfJ().RequireResults("").TTLSecondsAfterFinished(0).Obj(), job: complete,
			// Index 0's pod is gone, its result never recorded.
			pods:   []func(*testing.T) *corev1.Pod{j1Finishing},
			ledger: func(f *fixture) *Ledger { return &f.ledger }, wantResults: "False MissingResult"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{tc.account, tc.job, workloadOfJ(tc.job).Obj()}
			for _, pod := range tc.pods {
				objs = append(objs, pod(t))
			}
			f := newFixture(t, hooks{}, objs...)
			r := f.reconciler()
			r.Ledger = tc.ledger(f)
			req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}
			if _, err := r.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			ba := f.account(t, "acct")
			if got := conditionOf(ba.Status.Conditions, v1alpha1.ConditionResultsAccepted); got != tc.wantResults {
				t.Fatalf("ResultsAccepted = %q, want %q", got, tc.wantResults)
			}
			r.Now = func() time.Time { return testNow.Add(time.Hour) }
			if _, err := r.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if err := f.c.Get(context.Background(), req.NamespacedName, &v1alpha1.BatchAccount{}); apierrors.IsNotFound(err) {
				t.Fatalf("account deleted with a covered shard's result never recorded (Accepted %s, ResultsAccepted %s)",
					conditionOf(ba.Status.Conditions, v1alpha1.ConditionAccepted), conditionOf(ba.Status.Conditions, v1alpha1.ConditionResultsAccepted))
			}
		})
	}
}

// TestRetentionWaitsForAChildBesideALostTarget: a Job target deleted before it
// terminated is named first (Terminated and Accepted TargetDeleted: its shards need a
// repair), but a JobSet child that Failed while its JobSet runs may still be restarted,
// and its new identity cover its shards and report their results: the batch is not
// finished, and retention keeps the account. Once the JobSet ended the verdict is final.
func TestRetentionWaitsForAChildBesideALostTarget(t *testing.T) {
	ba := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).ShardCount("s", 4).TTLSecondsAfterFinished(0).
		AssignJobOrdinals("a", "0-1", "0-1").AssignJobSet("train", "workers", 0, "0-1", "2-3").Obj()
	a := jobkind.Facts(wrappers.MakeJob("a", "ns").Indexed(2).UID("uid-a").Completed("0", 1).Obj())
	child := jobkind.Facts(wrappers.MakeJob("train-workers-0", "ns").Indexed(2).UID("uid-w0").Completed("0", 1).
		Failed("BackoffLimitExceeded", testNow).Obj())
	const childKey = "jobset/train/workers/0"
	compute := func(prev *v1alpha1.BatchAccountStatus, obs map[string]account.Observation) v1alpha1.BatchAccountStatus {
		return account.Compute(account.Input{Namespace: "ns", Generation: 1, Spec: &ba.Spec, Previous: prev,
			Observations: obs, Now: metav1.NewTime(testNow)}).Status
	}
	seen := compute(nil, map[string]account.Observation{"job/a": {Job: a}, childKey: {Job: child, ChildOwner: account.OwnerRunning}})
	for _, tc := range []struct {
		name         string
		childOwner   string
		wantFinished bool
	}{
		{name: "the JobSet runs: it may restart the child", childOwner: account.OwnerRunning},
		{name: "the JobSet Failed: final", childOwner: string(jobset.JobSetFailed), wantFinished: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := compute(seen.DeepCopy(), map[string]account.Observation{"job/a": {DeletedJob: a},
				childKey: {Job: child, ChildOwner: tc.childOwner, OwnerEnded: map[bool]string{true: tc.childOwner}[tc.wantFinished]}})
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != "False "+v1alpha1.ReasonTargetDeleted {
				t.Fatalf("Accepted = %q, want False TargetDeleted", got)
			}
			acct := ba.DeepCopy()
			acct.Status = st
			if _, finished := batchFinished(acct); finished != tc.wantFinished {
				t.Errorf("batchFinished = %v, want %v (Terminated %q)", finished, tc.wantFinished,
					apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionTerminated).Message)
			}
		})
	}
}

// TestRetentionOfChildrenNeverCreated: a JobSet that ended without creating the child a
// target names (it failed first) will never create it; the verdict (blocked, the child's
// shards missing) is final, so the account's TTL runs from it like any other's. While the
// JobSet may still create the child (it waits queued), the account is kept.
func TestRetentionOfChildrenNeverCreated(t *testing.T) {
	jobSet := func(conditions ...string) *jobset.JobSet {
		w := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Obj())
		for _, c := range conditions {
			w = w.Condition(c, testNow.Add(-time.Hour))
		}
		js := w.Obj()
		js.UID = "ts-uid"
		return js
	}
	acct := func(ttl int32) *v1alpha1.BatchAccount {
		return wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).ShardCount("s", 2).TTLSecondsAfterFinished(ttl).
			AssignJobSet("ts", "workers", 0, "0-1", "0-1").Obj()
	}
	cases := []struct {
		name    string
		account *v1alpha1.BatchAccount
		jobSet  *jobset.JobSet
		// at is how long after the first reconcile (testNow) the measured one runs.
		at          time.Duration
		wantDeleted bool
		wantRequeue time.Duration
	}{
		{name: "JobSet failed before creating the child, TTL 0: deleted", account: acct(0), jobSet: jobSet(string(jobset.JobSetFailed)),
			at: time.Second, wantDeleted: true},
		{name: "JobSet failed before creating the child, TTL not passed: requeued when it passes", account: acct(3600),
			jobSet: jobSet(string(jobset.JobSetFailed)), at: 10 * time.Minute, wantRequeue: 50 * time.Minute},
		{name: "JobSet queued, no child yet, TTL 0: kept", account: acct(0), jobSet: jobSet(), at: time.Hour,
			wantRequeue: MaxUnfoundRecheck},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, tc.account, tc.jobSet)
			wantRetention(t, f, f.reconciler(), tc.at, tc.wantDeleted, tc.wantRequeue)
		})
	}
}

// wantRetention reconciles acct with r at testNow, which writes its verdict, and again at
// later: acct is then deleted if wantDeleted, else kept and requeued after wantRequeue.
func wantRetention(t *testing.T, f *fixture, r *Reconciler, later time.Duration, wantDeleted bool, wantRequeue time.Duration) {
	t.Helper()
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	r.Now = func() time.Time { return testNow.Add(later) }
	res, err := r.Reconcile(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	err = f.c.Get(context.Background(), req.NamespacedName, &v1alpha1.BatchAccount{})
	if deleted := apierrors.IsNotFound(err); deleted != wantDeleted {
		t.Fatalf("deleted = %v (%v), want %v", deleted, err, wantDeleted)
	}
	if !wantDeleted && res.RequeueAfter != wantRequeue {
		t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, wantRequeue)
	}
}
