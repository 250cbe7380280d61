package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/ledgerkey"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// missingKey is the key Secret deleted: the manager may not create Secrets (its Role
// grants get and update on ledger-key only), so every Load fails.
type missingKey struct{}

func (missingKey) Load(context.Context) (*ledgerkey.Key, error) {
	return nil, errors.New(`creating the signing key Secret batchledger-system/batchledger-ledger-key: secrets is forbidden`)
}

// TestMissingKeyStillBoundsHeldPods: with the key Secret missing, held pods are never
// released: not a pod no account captures, not past MaxHold, not in a namespace being
// deleted past its grace.
func TestMissingKeyStillBoundsHeldPods(t *testing.T) {
	const maxHold = time.Hour
	j := jobJ(v1alpha1.ScopeResults).Obj()
	nsDeleted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Finalizers: []string{"kubernetes"},
		DeletionTimestamp: &metav1.Time{Time: testNow.Add(-time.Hour)}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	for _, tc := range []struct {
		name string
		objs []client.Object
		pod  *corev1.Pod
	}{
		{"no account captures it", []client.Object{j},
			wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), "").Obj()},
		{"succeeded past MaxHold", []client.Object{j, accountOfJ().RequireResults("").Obj()},
			wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-3*maxHold), "").Obj()},
		{"namespace being deleted for an hour, running past its grace period", []client.Object{j, nsDeleted},
			func() *corev1.Pod {
				p := wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Phase(corev1.PodRunning).Deleting(testNow.Add(-59 * time.Minute)).Obj()
				p.DeletionGracePeriodSeconds = ptr.To(int64(30))
				return p
			}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, append(tc.objs, tc.pod)...)
			r := &PodReleaser{Client: f.c, Recorder: f, MaxHold: maxHold, Now: func() time.Time { return testNow },
				Ledger: &Ledger{Source: missingKey{}}, started: testNow.Add(-time.Hour)}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.pod)})
			var got corev1.Pod
			switch gerr := f.c.Get(context.Background(), client.ObjectKeyFromObject(tc.pod), &got); {
			case apierrors.IsNotFound(gerr):
				return // released, and its deletion completed
			case gerr != nil:
				t.Fatal(gerr)
			}
			for _, fin := range got.Finalizers {
				if fin == v1alpha1.ResultFinalizer {
					t.Errorf("pod still held (reconcile error: %v); want it released", err)
				}
			}
		})
	}
}

