package controller

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/ledgerkey"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestPodReleaserHoldsAndReleases: the pod releaser removes only batchledger's finalizer,
// and only once holding the pod serves no purpose (every account that captures it
// recorded its result, it has none, or no account records it); a held pod that succeeded
// is requeued for the rest of MaxHold and then released with a Warning; a pod being
// deleted is held until it finishes, at most MaxHold after its deletion; in a namespace
// being deleted a pod is held at most NamespaceGrace, then released with a Warning on the
// pod and on the Namespace; a rejected patch leaves the pod held and is retried.
func TestPodReleaserHoldsAndReleases(t *testing.T) {
	const maxHold = time.Hour
	const jobTracking = "batch.kubernetes.io/job-tracking"
	j := jobJ(v1alpha1.ScopeResults).Obj()
	results := accountOfJ().RequireResults("").ResultsRecorded(1).Obj()
	// countsNone is results before the status write that counts its first result.
	countsNone := accountOfJ().RequireResults("").Obj()
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
	// The chunks the manager records are signed with its key; the releaser of each case
	// has a Ledger of its own with that key (a Ledger caches verdicts by resourceVersion,
	// which the fake client of every case starts anew).
	key, _, err := ledgerkey.Generate(testNow)
	if err != nil {
		t.Fatal(err)
	}
	// forgedRecording records the pod in a chunk shaped like the manager's but unsigned.
	forgedRecording := func(p *corev1.Pod) *v1alpha1.ShardResults {
		c := newChunk(results, chunkName(results.UID, "0", 0), 0)
		c.Results = []v1alpha1.RecordedResult{{Ordinal: 0, Shard: "A", Target: "job/j", JobUID: j.UID, Pod: p.Name, PodUID: p.UID}}
		return c
	}
	recording := func(p *corev1.Pod) *v1alpha1.ShardResults {
		c := newChunk(results, chunkName(results.UID, "0", 0), 0)
		c.Results = []v1alpha1.RecordedResult{{Ordinal: 0, Shard: "A", Target: "job/j", JobUID: j.UID, Pod: p.Name, PodUID: p.UID}}
		key.Sign(c)
		return c
	}
	// audit is a second account requiring results on Job j.
	audit := wrappers.MakeBatchAccount("audit", "ns").UID("audit-uid").Shards("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults("").ResultsRecorded(1).Obj()
	// acctBefore is the account acct as it was before it was deleted and created again.
	acctBefore := accountOfJ().UID("acct-old-uid").RequireResults("").Obj()
	recordingBy := func(ba *v1alpha1.BatchAccount, p *corev1.Pod) *v1alpha1.ShardResults {
		c := newChunk(ba, chunkName(ba.UID, "0", 0), 0)
		c.Results = []v1alpha1.RecordedResult{{Ordinal: 0, Shard: "A", Target: "job/j", JobUID: j.UID, Pod: p.Name, PodUID: p.UID}}
		key.Sign(c)
		return c
	}
	droppingBy := func(ba *v1alpha1.BatchAccount, p *corev1.Pod) *v1alpha1.ShardResults {
		c := newChunk(ba, chunkName(ba.UID, "0", 0), 0)
		c.DroppedPods = []types.UID{p.UID}
		key.Sign(c)
		return c
	}
	// deleting marks the pod deleted at t with a grace period of grace: the API server sets
	// the deletion timestamp to the end of the grace period.
	deleting := func(w *wrappers.PodWrapper, t time.Time, grace time.Duration) *corev1.Pod {
		p := w.Deleting(t.Add(grace)).Obj()
		p.DeletionGracePeriodSeconds = ptr.To(int64(grace / time.Second))
		return p
	}
	// nsDeleted is namespace ns, its deletion begun d before testNow.
	nsDeleted := func(d time.Duration) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Finalizers: []string{"example.com/keep"},
			DeletionTimestamp: &metav1.Time{Time: testNow.Add(-d)}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	}
	nsLive := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	ours := []string{jobTracking, v1alpha1.ResultFinalizer}
	released := []string{jobTracking}
	cases := []struct {
		name string
		pod  *corev1.Pod
		objs []client.Object
		h    hooks
		// started is how long before testNow the releaser started (0: an hour).
		started time.Duration

		wantErr               bool
		wantFinalizers        []string // nil: the pod is gone
		wantRequeueAfter      time.Duration
		wantPatches           int
		wantEvents            []string
		wantNamespaceEvents   []string
		wantReleased          float64
		wantExpired           float64
		wantNamespaceReleased float64
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
			// Until the status counts a result, the rule and the result container may
			// still change, and a result judged under the old ones would be lost with it.
			name:             "recorded, but the account's status counts no result yet: held",
			pod:              succeededAgo(time.Minute),
			objs:             []client.Object{countsNone, j, recording(succeededAgo(time.Minute))},
			wantFinalizers:   ours,
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			name:             "recorded only in a chunk the manager did not sign: held",
			pod:              succeededAgo(10 * time.Minute),
			objs:             []client.Object{results, j, forgedRecording(succeededAgo(time.Minute))},
			wantFinalizers:   ours,
			wantRequeueAfter: 50 * time.Minute,
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
			name:             "two accounts capture it, one recorded it: held for the other",
			pod:              succeededAgo(time.Minute),
			objs:             []client.Object{results, audit, j, recordingBy(audit, succeededAgo(time.Minute))},
			wantFinalizers:   ours,
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			name:           "two accounts capture it, both recorded it: released",
			pod:            succeededAgo(time.Minute),
			objs:           []client.Object{results, audit, j, recordingBy(audit, succeededAgo(time.Minute)), recordingBy(results, succeededAgo(time.Minute))},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1,
		},
		{
			name:           "two accounts capture it, one recorded it, the other dropped it past the per-shard bound: released",
			pod:            succeededAgo(time.Minute),
			objs:           []client.Object{results, audit, j, recordingBy(results, succeededAgo(time.Minute)), droppingBy(audit, succeededAgo(time.Minute))},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1,
		},
		{
			name:             "recorded only by the account of the same name before it was created again: held",
			pod:              succeededAgo(time.Minute),
			objs:             []client.Object{results, j, recordingBy(acctBefore, succeededAgo(time.Minute))},
			wantFinalizers:   ours,
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			name: "recorded by one account, the other does not require results: released",
			pod:  succeededAgo(time.Minute),
			objs: []client.Object{results, j, recordingBy(results, succeededAgo(time.Minute)),
				wrappers.MakeBatchAccount("counts", "ns").UID("counts-uid").Shards("A", "B").AssignJob("j", "0-1", "A", "B").Obj()},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1,
		},
		{
			name:             "running, being deleted: held until it finishes, at most MaxHold after its deletion",
			pod:              deleting(pod().Phase(corev1.PodRunning), testNow.Add(-10*time.Minute), 30*time.Second),
			objs:             []client.Object{results, j, nsLive},
			wantFinalizers:   ours,
			wantRequeueAfter: 50 * time.Minute,
		},
		{
			name:             "pending, being deleted: held until it finishes",
			pod:              deleting(pod().Phase(corev1.PodPending), testNow.Add(-10*time.Minute), 0),
			objs:             []client.Object{results, j},
			wantFinalizers:   ours,
			wantRequeueAfter: 50 * time.Minute,
		},
		{
			name:           "being deleted, never finished within MaxHold: released with a Warning",
			pod:            deleting(pod().Phase(corev1.PodRunning), testNow.Add(-maxHold-time.Second), 30*time.Second),
			objs:           []client.Object{results, j},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1, wantExpired: 1,
			wantEvents: []string{"Warning ResultNotRecorded"},
		},
		{
			name:             "being deleted, then succeeded during its graceful termination, unrecorded: held",
			pod:              deleting(pod().Succeeded(testNow.Add(-time.Minute), ""), testNow.Add(-2*time.Minute), 5*time.Minute),
			objs:             []client.Object{results, j},
			wantFinalizers:   ours,
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			name:           "being deleted, then succeeded during its graceful termination, recorded: released",
			pod:            deleting(pod().Succeeded(testNow.Add(-time.Minute), ""), testNow.Add(-2*time.Minute), 5*time.Minute),
			objs:           []client.Object{results, j, recording(succeededAgo(time.Minute))},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1,
		},
		{
			name:           "being deleted, then failed: released",
			pod:            deleting(pod().Phase(corev1.PodFailed), testNow.Add(-2*time.Minute), 5*time.Minute),
			objs:           []client.Object{results, j},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1,
		},
		{
			name:             "its namespace is being deleted, unrecorded: held for the rest of the namespace grace",
			pod:              succeededAgo(time.Minute),
			objs:             []client.Object{results, j, nsDeleted(2 * time.Second)},
			wantFinalizers:   ours,
			wantRequeueAfter: 3 * time.Second,
		},
		{
			name:             "its namespace is being deleted, it finished since: held for the namespace grace after it finished",
			pod:              succeededAgo(time.Second),
			objs:             []client.Object{results, j, nsDeleted(time.Minute)},
			wantFinalizers:   ours,
			wantRequeueAfter: 4 * time.Second,
		},
		{
			name:             "its namespace is being deleted, the releaser just started: held for the namespace grace after its start",
			pod:              succeededAgo(time.Hour),
			objs:             []client.Object{results, j, nsDeleted(time.Minute)},
			started:          2 * time.Second,
			wantFinalizers:   ours,
			wantRequeueAfter: 3 * time.Second,
		},
		{
			name:           "its namespace is being deleted, unrecorded past the namespace grace: released, Warnings on the pod and the namespace",
			pod:            succeededAgo(time.Minute),
			objs:           []client.Object{results, j, nsDeleted(10 * time.Second)},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1, wantNamespaceReleased: 1,
			wantEvents: []string{"Warning ResultNotRecorded"}, wantNamespaceEvents: []string{"Warning ResultNotRecorded"},
		},
		{
			name:           "its namespace is being deleted, one of two accounts recorded it, past the namespace grace: released",
			pod:            succeededAgo(time.Minute),
			objs:           []client.Object{results, audit, j, recordingBy(results, succeededAgo(time.Minute)), nsDeleted(10 * time.Second)},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1, wantNamespaceReleased: 1,
			wantEvents: []string{"Warning ResultNotRecorded"}, wantNamespaceEvents: []string{"Warning ResultNotRecorded"},
		},
		{
			name:           "its namespace is being deleted, recorded: released quietly",
			pod:            succeededAgo(time.Minute),
			objs:           []client.Object{results, j, recording(succeededAgo(time.Minute)), nsDeleted(time.Second)},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1,
		},
		{
			name:             "its namespace is being deleted, running within its grace period: held until the grace period ends, and the namespace grace after",
			pod:              deleting(pod().Phase(corev1.PodRunning), testNow.Add(-10*time.Second), 30*time.Second),
			objs:             []client.Object{results, j, nsDeleted(10 * time.Second)},
			wantFinalizers:   ours,
			wantRequeueAfter: 25 * time.Second,
		},
		{
			name:           "its namespace is being deleted, still running past its grace period: released, Warnings on the pod and the namespace",
			pod:            deleting(pod().Phase(corev1.PodRunning), testNow.Add(-time.Minute), 30*time.Second),
			objs:           []client.Object{results, j, nsDeleted(time.Minute)},
			wantFinalizers: released, wantPatches: 1, wantReleased: 1, wantNamespaceReleased: 1,
			wantEvents: []string{"Warning ResultNotRecorded"}, wantNamespaceEvents: []string{"Warning ResultNotRecorded"},
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
			// The pod finished while no releaser ran, longer ago than MaxHold: capture,
			// started with the releaser, still records it.
			name:             "succeeded 2h ago, unrecorded, the releaser started a minute ago: held for the rest of MaxHold from its start",
			pod:              succeededAgo(2 * time.Hour),
			objs:             []client.Object{results, j},
			started:          time.Minute,
			wantFinalizers:   ours,
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			// No result is to come: a pod its kubelet never reported finished in MaxHold
			// will not, whenever the releaser started.
			name:           "being deleted 2h ago, never finished, the releaser started a minute ago: released with a Warning",
			pod:            deleting(pod().Phase(corev1.PodRunning), testNow.Add(-2*time.Hour), 30*time.Second),
			objs:           []client.Object{results, j, nsLive},
			started:        time.Minute,
			wantFinalizers: released, wantPatches: 1, wantReleased: 1, wantExpired: 1,
			wantEvents: []string{"Warning ResultNotRecorded"},
		},
		{
			name:           "succeeded 2h ago, unrecorded, the releaser started MaxHold ago: released with a Warning",
			pod:            succeededAgo(2 * time.Hour),
			objs:           []client.Object{results, j},
			started:        maxHold,
			wantFinalizers: released, wantPatches: 1, wantReleased: 1, wantExpired: 1,
			wantEvents: []string{"Warning ResultNotRecorded"},
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
			r := &PodReleaser{Client: f.c, Metrics: m, Recorder: f, MaxHold: maxHold, Now: func() time.Time { return testNow }, Ledger: &Ledger{key: key},
				started: testNow.Add(-cmp.Or(tc.started, time.Hour))}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.pod)})
			if (err != nil) != tc.wantErr || res.RequeueAfter != tc.wantRequeueAfter {
				t.Fatalf("reconcile = %+v, %v; want requeue after %v, error %v", res, err, tc.wantRequeueAfter, tc.wantErr)
			}
			var got corev1.Pod
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(tc.pod), &got); err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(tc.wantFinalizers, got.Finalizers); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
			if n := len(f.writesOf("patch")); n != tc.wantPatches {
				t.Errorf("%d patches, want %d: %v", n, tc.wantPatches, f.writes)
			}
			if diff := gocmp.Diff(tc.wantEvents, f.eventsOf("Pod")); diff != "" {
				t.Errorf("pod events (-want +got):\n%s", diff)
			}
			if got := testutil.ToFloat64(m.PodReleases); got != tc.wantReleased {
				t.Errorf("pods released metric = %v, want %v", got, tc.wantReleased)
			}
			if got := testutil.ToFloat64(m.HoldsExpired); got != tc.wantExpired {
				t.Errorf("holds expired metric = %v, want %v", got, tc.wantExpired)
			}
			if diff := gocmp.Diff(tc.wantNamespaceEvents, f.eventsOf("Namespace")); diff != "" {
				t.Errorf("namespace events (-want +got):\n%s", diff)
			}
			if got := testutil.ToFloat64(m.NamespaceReleases); got != tc.wantNamespaceReleased {
				t.Errorf("namespace releases metric = %v, want %v", got, tc.wantNamespaceReleased)
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

// TestReleaseOutOfScope: a pod that left the results scope while held (its scope label
// removed or changed, so it left the manager's pod cache) is read live and released with
// a Warning, since the controller can no longer see it; a pod deleted for real, a pod
// still (or again) in scope and a pod released meanwhile are left alone, and a failed
// read or a rejected patch is retried.
func TestReleaseOutOfScope(t *testing.T) {
	const jobTracking = "batch.kubernetes.io/job-tracking"
	j := jobJ(v1alpha1.ScopeResults).Obj()
	results := accountOfJ().RequireResults("").Obj()
	// pod is held by batchledger and succeeded, its result unrecorded: in scope, the
	// releaser would hold it.
	pod := func() *wrappers.PodWrapper {
		return wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(jobTracking, v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), "")
	}
	ours := []string{jobTracking, v1alpha1.ResultFinalizer}
	released := []string{jobTracking}
	cases := []struct {
		name string
		pod  *corev1.Pod // nil: gone from the API server
		h    hooks
		// noReader leaves the releaser without an APIReader.
		noReader bool

		wantErr        bool
		wantFinalizers []string // nil: the pod is gone
		wantPatches    int
		wantEvents     []string
		wantReleased   float64
	}{
		{
			name:           "held, its scope label removed: released with a Warning",
			pod:            pod().NoLabel(v1alpha1.LabelScope).Obj(),
			wantFinalizers: released, wantPatches: 1, wantReleased: 1,
			wantEvents: []string{"Warning LeftResultsScope"},
		},
		{
			name:           "held, its scope label changed: released with a Warning",
			pod:            pod().Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj(),
			wantFinalizers: released, wantPatches: 1, wantReleased: 1,
			wantEvents: []string{"Warning LeftResultsScope"},
		},
		{
			name:        "held, being deleted, its scope label removed: released, and so gone",
			pod:         pod().NoLabel(v1alpha1.LabelScope).Finalizers(v1alpha1.ResultFinalizer).Deleting(testNow).Obj(),
			wantPatches: 1, wantReleased: 1,
			wantEvents: []string{"Warning LeftResultsScope"},
		},
		{
			name: "deleted for real: nothing",
		},
		{
			name:           "still or again in scope (relabelled, or a relist's stale tombstone): not released by this path",
			pod:            pod().Obj(),
			wantFinalizers: ours,
		},
		{
			name:           "out of scope, released meanwhile: nothing",
			pod:            pod().NoLabel(v1alpha1.LabelScope).Finalizers(jobTracking).Obj(),
			wantFinalizers: released,
		},
		{
			name:           "without an API reader: nothing",
			pod:            pod().NoLabel(v1alpha1.LabelScope).Obj(),
			noReader:       true,
			wantFinalizers: ours,
		},
		{
			name: "the patch is rejected (the finalizers changed meanwhile): held, the error",
			pod:  pod().NoLabel(v1alpha1.LabelScope).Obj(),
			h: hooks{patch: func(obj client.Object) error {
				return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, obj.GetName(), nil)
			}},
			wantErr:        true,
			wantFinalizers: ours, wantPatches: 1,
		},
		{
			name: "the pod cannot be read: held, the error",
			pod:  pod().NoLabel(v1alpha1.LabelScope).Obj(),
			h: hooks{list: func(list client.ObjectList) error {
				if _, ok := list.(*corev1.PodList); ok {
					return errors.New("the API server is unavailable")
				}
				return nil
			}},
			wantErr:        true,
			wantFinalizers: ours,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{results, j}
			key := client.ObjectKey{Namespace: "ns", Name: "j-0"}
			if tc.pod != nil {
				objs = append(objs, tc.pod)
			}
			f := newFixture(t, tc.h, objs...)
			m := newMetrics(prometheus.NewRegistry())
			r := &PodReleaser{Client: f.c, APIReader: f.c, Metrics: m, Recorder: f, Now: func() time.Time { return testNow }}
			if tc.noReader {
				r.APIReader = nil
			}
			res, err := r.ReleaseOutOfScope(context.Background(), ctrl.Request{NamespacedName: key})
			if (err != nil) != tc.wantErr || !res.IsZero() {
				t.Fatalf("ReleaseOutOfScope = %+v, %v; want no requeue, error %v", res, err, tc.wantErr)
			}
			var got corev1.Pod
			if err := f.c.Get(context.Background(), key, &got); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(tc.wantFinalizers, got.Finalizers); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
			if n := len(f.writesOf("patch")); n != tc.wantPatches {
				t.Errorf("%d patches, want %d: %v", n, tc.wantPatches, f.writes)
			}
			if diff := gocmp.Diff(tc.wantEvents, f.eventsOf("Pod")); diff != "" {
				t.Errorf("pod events (-want +got):\n%s", diff)
			}
			if got := testutil.ToFloat64(m.PodReleases); got != tc.wantReleased {
				t.Errorf("pods released metric = %v, want %v", got, tc.wantReleased)
			}
		})
	}
}

