package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestPodReleaserHoldsAndReleases: the pod releaser removes only batchledger's finalizer,
// and only once holding the pod serves no purpose (its result is recorded, it has none,
// or no account records it); a held pod that succeeded is requeued for the rest of
// MaxHold and then released with a Warning; a rejected patch leaves the pod held and
// is retried.
func TestPodReleaserHoldsAndReleases(t *testing.T) {
	const maxHold = time.Hour
	const jobTracking = "batch.kubernetes.io/job-tracking"
	j := jobJ(v1alpha1.ScopeResults).Obj()
	results := accountOfJ().RequireResults("").Obj()
	coverage := accountOfJ().Obj()
	deletedAccount := accountOfJ().RequireResults("").Obj()
	deletedAccount.Finalizers = []string{"example.com/keep"}
	deletedAccount.DeletionTimestamp = &metav1.Time{Time: testNow.Add(-time.Minute)}
	// The account recorded Job j, which was deleted since.
	recordedJ := accountOfJ().RequireResults("").TargetStatus(v1alpha1.TargetStatus{Name: "job/j", Job: "j", UID: j.UID, Found: true}).Obj()
	pod := func() *wrappers.PodWrapper {
		return wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(jobTracking, v1alpha1.ResultFinalizer)
	}
	succeededAgo := func(d time.Duration) *corev1.Pod { return pod().Succeeded(testNow.Add(-d), "").Obj() }
	recording := func(p *corev1.Pod) *v1alpha1.ShardResults {
		c := newChunk(results, chunkName(results.UID, "0", 0), 0)
		c.Results = []v1alpha1.RecordedResult{{Ordinal: 0, Shard: "A", Target: "job/j", JobUID: j.UID, Pod: p.Name, PodUID: p.UID}}
		return c
	}
	ours := []string{jobTracking, v1alpha1.ResultFinalizer}
	released := []string{jobTracking}
	cases := []struct {
		name string
		pod  *corev1.Pod
		objs []client.Object
		h    hooks

		wantErr          bool
		wantFinalizers   []string // nil: the pod is gone
		wantRequeueAfter time.Duration
		wantPatches      int
		wantEvents       []string
		wantReleased     float64
		wantExpired      float64
	}{
		{
			name:           "not held by batchledger: untouched",
			pod:            wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(jobTracking).Succeeded(testNow, "").Obj(),
			objs:           []client.Object{results, j},
			wantFinalizers: released,
		},
		{
			name:           "its result is recorded: released, the Job controller's finalizer kept",
			pod:            succeededAgo(time.Minute),
			objs:           []client.Object{results, j, recording(succeededAgo(time.Minute))},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1,
		},
		{
			name:             "succeeded, unrecorded: held, requeued for the rest of MaxHold",
			pod:              succeededAgo(10 * time.Minute),
			objs:             []client.Object{results, j},
			wantFinalizers:   ours,
			wantRequeueAfter: 50 * time.Minute,
		},
		{
			name:           "running: held, not requeued (its success wakes the releaser)",
			pod:            pod().Phase(corev1.PodRunning).Obj(),
			objs:           []client.Object{results, j},
			wantFinalizers: ours,
		},
		{
			name:           "its Job was deleted, the account recorded it: held",
			pod:            succeededAgo(time.Minute),
			objs:           []client.Object{recordedJ},
			wantFinalizers: ours, wantRequeueAfter: 59 * time.Minute,
		},
		{
			name:           "failed: no result to wait for, released",
			pod:            pod().Phase(corev1.PodFailed).Obj(),
			objs:           []client.Object{results, j},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1,
		},
		{
			name:           "its account does not require results: released",
			pod:            succeededAgo(time.Minute),
			objs:           []client.Object{coverage, j},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1,
		},
		{
			name:           "its account is being deleted: released",
			pod:            succeededAgo(time.Minute),
			objs:           []client.Object{deletedAccount, j},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1,
		},
		{
			name:           "held past MaxHold, never recorded: released with a Warning",
			pod:            succeededAgo(maxHold + time.Second),
			objs:           []client.Object{results, j},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1, wantExpired: 1,
			wantEvents: []string{"Warning ResultNotRecorded"},
		},
		{
			name: "the patch is rejected (the finalizers changed meanwhile): held, the error",
			pod:  pod().Phase(corev1.PodFailed).Obj(),
			objs: []client.Object{results, j},
			h: hooks{patch: func(obj client.Object) error {
				return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, obj.GetName(), nil)
			}},
			wantErr:        true,
			wantFinalizers: ours, wantPatches: 1,
		},
		{
			name: "the pod is gone when patched: nothing more",
			pod:  pod().Phase(corev1.PodFailed).Obj(),
			objs: []client.Object{results, j},
			h: hooks{patch: func(obj client.Object) error {
				return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, obj.GetName())
			}},
			wantFinalizers: ours, wantPatches: 1,
		},
		{
			name: "the account cannot be read: held, the error",
			pod:  succeededAgo(2 * maxHold),
			objs: []client.Object{results, j},
			h: hooks{list: func(list client.ObjectList) error {
				if _, ok := list.(*v1alpha1.BatchAccountList); ok {
					return errors.New("the cache is not synced")
				}
				return nil
			}},
			wantErr:        true,
			wantFinalizers: ours,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.h, append(slices.Clone(tc.objs), tc.pod)...)
			m := newMetrics(prometheus.NewRegistry())
			r := &PodReleaser{Client: f.c, Metrics: m, Recorder: f, MaxHold: maxHold, Now: func() time.Time { return testNow }}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.pod)})
			if (err != nil) != tc.wantErr || res.RequeueAfter != tc.wantRequeueAfter {
				t.Fatalf("reconcile = %+v, %v; want requeue after %v, error %v", res, err, tc.wantRequeueAfter, tc.wantErr)
			}
			var got corev1.Pod
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(tc.pod), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantFinalizers, got.Finalizers); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
			if n := len(f.writesOf("patch")); n != tc.wantPatches {
				t.Errorf("%d patches, want %d: %v", n, tc.wantPatches, f.writes)
			}
			if diff := cmp.Diff(tc.wantEvents, f.eventsOf("Pod")); diff != "" {
				t.Errorf("pod events (-want +got):\n%s", diff)
			}
			if got := testutil.ToFloat64(m.PodReleases); got != tc.wantReleased {
				t.Errorf("pods released metric = %v, want %v", got, tc.wantReleased)
			}
			if got := testutil.ToFloat64(m.HoldsExpired); got != tc.wantExpired {
				t.Errorf("holds expired metric = %v, want %v", got, tc.wantExpired)
			}
		})
	}
}

// TestPodReleaserIgnoresAPodThatIsGone: a request for a pod deleted meanwhile ends quietly.
func TestPodReleaserIgnoresAPodThatIsGone(t *testing.T) {
	f := newFixture(t, hooks{})
	r := &PodReleaser{Client: f.c, Recorder: f, Now: func() time.Time { return testNow }}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "gone"}})
	if err != nil || !res.IsZero() || len(f.writes) != 0 {
		t.Errorf("reconcile = %+v, %v, writes %v; want nothing", res, err, f.writes)
	}
}