// TestMissingKeyStillRecordsAJobsEnd: with the key Secret missing, an account requiring
// results still writes its status, so a deleted Job's end is recorded and the record
// finalizer lets the Job go (recording it needs no key); the results it judged before
// stand, nothing new is judged, and it comes back to read them.
func TestMissingKeyStillRecordsAJobsEnd(t *testing.T) {
	accepted := cond(v1alpha1.ConditionResultsAccepted, metav1.ConditionTrue, v1alpha1.ReasonAllResultsAccepted, "2/2 shard results accepted")
	cases := []struct {
		name    string
		before  func(*v1alpha1.BatchAccount)
		want    string // ResultsAccepted, status and reason
		message string // a part of its message
		// replaced: the verdict before was judged on an earlier identity of j, so no
		// shard's result stands now.
		replaced bool
	}{
		{name: "no verdict before: results wait, saying why", want: "False " + v1alpha1.ReasonResultsPending, message: "results can be neither recorded nor read"},
		{name: "every result accepted before: that stands", want: "True " + v1alpha1.ReasonAllResultsAccepted, message: "2/2 shard results accepted",
			before: func(ba *v1alpha1.BatchAccount) {
				// Judged at the account's generation (accountOfJ's 1), on Job j's identity.
				accepted.ObservedGeneration = ba.Generation
				ba.Status.Conditions = []metav1.Condition{accepted}
				ba.Status.Targets = []v1alpha1.TargetStatus{{Name: "job/j", Job: "j", UID: "j-uid", Found: true}}
				ba.Status.Results.Recorded, ba.Status.Shards.Accepted = 2, 2
			}},
		{name: "every result of an earlier identity accepted before: this one's wait", want: "False " + v1alpha1.ReasonResultsPending,
			message: "identities since replaced", replaced: true,
			before: func(ba *v1alpha1.BatchAccount) {
				accepted.ObservedGeneration = ba.Generation
				ba.Status.Conditions = []metav1.Condition{accepted}
				ba.Status.Targets = []v1alpha1.TargetStatus{{Name: "job/j", Job: "j", UID: "j-earlier-uid", Found: true}}
				ba.Status.Results.Recorded, ba.Status.Shards.Accepted = 2, 2
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow.Add(-time.Minute)).
				Finalizers(v1alpha1.RecordFinalizer).Deleting(testNow.Add(-30 * time.Second)).Obj()
			ba := accountOfJ().RequireResults("").Obj()
			if tc.before != nil {
				tc.before(ba)
			}
			f := newFixture(t, hooks{}, j, ba)
			r := f.reconciler()
			r.Ledger = &Ledger{Source: missingKey{}}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ba)})
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			got := f.account(t, "acct")
			if !recordsEnd(&got.Status, j) {
				t.Errorf("the account does not record Job j's end; the record finalizer holds j for %s", DefaultMaxRecordHold)
			}
			c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionResultsAccepted)
			if c == nil || string(c.Status)+" "+c.Reason != tc.want || !strings.Contains(c.Message, tc.message) {
				t.Errorf("ResultsAccepted = %+v, want %s with %q", c, tc.want, tc.message)
			}
			wantAccepted := ba.Status.Shards.Accepted
			if tc.replaced {
				wantAccepted = 0
			}
			if got.Status.Results.Recorded != ba.Status.Results.Recorded || got.Status.Shards.Accepted != wantAccepted {
				t.Errorf("results %d recorded, %d shards accepted; want %d, %d", got.Status.Results.Recorded,
					got.Status.Shards.Accepted, ba.Status.Results.Recorded, wantAccepted)
			}
			if res.RequeueAfter <= 0 || res.RequeueAfter > ResultsUnreadableRecheck {
				t.Errorf("requeue after %v, want within %v to read the results once the key loads", res.RequeueAfter, ResultsUnreadableRecheck)
			}
		})
	}
}

// flakyKey is a key Secret that cannot be read for a while (the API server times out).
type flakyKey struct{}

func (flakyKey) Load(context.Context) (*ledgerkey.Key, error) {
	return nil, errors.New("getting the signing key Secret: the server was unable to return a response in the time allotted")
}

// TestMissingKeyKeepsNoVerdictOfAnEarlierSpec: without the key, an account keeps the
// results verdict of its current generation only; after its spec grew a shard whose
// result was never read, neither ResultsAccepted nor Accepted is True.
func TestMissingKeyKeepsNoVerdictOfAnEarlierSpec(t *testing.T) {
	accepted := cond(v1alpha1.ConditionResultsAccepted, metav1.ConditionTrue, v1alpha1.ReasonAllResultsAccepted, "2/2 shard results accepted")
	j := wrappers.MakeJob("j", "ns").Indexed(3).UID("j-uid").ResourceVersion("1").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).
		Completed("0-2", 3).Complete(testNow.Add(-time.Minute)).Obj()
	ba := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(2).Shards("A", "B", "C").
		AssignJob("j", "0-2", "A", "B", "C").RequireResults("").Obj()
	ba.Status.ObservedGeneration = 1
	ba.Status.Conditions = []metav1.Condition{accepted}
	ba.Status.Results.Recorded, ba.Status.Shards.Accepted, ba.Status.Shards.Total = 2, 2, 2
	f := newFixture(t, hooks{}, j, ba)
	r := f.reconciler()
	r.Ledger = &Ledger{Source: missingKey{}}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ba)}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	got := f.account(t, "acct")
	ra := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionResultsAccepted)
	acc := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAccepted)
	t.Logf("shards %d/%d accepted; ResultsAccepted=%s %s %q (gen %d); Accepted=%s %s %q", got.Status.Shards.Accepted, got.Status.Shards.Total,
		ra.Status, ra.Reason, ra.Message, ra.ObservedGeneration, acc.Status, acc.Reason, acc.Message)
	if ra.Status == metav1.ConditionTrue || acc.Status == metav1.ConditionTrue {
		t.Errorf("shard C's result was never read, yet ResultsAccepted=%s and Accepted=%s at generation %d", ra.Status, acc.Status, got.Generation)
	}
}

