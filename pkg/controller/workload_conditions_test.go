package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

func withVerdicts(name string, covered, accepted metav1.Condition) *v1alpha1.BatchAccount {
	ba := wrappers.MakeBatchAccount(name, "ns").Obj()
	ba.Status.Conditions = []metav1.Condition{covered, accepted}
	return ba
}

// TestWorkloadConditionsSpeakForEveryAccount: the Workload's two conditions aggregate the
// verdicts of every account naming its Jobs (True only when all are), name each account,
// and stay bounded however many accounts there are.
func TestWorkloadConditionsSpeakForEveryAccount(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	wl := wrappers.MakeWorkload("job-j", "ns").Generation(3).Obj()
	covered := cond(v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered, "2/2 shards covered")
	accepted := cond(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "2/2 shards accepted")
	pending := cond(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultsPending, "waiting for results of B")
	done := withVerdicts("a-done", covered, accepted)
	waiting := withVerdicts("b-waiting", covered, pending)

	t.Run("one account: its own verdict", func(t *testing.T) {
		got := desiredWorkloadConditions(wl, []*v1alpha1.BatchAccount{done}, now)
		want := []metav1.Condition{
			{Type: v1alpha1.WorkloadConditionShardsCovered, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAllShardsCovered, Message: "BatchAccount a-done: 2/2 shards covered", ObservedGeneration: 3},
			{Type: v1alpha1.WorkloadConditionAccepted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAccepted, Message: "BatchAccount a-done: 2/2 shards accepted", ObservedGeneration: 3},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("conditions (-want +got):\n%s", diff)
		}
	})
	t.Run("two accounts, one still waiting: False, whoever wrote last", func(t *testing.T) {
		for _, order := range [][]*v1alpha1.BatchAccount{{done, waiting}, {waiting, done}} {
			got := desiredWorkloadConditions(wl, order, now)
			acc := got[1]
			if acc.Status != metav1.ConditionFalse || acc.Reason != v1alpha1.ReasonResultsPending ||
				acc.Message != "2 accounts; BatchAccount a-done: 2/2 shards accepted; BatchAccount b-waiting: waiting for results of B" {
				t.Errorf("Accepted = %s %s %q", acc.Status, acc.Reason, acc.Message)
			}
			if got[0].Status != metav1.ConditionTrue || got[0].Reason != v1alpha1.ReasonAllShardsCovered {
				t.Errorf("ShardsCovered = %s %s", got[0].Status, got[0].Reason)
			}
		}
	})
	t.Run("many accounts: bounded message", func(t *testing.T) {
		var many []*v1alpha1.BatchAccount
		long := strings.Repeat("x", 30000)
		for i := range 200 {
			many = append(many, withVerdicts(fmt.Sprintf("acct-%03d", i), covered, cond(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultsPending, long)))
		}
		for _, c := range desiredWorkloadConditions(wl, many, now) {
			if len(c.Message) > 32768 {
				t.Errorf("%s message is %d bytes", c.Type, len(c.Message))
			}
			if !strings.HasSuffix(c.Message, "; and 192 more") || !strings.HasPrefix(c.Message, "200 accounts; ") {
				t.Errorf("%s message does not count the accounts: %.80q...%q", c.Type, c.Message, c.Message[len(c.Message)-20:])
			}
		}
	})
}