// TestLeftResultsScopeEvents: the out-of-scope releaser is woken by every delete event of
// a held pod from the pod cache (a pod leaving the results scope is reported with the
// labels it last matched with, as a pod deleted for real is), never by another pod's, nor
// by create, update or generic events.
func TestLeftResultsScopeEvents(t *testing.T) {
	j := jobJ(v1alpha1.ScopeResults).Obj()
	heldPod := func() *wrappers.PodWrapper {
		return wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer)
	}
	for _, tc := range []struct {
		name  string
		event event.DeleteEvent
		want  bool
	}{
		{"held: its scope label removed, or deleted for real", event.DeleteEvent{Object: heldPod().Obj()}, true},
		{"held, being deleted: its scope label removed, or deleted for real", event.DeleteEvent{Object: heldPod().Deleting(testNow).Obj()}, true},
		{"held: a relist's tombstone", event.DeleteEvent{Object: heldPod().Obj(), DeleteStateUnknown: true}, true},
		{"not held", event.DeleteEvent{Object: heldPod().Finalizers("batch.kubernetes.io/job-tracking").Obj()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LeftResultsScope.Delete(tc.event); got != tc.want {
				t.Errorf("delete event passed = %v, want %v", got, tc.want)
			}
		})
	}
	p := heldPod().Obj()
	if LeftResultsScope.Create(event.CreateEvent{Object: p}) || LeftResultsScope.Update(event.UpdateEvent{ObjectOld: p, ObjectNew: p}) ||
		LeftResultsScope.Generic(event.GenericEvent{Object: p}) {
		t.Error("a create, update or generic event passed; only delete events may")
	}
}

