package controller

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestHeldJobOutOfScopeStillGoesAtMaxHold: a Job whose deletion started two hours ago
// (MaxHold 1h), its scope label taken off, an account naming it not having recorded its
// end. The hold must end at MaxHold whatever becomes of the label: when something keeps
// taking the label off (a GitOps tool, a policy engine) or refuses the relabel (an
// admission webhook or policy), the Job must not stay Terminating for good.
func TestHeldJobOutOfScopeStillGoesAtMaxHold(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refused bool
	}{{name: "label taken off again after each relabel"}, {name: "relabel refused", refused: true}} {
		t.Run(tc.name, func(t *testing.T) {
			job := jobAt(record).Completed("0-1", 2).Complete(testNow.Add(-3 * time.Hour)).Deleting(testNow.Add(-2 * time.Hour)).Obj()
			acct := accountOfJ().Obj()
			live := newFixture(t, hooks{}, job, acct)
			cache := newFixture(t, hooks{}, acct.DeepCopy())
			var writer client.Client = live.c
			if tc.refused {
				writer = refuseRelabel{live.c}
			}
			r := &JobRecorder{Client: cacheOf{Client: writer, cache: cache.c}, APIReader: live.c, MaxHold: time.Hour, Now: func() time.Time { return testNow },
				started: testNow.Add(-3 * time.Hour)}
			key := client.ObjectKeyFromObject(job)
			for i := 0; i < 5; i++ {
				res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
				var got batchv1.Job
				if gerr := live.c.Get(context.Background(), key, &got); gerr != nil {
					return // released: gone
				}
				if !recordHeld(&got) {
					return // released
				}
				t.Logf("round %d: reconcile %+v, %v; labels %v", i, res, err, got.Labels)
				if !tc.refused { // the remover takes the label off again before the cache sees it
					delete(got.Labels, v1alpha1.LabelScope)
					if err := live.c.Update(context.Background(), &got); err != nil {
						t.Fatal(err)
					}
				}
			}
			t.Errorf("Job deleted 2h ago still held after 5 reconciles (MaxHold 1h): releaseOutOfScope never applies MaxHold")
		})
	}
}

// refuseRelabel refuses label (merge) patches of Jobs, as a cluster's admission policy
// or webhook may; the finalizer's removal (a JSON patch) passes.
type refuseRelabel struct{ client.Client }

func (c refuseRelabel) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*batchv1.Job); ok && p.Type() == types.MergePatchType {
		return apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, obj.GetName(), errTest("admission policy: labels of this Job may not change"))
	}
	return c.Client.Patch(ctx, obj, p, opts...)
}

type errTest string

func (e errTest) Error() string { return string(e) }

// TestJobRecordHoldOutlastsAnOutage: a Job deleted while no manager led (its TTL, a
// JobSet restart) waits, Terminating, for the next leader to record its end. MaxHold
// counts from the later of its deletion and the recorder's start, so a leader that comes
// back after an outage longer than MaxHold gives its accounts MaxHold to record the Job
// before letting it go unrecorded, on the cache's path and on the out-of-scope path alike.
func TestJobRecordHoldOutlastsAnOutage(t *testing.T) {
	const maxHold = time.Hour
	for _, tc := range []struct {
		name string
		// deleted and started are how long before testNow the Job's deletion and the
		// recorder's start were.
		deleted, started time.Duration
		// outOfScope takes the Job's scope label off: it is seen through releaseOutOfScope.
		outOfScope bool

		wantHeld         bool
		wantRequeueAfter time.Duration
	}{
		{name: "deleted 3h ago, the recorder just started: held for MaxHold", deleted: 3 * time.Hour,
			wantHeld: true, wantRequeueAfter: maxHold},
		{name: "deleted 3h ago, the recorder started 20m ago: held for the rest of MaxHold", deleted: 3 * time.Hour, started: 20 * time.Minute,
			wantHeld: true, wantRequeueAfter: 40 * time.Minute},
		{name: "deleted 3h ago, the recorder started 2h ago: released unrecorded", deleted: 3 * time.Hour, started: 2 * time.Hour},
		{name: "deleted 20m ago, the recorder started 2h ago: held for the rest of MaxHold", deleted: 20 * time.Minute, started: 2 * time.Hour,
			wantHeld: true, wantRequeueAfter: 40 * time.Minute},
		{name: "out of scope, deleted 3h ago, the recorder just started: held for MaxHold", deleted: 3 * time.Hour, outOfScope: true,
			wantHeld: true, wantRequeueAfter: maxHold},
		{name: "out of scope, deleted 3h ago, the recorder started 2h ago: released unrecorded", deleted: 3 * time.Hour, started: 2 * time.Hour, outOfScope: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := jobAt(record).Completed("0-1", 2).Complete(testNow.Add(-4 * time.Hour)).Deleting(testNow.Add(-tc.deleted)).Obj()
			if !tc.outOfScope {
				job.Labels = map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeCoverage}
			}
			acct := accountOfJ().Obj()
			live := newFixture(t, hooks{}, job, acct)
			cached := []client.Object{acct.DeepCopy()}
			if !tc.outOfScope {
				cached = append(cached, job.DeepCopy())
			}
			cache := newFixture(t, hooks{}, cached...)
			r := &JobRecorder{Client: cacheOf{Client: live.c, cache: cache.c}, APIReader: live.c, MaxHold: maxHold,
				Now: func() time.Time { return testNow }}
			if tc.started > 0 {
				r.started = testNow.Add(-tc.started)
			}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)})
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != tc.wantRequeueAfter {
				t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, tc.wantRequeueAfter)
			}
			var got batchv1.Job
			err = live.c.Get(context.Background(), client.ObjectKeyFromObject(job), &got)
			if held := err == nil && recordHeld(&got); held != tc.wantHeld {
				t.Errorf("held = %v (%v), want %v", held, err, tc.wantHeld)
			}
		})
	}
}