// TestWorkloadConditionsNeverVouchForAnUnjudgedSpec: an account naming the Workload's
// Jobs that has not judged its current spec (no status yet, or a status of an earlier
// generation) keeps the Workload's conditions from True, whatever its stale status says.
func TestWorkloadConditionsNeverVouchForAnUnjudgedSpec(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	wl := wrappers.MakeWorkload("job-j", "ns").Generation(1).Obj()
	covered := cond(v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered, "2/2 shards covered")
	accepted := cond(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "2/2 shards accepted")
	judgedAt := func(name string, generation, observed int64) *v1alpha1.BatchAccount {
		ba := withVerdicts(name, covered, accepted)
		ba.Generation, ba.Status.ObservedGeneration = generation, observed
		return ba
	}
	cases := []struct {
		name     string
		accounts []*v1alpha1.BatchAccount
		want     metav1.ConditionStatus
		message  string
	}{
		{
			name:     "every account judged its spec: True",
			accounts: []*v1alpha1.BatchAccount{judgedAt("a-done", 1, 1), judgedAt("b-done", 2, 2)},
			want:     metav1.ConditionTrue,
			message:  "2 accounts; BatchAccount a-done: 2/2 shards accepted; BatchAccount b-done: 2/2 shards accepted",
		},
		{
			name:     "a second account whose spec changed since its verdict",
			accounts: []*v1alpha1.BatchAccount{judgedAt("a-done", 1, 1), judgedAt("b-changed", 2, 1)},
			want:     metav1.ConditionUnknown,
			message:  "2 accounts; BatchAccount a-done: 2/2 shards accepted; BatchAccount b-changed: spec changed (generation 2), not judged yet",
		},
		{
			name:     "a second account with no status yet",
			accounts: []*v1alpha1.BatchAccount{judgedAt("a-done", 1, 1), wrappers.MakeBatchAccount("c-new", "ns").Generation(1).Obj()},
			want:     metav1.ConditionUnknown,
			message:  "2 accounts; BatchAccount a-done: 2/2 shards accepted; BatchAccount c-new: not judged yet",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := desiredWorkloadConditions(wl, tc.accounts, now)
			c := apimeta.FindStatusCondition(got, v1alpha1.WorkloadConditionAccepted)
			if c == nil {
				t.Fatalf("no %s condition in %v", v1alpha1.WorkloadConditionAccepted, got)
			}
			if c.Status != tc.want || c.Message != tc.message {
				t.Errorf("Accepted = %s %s %q, want %s %q", c.Status, c.Reason, c.Message, tc.want, tc.message)
			}
			if tc.want == metav1.ConditionUnknown && (c.Reason != v1alpha1.ReasonVerdictPending || c.LastTransitionTime.IsZero()) {
				t.Errorf("Accepted reason %s, transition %v; want %s and a transition time", c.Reason, c.LastTransitionTime, v1alpha1.ReasonVerdictPending)
			}
		})
	}
}

// TestPublishSpacesMessageOnlyWrites: our conditions appear on the Workload with the
// first covered shard, not while the batch only waits; what a Workload reader must see
// at once (the batch Accepted) reaches the Workload at once; progress (our conditions
// appearing, a count that moved, every shard covered while the Job still runs) waits
// WorkloadMessageInterval from when it was first seen unpublished, and the reconcile asks
// to come back when it is due, so the last count is never left unpublished.
func TestPublishSpacesMessageOnlyWrites(t *testing.T) {
	const interval = 10 * time.Second
	job := func(completed string, succeeded int32) *wrappers.JobWrapper {
		return wrappers.MakeJob("j", "ns").Indexed(4).UID("j-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
			Completed(completed, succeeded)
	}
	steps := []struct {
		name string
		at   time.Duration // after testNow
		job  *batchv1.Job  // the Job's status from this step on; nil: unchanged

		wantCovered int32 // the account's status.shards.covered: every change at once
		wantApply   bool
		wantMessage string // the Workload's ShardsCovered message afterwards ("": none)
		wantRequeue time.Duration
	}{
		{
			name: "admitted, nothing covered: nothing to say, nothing deferred", job: job("", 0).Obj(),
		},
		{
			name: "the first covered shard: our conditions appear an interval later", at: time.Second, job: job("0", 1).Obj(),
			wantCovered: 1, wantRequeue: interval,
		},
		{
			name: "the count moves: still deferred, to the same time", at: 4 * time.Second, job: job("0-1", 2).Obj(),
			wantCovered: 2, wantRequeue: 7 * time.Second,
		},
		{
			name: "when due: the last count", at: interval + time.Second,
			wantCovered: 2, wantApply: true, wantMessage: "BatchAccount acct: 2/4 shards covered; missing C, D = job j indexes 2,3",
		},
		{
			name: "every shard covered, the Job still running: progress, deferred", at: interval + 2*time.Second, job: job("0-3", 4).Obj(),
			wantCovered: 4, wantMessage: "BatchAccount acct: 2/4 shards covered; missing C, D = job j indexes 2,3", wantRequeue: interval,
		},
		{
			name: "the batch is Accepted 1s later: written at once, with the coverage", at: interval + 3*time.Second, job: job("0-3", 4).Complete(testNow).Obj(),
			wantCovered: 4, wantApply: true, wantMessage: "BatchAccount acct: 4/4 shards covered",
		},
		{
			name: "nothing changes: nothing written", at: interval + 4*time.Second,
			wantCovered: 4, wantMessage: "BatchAccount acct: 4/4 shards covered",
		},
	}
	acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Obj()
	j := steps[0].job
	f := newFixture(t, hooks{}, acct, j, workloadOfJ(j).Obj())
	now := testNow
	r := f.reconciler()
	r.Now = func() time.Time { return now }
	r.WorkloadMessageInterval = interval
	ctx := context.Background()
	for _, s := range steps {
		now = testNow.Add(s.at)
		if s.job != nil {
			var cur batchv1.Job
			if err := f.c.Get(ctx, client.ObjectKeyFromObject(s.job), &cur); err != nil {
				t.Fatal(err)
			}
			cur.Status = s.job.Status
			if err := f.c.Status().Update(ctx, &cur); err != nil {
				t.Fatal(err)
			}
		}
		f.reset()
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(acct)})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := len(f.applies) > 0; got != s.wantApply {
			t.Errorf("%s: applied %v, want %v", s.name, got, s.wantApply)
		}
		if res.RequeueAfter != s.wantRequeue {
			t.Errorf("%s: requeue after %v, want %v", s.name, res.RequeueAfter, s.wantRequeue)
		}
		var wl kueue.Workload
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "job-j"}, &wl); err != nil {
			t.Fatal(err)
		}
		c := apimeta.FindStatusCondition(wl.Status.Conditions, v1alpha1.WorkloadConditionShardsCovered)
		if got := conditionMessage(c); got != s.wantMessage || (c == nil) != (s.wantMessage == "") {
			t.Errorf("%s: Workload ShardsCovered = %+v, want message %q", s.name, c, s.wantMessage)
		}
		// The account's own status follows every change at once.
		if got := f.account(t, "acct").Status.Shards.Covered; got != s.wantCovered {
			t.Errorf("%s: account covers %d shards, want %d", s.name, got, s.wantCovered)
		}
	}
}

