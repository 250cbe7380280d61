package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestHeldPodsOfEveryIdentityAreCaptured: a pod the releaser holds for an account is
// captured by that account whichever Job identity of the target it ran under, also when
// the Job the target follows now is read outside the results cache (created without the
// scope label while the scope webhook failed open, so its pods are read from the API
// server or a late Job's cache, which hold only that Job's pods). Otherwise the pod of
// the earlier identity waits MaxHold for a record that never comes, and its result is
// never written to the ledger.
func TestHeldPodsOfEveryIdentityAreCaptured(t *testing.T) {
	old := wrappers.MakeJob("j", "ns").Indexed(2).UID("j-old-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).Obj()
	heldOld := wrappers.MakeIndexPod(old, "j-old-0", 0).Finalizers(v1alpha1.ResultFinalizer).
		Succeeded(testNow.Add(-time.Minute), reportOf(t, "A")).Obj()
	for _, tc := range []struct {
		name string
		// current is the Job the target follows now.
		current *wrappers.JobWrapper
	}{
		{"the current Job is in the results scope", jobJ(v1alpha1.ScopeResults)},
		{"the current Job carries no scope label", jobJ("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ba := accountOfJ().RequireResults("").Obj()
			f := newFixture(t, hooks{}, ba, tc.current.Obj(), heldOld.DeepCopy())
			if _, err := f.reconcile(ba.Name); err != nil {
				t.Fatal(err)
			}
			rel := &PodReleaser{Client: f.c, APIReader: f.c, Recorder: f, Ledger: &f.ledger,
				Now: func() time.Time { return testNow }, started: testNow.Add(-time.Hour)}
			res, err := rel.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(heldOld)})
			if err != nil {
				t.Fatal(err)
			}
			var got corev1.Pod
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(heldOld), &got); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(got.Finalizers, v1alpha1.ResultFinalizer) {
				t.Errorf("the earlier identity's pod is still held (requeue after %v): its result was not captured", res.RequeueAfter)
			}
			if st := f.account(t, ba.Name).Status; st.Results.Recorded != 1 {
				t.Errorf("status.results.recorded = %d, want 1", st.Results.Recorded)
			}
		})
	}
}