// TestKeyErrorKeepsLegacyPodsHeld: a key that does not load for a moment tells nothing of
// which unmarked pods an earlier version held, so such a pod stays held (within the
// bounds on a hold) rather than going unrecorded.
func TestKeyErrorKeepsLegacyPodsHeld(t *testing.T) {
	j := jobJ(v1alpha1.ScopeResults).Obj()
	acct := accountOfJ().RequireResults("").Obj()
	pod := wrappers.MakeIndexPod(j, "j-0", 0).NotByJobController().Created(testNow.Add(-2*time.Hour)).
		Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), report(t, "A")).Obj()
	f := newFixture(t, hooks{}, j, acct, pod)
	r := &PodReleaser{Client: f.c, Recorder: f, Now: func() time.Time { return testNow },
		Ledger: &Ledger{Source: flakyKey{}}, started: testNow.Add(-time.Hour)}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)})
	var got corev1.Pod
	if gerr := f.c.Get(context.Background(), client.ObjectKeyFromObject(pod), &got); gerr != nil {
		t.Fatalf("pod gone (released): %v (reconcile %+v, %v)", gerr, res, err)
	}
	held := false
	for _, fin := range got.Finalizers {
		held = held || fin == v1alpha1.ResultFinalizer
	}
	if !held {
		t.Errorf("legacy pod released unrecorded on a transient key read error (reconcile %+v, %v); want it held until the key loads", res, err)
	}
}

// keyAfterFailures is a key Secret that cannot be read the first failures times (the API
// server times out), then loads key.
type keyAfterFailures struct {
	key      *ledgerkey.Key
	failures *int
}

func (s keyAfterFailures) Load(ctx context.Context) (*ledgerkey.Key, error) {
	if *s.failures > 0 {
		*s.failures--
		return flakyKey{}.Load(ctx)
	}
	return s.key, nil
}

// TestKeyErrorLooksAgainAtARecordedPod: a held pod whose result is recorded, judged while
// the key does not load for a moment (a manager starting), cannot tell its chunk from a
// forged one and stays held; the releaser looks again soon, not only at MaxHold, since no
// change of the pod or of the chunk may come to wake it once the key loads.
func TestKeyErrorLooksAgainAtARecordedPod(t *testing.T) {
	key, _, err := ledgerkey.Generate(testNow.Add(-48 * time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	j := jobJ(v1alpha1.ScopeResults).Obj()
	acct := accountOfJ().RequireResults("").ResultsRecorded(1).Obj()
	pod := wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), report(t, "A")).Obj()
	chunk := newChunk(acct, chunkName(acct.UID, "0", 0), 0)
	chunk.Results = []v1alpha1.RecordedResult{{Ordinal: 0, Shard: "A", Target: "job/j", JobUID: j.UID, Index: 0, Pod: pod.Name, PodUID: pod.UID,
		RecordedAt: metav1.NewTime(testNow), Sequence: 1, RuleDigest: v1alpha1.RuleDigest("")}}
	key.Sign(chunk)
	f := newFixture(t, hooks{}, j, acct, pod, chunk)
	failures := 2 // the reconcile reads the key twice: for legacy pods, for the chunk
	r := &PodReleaser{Client: f.c, Recorder: f, Now: func() time.Time { return testNow },
		Ledger: &Ledger{Source: keyAfterFailures{key: key, failures: &failures}}, started: testNow.Add(-time.Hour)}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)}
	res, err := r.Reconcile(context.Background(), req)
	if err == nil && (res.RequeueAfter <= 0 || res.RequeueAfter > ResultsUnreadableRecheck) {
		t.Fatalf("judged without the key: requeue after %v (error %v), want an error or a look again within %v", res.RequeueAfter, err, ResultsUnreadableRecheck)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("reconcile once the key loads: %v", err)
	}
	var got corev1.Pod
	if gerr := f.c.Get(context.Background(), req.NamespacedName, &got); gerr != nil && !apierrors.IsNotFound(gerr) {
		t.Fatal(gerr)
	}
	for _, fin := range got.Finalizers {
		if fin == v1alpha1.ResultFinalizer {
			t.Errorf("pod still held once the key loaded, its result recorded")
		}
	}
}