// conditionMessage is c's message ("" for no condition).
func conditionMessage(c *metav1.Condition) string {
	if c == nil {
		return ""
	}
	return c.Message
}

// TestUrgentWorkloadChanges: which changes of the Workload's conditions are written at
// once, and which are progress that may wait.
func TestUrgentWorkloadChanges(t *testing.T) {
	covered := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		c := cond(v1alpha1.WorkloadConditionShardsCovered, status, reason, "")
		c.ObservedGeneration = 1
		return c
	}
	accepted := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		c := cond(v1alpha1.WorkloadConditionAccepted, status, reason, "")
		c.ObservedGeneration = 1
		return c
	}
	missing := []metav1.Condition{covered("False", v1alpha1.ReasonShardsMissing), accepted("False", v1alpha1.ReasonShardsMissing)}
	awaiting := []metav1.Condition{covered("True", v1alpha1.ReasonAllShardsCovered), accepted("False", v1alpha1.ReasonAwaitingTermination)}
	done := []metav1.Condition{covered("True", v1alpha1.ReasonAllShardsCovered), accepted("True", v1alpha1.ReasonAccepted)}
	nextGen := []metav1.Condition{missing[0], missing[1]}
	nextGen[0].ObservedGeneration, nextGen[1].ObservedGeneration = 2, 2
	cases := []struct {
		name       string
		have, want []metav1.Condition
		urgent     bool
	}{
		{name: "our conditions appear, shards missing: progress", want: missing},
		{name: "our conditions appear, termination awaited: progress", want: awaiting},
		{name: "our conditions appear with a problem", want: []metav1.Condition{missing[0], accepted("False", v1alpha1.ReasonResultRejected)}, urgent: true},
		{name: "our conditions appear with the verdict", want: done, urgent: true},
		{name: "the message alone", have: missing, want: missing},
		{name: "covered, termination awaited: progress", have: missing, want: awaiting},
		{name: "Accepted", have: awaiting, want: done, urgent: true},
		{name: "a problem", have: missing, want: []metav1.Condition{missing[0], accepted("False", v1alpha1.ReasonResultRejected)}, urgent: true},
		{name: "falls from True", have: done, want: awaiting, urgent: true},
		{name: "a new Workload generation", have: missing, want: nextGen, urgent: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := urgent(tc.have, tc.want); got != tc.urgent {
				t.Errorf("urgent = %v, want %v", got, tc.urgent)
			}
		})
	}
}

// jobSetTS is JobSet ts, Completed with its only child ts-workers-0 (2 indexes, both
// completed), and the JobSet's admitted Workload: Kueue gives the child no Workload of
// its own.
func jobSetTS() (*jobsetapi.JobSet, *batchv1.Job, *kueue.Workload) {
	js := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).
		Condition(string(jobsetapi.JobSetCompleted), testNow).Obj()
	js.UID = "ts-uid"
	child := wrappers.MakeJob("ts-workers-0", "ns").Indexed(2).UID("child-uid").JobSetChild(js, "workers", 0, 0).
		PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Completed("0-1", 2).Complete(testNow).Obj()
	wl := wrappers.MakeWorkload("jobset-ts", "ns").UID("wl-ts-uid").ForJobSet(js).Admitted("gpu", testNow.Add(-time.Hour)).Obj()
	return js, child, wl
}