// TestSweepReleasesPodsThatLeftScopeWhileNoManagerLed: a held pod whose scope label was
// taken off (or changed) while no releaser ran is not in the new leader's pod cache,
// which holds the results scope only, and the cache's DELETED event that wakes
// ReleaseOutOfScope was sent to no one: deleted, it would stay Terminating for good. The
// sweep as the releaser starts to lead finds the held pods outside the results scope,
// in every namespace, and each one it sends is released by ReleaseOutOfScope; pods in
// scope or not held are not sent.
func TestSweepReleasesPodsThatLeftScopeWhileNoManagerLed(t *testing.T) {
	j := jobJ(v1alpha1.ScopeResults).Obj()
	heldIn := func(ns, name string) *wrappers.PodWrapper {
		p := wrappers.MakeIndexPod(j, name, 0).Finalizers(v1alpha1.ResultFinalizer).Succeeded(testNow.Add(-time.Minute), "")
		p.Namespace = ns
		return p
	}
	unlabelled := heldIn("ns", "unlabelled").NoLabel(v1alpha1.LabelScope).Deleting(testNow).Obj()
	relabelled := heldIn("other", "relabelled").Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj()
	inScope := heldIn("ns", "in-scope").Obj()
	free := wrappers.MakeIndexPod(j, "free", 1).NoLabel(v1alpha1.LabelScope).Obj()
	live := newFixture(t, hooks{}, j, unlabelled, relabelled, inScope, free)
	r := &PodReleaser{Client: live.c, APIReader: live.c, Recorder: live, Now: func() time.Time { return testNow }}

	sent := sweptAndReconciled(t, "pods", 2, r.sweepOutOfScope, r.ReleaseOutOfScope)
	if want := []string{"ns/unlabelled", "other/relabelled"}; !slices.Equal(sent, want) {
		t.Errorf("sent %v, want %v", sent, want)
	}
	var gone corev1.Pod
	if err := live.c.Get(context.Background(), client.ObjectKeyFromObject(unlabelled), &gone); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted pod out of scope is still there (%v), finalizers %v; want it released, and so gone", err, gone.Finalizers)
	}
	for _, p := range []*corev1.Pod{relabelled, inScope} {
		var got corev1.Pod
		if err := live.c.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
			t.Fatal(err)
		}
		if want := p == inScope; held(&got) != want {
			t.Errorf("%s: held %v after the sweep, want %v", p.Name, held(&got), want)
		}
	}
}
