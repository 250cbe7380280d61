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
	}{
		{name: "no verdict before: results wait, saying why", want: "False " + v1alpha1.ReasonResultsPending, message: "results can be neither recorded nor read"},
		{name: "every result accepted before: that stands", want: "True " + v1alpha1.ReasonAllResultsAccepted, message: "2/2 shard results accepted",
			before: func(ba *v1alpha1.BatchAccount) {
				ba.Status.Conditions = []metav1.Condition{accepted}
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
			if got.Status.Results.Recorded != ba.Status.Results.Recorded || got.Status.Shards.Accepted != ba.Status.Shards.Accepted {
				t.Errorf("results %d recorded, %d shards accepted; want those before (%d, %d)", got.Status.Results.Recorded,
					got.Status.Shards.Accepted, ba.Status.Results.Recorded, ba.Status.Shards.Accepted)
			}
			if res.RequeueAfter <= 0 || res.RequeueAfter > ResultsUnreadableRecheck {
				t.Errorf("requeue after %v, want within %v to read the results once the key loads", res.RequeueAfter, ResultsUnreadableRecheck)
			}
		})
	}
}