// TestJobSetChildNamedByJobNameFollowsTheJobSetWorkload: a JobSet's child may be named as
// the child ({jobSet: ts, ...}) or by its Job name ({job: ts-workers-0}); either way the
// account observes the JobSet's Workload and publishes its verdict there.
func TestJobSetChildNamedByJobNameFollowsTheJobSetWorkload(t *testing.T) {
	js, child, wl := jobSetTS()
	for name, acct := range map[string]*v1alpha1.BatchAccount{
		"as the JobSet child": wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).ShardCount("s", 2).
			AssignJobSet("ts", "workers", 0, "0-1", "0-1").Obj(),
		"by its Job name": wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).ShardCount("s", 2).
			AssignJobOrdinals("ts-workers-0", "0-1", "0-1").Obj(),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, hooks{}, acct, js, child, wl)
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			st := f.account(t, "acct").Status
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != "True Accepted" {
				t.Fatalf("Accepted = %q, want True (conditions %+v)", got, st.Conditions)
			}
			if w := st.Targets[0].Workload; w == nil || w.UID != wl.UID {
				t.Errorf("observed Workload %+v, want the JobSet's %s; Admitted = %q", w, wl.Name, conditionOf(st.Conditions, v1alpha1.ConditionAdmitted))
			}
			if len(f.applies) != 1 || *f.applies[0].ac.GetName() != wl.Name {
				t.Errorf("published on %v, want the JobSet's Workload %s", f.writesOf("status-apply"), wl.Name)
			}
		})
	}
}

// TestJobSetWorkloadSpeaksForAccountNamingChildByJobName: the JobSet's Workload speaks for
// every account that observed its targets under it, True only when all are: account
// a-byname names the child by its Job name and waits for results, b-child names it as
// the child and is Accepted; whichever publishes last, the Workload is not Accepted.
func TestJobSetWorkloadSpeaksForAccountNamingChildByJobName(t *testing.T) {
	for name, order := range map[string][]string{
		"the account naming the Job first":   {"a-byname", "b-child"},
		"the account naming the child first": {"b-child", "a-byname"},
	} {
		t.Run(name, func(t *testing.T) {
			js, child, wl := jobSetTS()
			byName := wrappers.MakeBatchAccount("a-byname", "ns").UID("a-uid").Generation(1).ShardCount("s", 2).
				AssignJobOrdinals("ts-workers-0", "0-1", "0-1").RequireResults("").Obj()
			asChild := wrappers.MakeBatchAccount("b-child", "ns").UID("b-uid").Generation(1).ShardCount("s", 2).
				AssignJobSet("ts", "workers", 0, "0-1", "0-1").Obj()
			f := newFixture(t, hooks{}, byName, asChild, js, child, wl)
			for _, acct := range order {
				if _, err := f.reconcile(acct); err != nil {
					t.Fatal(err)
				}
			}
			if got := conditionOf(f.account(t, "b-child").Status.Conditions, v1alpha1.ConditionAccepted); got != "True Accepted" {
				t.Fatalf("b-child Accepted = %q", got)
			}
			var got kueue.Workload
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(wl), &got); err != nil {
				t.Fatal(err)
			}
			c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.WorkloadConditionAccepted)
			if c == nil || c.Status == metav1.ConditionTrue {
				t.Errorf("Workload %s Accepted = %+v; want False: account a-byname names its Job ts-workers-0 and is not Accepted", wl.Name, c)
			}
		})
	}
}

