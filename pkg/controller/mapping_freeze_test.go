package controller

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
	"batchledger.dev/batchledger/pkg/webhook"
)

// TestMappingFrozenOnceTheJobRuns: once Kueue admitted and unsuspended a target's Job,
// or the Job runs without Kueue, its pods are told their shards, so the BatchAccount
// webhook refuses to rewrite the mapping, although the account's status, its write of the
// admission or start waiting --waiting-status-delay, does not say so yet.
func TestMappingFrozenOnceTheJobRuns(t *testing.T) {
	const delay = 30 * time.Second
	cases := []struct {
		name string
		// run makes the Job run at time at, after the account's first status.
		run func(t *testing.T, f *fixture, j *batchv1.Job, at time.Time)
	}{
		{
			name: "Kueue admits and unsuspends the Job",
			run: func(t *testing.T, f *fixture, j *batchv1.Job, at time.Time) {
				writeStatus(t, f.c, wrappers.MakeWorkload("job-j", "ns").UID("wl-uid").ForJob(j).Admitted("gpu", at).Obj())
				unsuspend(t, f, j)
			},
		},
		{
			name: "the Job starts without Kueue",
			run: func(t *testing.T, f *fixture, j *batchv1.Job, at time.Time) {
				if err := f.c.Delete(context.Background(), wrappers.MakeWorkload("job-j", "ns").Obj()); err != nil {
					t.Fatal(err)
				}
				unsuspend(t, f, j)
				writeStatus(t, f.c, jobJ(v1alpha1.ScopeCoverage).StartTime(at).Obj())
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := jobJ(v1alpha1.ScopeCoverage).Suspend(true).ResourceVersion("").Obj()
			f := newFixture(t, hooks{}, accountOfJ().Obj(), j, wrappers.MakeWorkload("job-j", "ns").UID("wl-uid").ForJob(j).Obj())
			at := testNow
			r := f.reconciler()
			r.WaitingStatusDelay = delay
			r.Now = func() time.Time { return at }
			reconcile := func() {
				t.Helper()
				if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}); err != nil {
					t.Fatal(err)
				}
			}
			reconcile() // the first status: nothing run yet
			before := f.account(t, "acct")
			validator := webhook.BatchAccountValidator{Jobs: f.c}
			if _, err := validator.ValidateUpdate(context.Background(), before, reordered(before)); err != nil {
				t.Fatalf("before the Job ran, the mapping could not change: %v", err)
			}
			at = at.Add(time.Second)
			tc.run(t, f, j, at)
			at = at.Add(time.Second)
			reconcile()
			after := f.account(t, "acct")
			if _, err := validator.ValidateUpdate(context.Background(), after, reordered(after)); err == nil {
				t.Errorf("the mapping of an account whose Job runs (its pods told their shards) was rewritten; status: %+v", after.Status.Targets)
			}
		})
	}
}

// reordered is ba with its first assignment's shards swapped.
func reordered(ba *v1alpha1.BatchAccount) *v1alpha1.BatchAccount {
	out := ba.DeepCopy()
	s := out.Spec.Assignments[0].Shards
	s[0], s[1] = s[1], s[0]
	out.Generation++
	return out
}

// unsuspend lets Job j run, as Kueue does once it admitted the Job.
func unsuspend(t *testing.T, f *fixture, j *batchv1.Job) {
	t.Helper()
	var cur batchv1.Job
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(j), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Suspend = new(bool)
	if err := f.c.Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
}