// TestFirstWorkloadOfJobSetWakesAccountNamingChildByJobName: an account names a JobSet's
// child by its Job name and first reconciles before Kueue created the JobSet's Workload
// (NoWorkload); the Workload's creation wakes it.
func TestFirstWorkloadOfJobSetWakesAccountNamingChildByJobName(t *testing.T) {
	js, _, _ := jobSetTS()
	child := wrappers.MakeJob("ts-workers-0", "ns").Indexed(2).UID("child-uid").JobSetChild(js, "workers", 0, 0).
		PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Suspend(true).Obj()
	byName := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).ShardCount("s", 2).
		AssignJobOrdinals("ts-workers-0", "0-1", "0-1").Obj()
	other := wrappers.MakeBatchAccount("other", "ns").UID("other-uid").Generation(1).ShardCount("s", 2).
		AssignJobOrdinals("elsewhere", "0-1", "0-1").Obj()
	f := newFixture(t, hooks{}, byName, other, js, child)
	if _, err := f.reconcile("acct"); err != nil {
		t.Fatal(err)
	}
	wl := wrappers.MakeWorkload("jobset-ts", "ns").UID("wl-ts-uid").ForJobSet(js).Obj()
	if err := f.c.Create(context.Background(), wl); err != nil {
		t.Fatal(err)
	}
	reqs := f.reconciler().workloadToAccounts(context.Background(), wl)
	if len(reqs) != 1 || reqs[0].Name != "acct" {
		t.Errorf("the JobSet's new Workload wakes %v, want acct alone (it names the child ts-workers-0)", reqs)
	}
}

// TestPublishLooksAgainForAnotherAccountsVerdict: an account publishing on a Workload that
// another account names, whose spec changed since its status was written, publishes
// Unknown for it and comes back, so that the Workload is not left with a verdict the other
// account's own publish could have preceded.
func TestPublishLooksAgainForAnotherAccountsVerdict(t *testing.T) {
	j := jobJ(v1alpha1.ScopeCoverage).Completed("0-1", 2).Complete(testNow.Add(-time.Minute)).Obj()
	stale := wrappers.MakeBatchAccount("other", "ns").UID("other-uid").Generation(2).Shards("A", "B").AssignJob("j", "0-1", "A", "B").Obj()
	stale.Status.ObservedGeneration = 1
	stale.Status.Conditions = []metav1.Condition{
		cond(v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered, "2/2 shards covered"),
		cond(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "2/2 shards accepted"),
	}
	f := newFixture(t, hooks{}, accountOfJ().Obj(), stale, j, workloadOfJ(j).Obj())
	res, err := f.reconcile("acct")
	if err != nil {
		t.Fatal(err)
	}
	var wl kueue.Workload
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "job-j"}, &wl); err != nil {
		t.Fatal(err)
	}
	if got := conditionOf(wl.Status.Conditions, v1alpha1.WorkloadConditionAccepted); got != "Unknown "+v1alpha1.ReasonVerdictPending {
		t.Errorf("Workload Accepted = %q while the other account has not judged its spec, want Unknown %s", got, v1alpha1.ReasonVerdictPending)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > VerdictPendingRecheck {
		t.Errorf("requeue after %v, want within %v to publish the other account's verdict", res.RequeueAfter, VerdictPendingRecheck)
	}
}

// TestRecreatedTrainJobWorkloadGetsNoVerdictOfItsPredecessor: TrainJob tj ran and completed its
// node Job (indexes 0-1), then was deleted and created again under the same name. Its old
// child Job is still Terminating (held by the record finalizer); the new TrainJob's
// JobSet is not rendered yet and its Workload is only queued. The account follows the old
// child to record its end, but that child never ran under the new TrainJob's Workload:
// the verdict built from it must not be published on trainjob-tj-new as if the new
// TrainJob had covered its shards.
func TestRecreatedTrainJobWorkloadGetsNoVerdictOfItsPredecessor(t *testing.T) {
	oldJS := wrappers.MakeJobSet("tj", "ns").Obj()
	oldJS.UID = "js-old"
	oldChild := nodeChild(oldJS, "child-old").Completed("0-1", 2).Complete(testNow.Add(-time.Hour)).
		Finalizers(v1alpha1.RecordFinalizer).Deleting(testNow.Add(-time.Second)).Obj()
	newTJ := wrappers.MakeTrainJob("tj", "ns", "torch-distributed").UID("tj-new").NumNodes(2).Suspend(true).Obj()
	newWL := wrappers.MakeWorkload("trainjob-tj-new", "ns").UID("wl-new").Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
		ControlledBy(newTJ, trainJobGVK).Obj()
	acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B").Revisions("D", "m").
		AssignTrainJob("tj", "node", 0, "0-1", "0-1")
	f := newFixture(t, hooks{}, oldChild, newTJ, newWL, acct.Obj())
	if _, err := f.reconcile("acct"); err != nil {
		t.Fatal(err)
	}
	st := f.account(t, "acct").Status
	for _, ts := range st.Targets {
		wl := "<none>"
		if ts.Workload != nil {
			wl = ts.Workload.Name
		}
		t.Logf("target %s: uid %s completed %q workload %s", ts.Name, ts.UID, ts.CompletedIndexes, wl)
		if ts.UID == oldChild.UID && ts.Workload != nil && ts.Workload.Name == newWL.Name {
			t.Errorf("the old TrainJob's child %s is observed under the new TrainJob's Workload %s", ts.UID, newWL.Name)
		}
	}
	var wl kueue.Workload
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(newWL), &wl); err != nil {
		t.Fatal(err)
	}
	for _, c := range wl.Status.Conditions {
		t.Logf("new Workload condition %s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message)
		if c.Type == "batchledger.dev/ShardsCovered" && c.Status == "True" {
			t.Errorf("the new TrainJob's queued Workload says its shards are covered, from the deleted TrainJob's Job")
		}
	}
}

// TestSpecChangeKeepsTheWorkloadsVerdict: an Accepted account whose spec changes in a way
// that changes no verdict (ttlSecondsAfterFinished) writes the status of its new
// generation at once, however long waits are deferred, so its own publish never reads
// its old status as a verdict still to come: the Workload stays Accepted.
func TestSpecChangeKeepsTheWorkloadsVerdict(t *testing.T) {
	j := jobJ(v1alpha1.ScopeCoverage).Completed("0-1", 2).Complete(testNow.Add(-time.Minute)).Obj()
	f := newFixture(t, hooks{}, accountOfJ().Obj(), j, workloadOfJ(j).Obj())
	r := f.reconciler()
	r.WaitingStatusDelay = 10 * time.Second
	rec := func() ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	rec()
	var wl kueue.Workload
	get := func() string {
		t.Helper()
		if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "job-j"}, &wl); err != nil {
			t.Fatal(err)
		}
		return conditionOf(wl.Status.Conditions, v1alpha1.WorkloadConditionAccepted)
	}
	if got := get(); got != "True Accepted" {
		t.Fatalf("Workload Accepted = %q before the spec change, want True Accepted", got)
	}
	ba := f.account(t, "acct")
	ttl := int32(3600)
	ba.Spec.TTLSecondsAfterFinished = &ttl
	ba.Generation = 2
	if err := f.c.Update(context.Background(), ba); err != nil {
		t.Fatal(err)
	}
	res := rec()
	if got := get(); got != "True Accepted" {
		t.Errorf("after a ttlSecondsAfterFinished edit the account re-judged as Accepted, but its own publish made the Workload's Accepted %q (requeue %v, stored observedGeneration %d)",
			got, res.RequeueAfter, f.account(t, "acct").Status.ObservedGeneration)
	}
}

// TestVerdictRecheckBacksOff: an account's verdict still to come is looked at again soon,
// then less often the longer it has been awaited on the Workload, never less than every
// maxVerdictPendingRecheck; once none is awaited, nothing is.
func TestVerdictRecheckBacksOff(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		name    string
		after   time.Duration // since start
		pending bool
		want    time.Duration
	}{
		{name: "first seen", pending: true, want: VerdictPendingRecheck},
		{name: "a second later", after: time.Second, pending: true, want: VerdictPendingRecheck},
		{name: "a minute later", after: time.Minute, pending: true, want: time.Minute},
		{name: "an hour later", after: time.Hour, pending: true, want: maxVerdictPendingRecheck},
		{name: "judged", after: time.Hour + time.Second},
		{name: "pending again: starts over", after: 2 * time.Hour, pending: true, want: VerdictPendingRecheck},
	}
	var p pendingVerdicts
	for _, s := range steps {
		if got := p.recheck("wl-uid", s.pending, start.Add(s.after)); got != s.want {
			t.Errorf("%s: recheck = %v, want %v", s.name, got, s.want)
		}
	}
}

// TestVerdictRecheckBacksOffWhateverTheWorkloadSays: the back-off follows how long the
// verdict has been awaited, not the Workload's reason (here another account's
// ShardsMissing, named first).
func TestVerdictRecheckBacksOffWhateverTheWorkloadSays(t *testing.T) {
	j := jobJ(v1alpha1.ScopeCoverage).Completed("0", 1).Obj()
	a := accountOfJ().Obj()
	b := wrappers.MakeBatchAccount("b", "ns").UID("b-uid").Generation(2).Shards("A", "B").AssignJob("j", "0-1", "A", "B").Obj()
	b.Status.ObservedGeneration = 1
	b.Status.Conditions = []metav1.Condition{cond(v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, "x")}
	wl := workloadOfJ(j).Obj()
	f := newFixture(t, hooks{}, a, b, j, wl)
	r := f.reconciler()
	var last ctrl.Result
	for i := 0; i < 3; i++ {
		res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}})
		if err != nil {
			t.Fatal(err)
		}
		last = res
	}
	var w = wl.DeepCopy()
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(wl), w); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.Status.Conditions {
		t.Logf("Workload %s=%s %s (since %v)", c.Type, c.Status, c.Reason, c.LastTransitionTime)
	}
	// An hour later b has still not judged.
	r.Now = func() time.Time { return testNow.Add(time.Hour) }
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("requeue after %v (first %v)", res.RequeueAfter, last.RequeueAfter)
	if res.RequeueAfter > 0 && res.RequeueAfter <= VerdictPendingRecheck {
		t.Errorf("an hour into b's pending verdict, a still rechecks after %v; want the back-off (up to %v)", res.RequeueAfter, maxVerdictPendingRecheck)
	}
}

// TestAcceptedAccountPublishesNoVerdictOnAReRun: an Accepted account follows none but
// the identities on its record (account.Final). A Job re-run under a target's name is
// another batch's: its Workload gets none of the account's conditions, least of all an
// Accepted=True for work it has not done, and the account stays Accepted.
func TestAcceptedAccountPublishesNoVerdictOnAReRun(t *testing.T) {
	rerun := jobJ(v1alpha1.ScopeCoverage).UID("j-again").Obj()
	wl := workloadOfJ(rerun).UID("wl-again").Obj()
	acct := accountOfJ().TargetStatus(v1alpha1.TargetStatus{Name: "job/j", Job: "j", UID: "j-earlier", Deleted: true, Completions: 2,
		Required: "0-1", CompletedIndexes: "0,1", Succeeded: 2, Terminal: "Complete"})
	for _, c := range []struct{ typ, reason string }{
		{v1alpha1.ConditionAssignmentValid, v1alpha1.ReasonValid}, {v1alpha1.ConditionAdmitted, v1alpha1.ReasonFinished},
		{v1alpha1.ConditionShardsCovered, v1alpha1.ReasonAllShardsCovered}, {v1alpha1.ConditionTerminated, v1alpha1.ReasonComplete},
		{v1alpha1.ConditionResultsAccepted, v1alpha1.ReasonResultsNotRequired}, {v1alpha1.ConditionAccepted, v1alpha1.ReasonAccepted},
	} {
		acct.Condition(c.typ, metav1.ConditionTrue, c.reason, "", testNow.Add(-time.Hour))
	}
	f := newFixture(t, hooks{}, acct.Obj(), rerun, wl)
	if _, err := f.reconcile("acct"); err != nil {
		t.Fatal(err)
	}
	st := f.account(t, "acct").Status
	if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != "True Accepted" {
		t.Errorf("Accepted = %s, want True Accepted", got)
	}
	if len(st.Targets) != 1 || st.Targets[0].UID != "j-earlier" {
		t.Errorf("targets %+v, want the record j-earlier", st.Targets)
	}
	var got kueue.Workload
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(wl), &got); err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Status.Conditions {
		if v1alpha1.IsWorkloadCondition(c.Type) {
			t.Errorf("the re-run's Workload carries %s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
}

// TestJobSetChildNamedByJobNameAwaitsItsJobSet: a JobSet restart recreates its
// children, the Complete ones too, under the same names: a child named by its Job name
// that completed while its JobSet runs is no more the batch's end than one named as the
// child (account.awaitsOwner). Either spelling waits for the JobSet; once it Completed,
// or is gone, the batch is Accepted.
func TestJobSetChildNamedByJobNameAwaitsItsJobSet(t *testing.T) {
	for name, tc := range map[string]struct {
		ended        bool
		wantAccepted string
	}{
		"its JobSet runs":      {false, "False AwaitingTermination"},
		"its JobSet Completed": {true, "True Accepted"},
	} {
		for spelling, acct := range map[string]*v1alpha1.BatchAccount{
			"as the JobSet child": wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).ShardCount("s", 2).
				AssignJobSet("ts", "workers", 0, "0-1", "0-1").Obj(),
			"by its Job name": wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).ShardCount("s", 2).
				AssignJobOrdinals("ts-workers-0", "0-1", "0-1").Obj(),
		} {
			t.Run(name+", "+spelling, func(t *testing.T) {
				js, child, wl := jobSetTS()
				if !tc.ended {
					js.Status.Conditions = nil
				}
				f := newFixture(t, hooks{}, acct, js, child, wl)
				if _, err := f.reconcile("acct"); err != nil {
					t.Fatal(err)
				}
				st := f.account(t, "acct").Status
				if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != tc.wantAccepted {
					t.Errorf("Accepted = %q, want %q (Terminated %q)", got, tc.wantAccepted, conditionOf(st.Conditions, v1alpha1.ConditionTerminated))
				}
			})
		}
	}
}

// TestAcceptedAccountSpeaksForNoReRunOfItsJob: an Accepted account follows none but the
// identities on its record, so it speaks for no Workload of a Job re-run under a
// target's name, not even through another account that follows the re-run. Neither its
// verdict on the earlier Job nor its name reaches the re-run's Workload: when the
// re-run's own account is being deleted, the Workload carries none of our conditions
// (not the Accepted=True of the earlier batch), and once it is gone the cleanup takes
// its last verdict off instead of waiting for a republish that never comes.
func TestAcceptedAccountSpeaksForNoReRunOfItsJob(t *testing.T) {
	rerun := jobJ(v1alpha1.ScopeCoverage).UID("j-again").Obj()
	accepted := accountOfJ().TargetStatus(v1alpha1.TargetStatus{Name: "job/j", Job: "j", UID: "j-earlier", Deleted: true, Completions: 2,
		Required: "0-1", CompletedIndexes: "0,1", Succeeded: 2, Terminal: "Complete",
		Workload: &v1alpha1.WorkloadObservation{Name: "job-j-earlier", UID: "wl-earlier", Admitted: true}})
	for _, c := range []struct{ typ, reason string }{
		{v1alpha1.ConditionAssignmentValid, v1alpha1.ReasonValid}, {v1alpha1.ConditionAdmitted, v1alpha1.ReasonFinished},
		{v1alpha1.ConditionShardsCovered, v1alpha1.ReasonAllShardsCovered}, {v1alpha1.ConditionTerminated, v1alpha1.ReasonComplete},
		{v1alpha1.ConditionResultsAccepted, v1alpha1.ReasonResultsNotRequired}, {v1alpha1.ConditionAccepted, v1alpha1.ReasonAccepted},
	} {
		accepted.Condition(c.typ, metav1.ConditionTrue, c.reason, "", testNow.Add(-time.Hour))
	}
	acct := accepted.Obj()
	acct.Status.ObservedGeneration = acct.Generation
	next := func() *wrappers.BatchAccountWrapper {
		return wrappers.MakeBatchAccount("next", "ns").UID("next-uid").Generation(1).Shards("A", "B").AssignJob("j", "0-1", "A", "B")
	}
	deleting := next().Obj()
	deleting.Finalizers = []string{"test.example/hold"}
	deleting.DeletionTimestamp = &metav1.Time{Time: testNow}
	published := func() *kueue.Workload {
		return workloadOfJ(rerun).UID("wl-again").Condition(metav1.Condition{Type: v1alpha1.WorkloadConditionAccepted, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonShardsMissing, Message: "BatchAccount next: 0/2 shards covered", LastTransitionTime: metav1.NewTime(testNow.Add(-time.Minute))}).Obj()
	}
	for _, tc := range []struct {
		name string
		next *v1alpha1.BatchAccount // nil: gone, the cleanup runs
		// want is the Workload's Accepted condition as "<status> <reason>" ("": none).
		want string
	}{
		{"the re-run's account judges it alone", next().Obj(), "False ShardsMissing"},
		{"the re-run's account is being deleted", deleting, ""},
		{"the re-run's account is gone", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wl := published()
			objs := []client.Object{acct.DeepCopy(), rerun.DeepCopy(), wl}
			if tc.next != nil {
				objs = append(objs, tc.next.DeepCopy())
			}
			f := newFixture(t, hooks{}, objs...)
			var err error
			if tc.next != nil {
				_, err = f.reconcile("next")
			} else {
				_, err = workloadCleanup{f.reconciler()}.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(wl)})
			}
			if err != nil {
				t.Fatal(err)
			}
			var got kueue.Workload
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(wl), &got); err != nil {
				t.Fatal(err)
			}
			if c := conditionOf(got.Status.Conditions, v1alpha1.WorkloadConditionAccepted); c != tc.want {
				t.Errorf("the re-run's Workload: %s = %q, want %q", v1alpha1.WorkloadConditionAccepted, c, tc.want)
			}
			for _, c := range got.Status.Conditions {
				if v1alpha1.IsWorkloadCondition(c.Type) && strings.Contains(c.Message, "BatchAccount acct") {
					t.Errorf("the re-run's Workload speaks for the Accepted account: %s=%s: %s", c.Type, c.Status, c.Message)
				}
			}
		})
	}
}
