package controller

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	jobsetkind "batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/ledgerkey"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/release"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// builderIndexer registers the controller's field indexes on a fake client builder.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// withIndexes gives a fake client builder the field indexes the controller reads by: an
// index for each field selector on pods the API server serves (status.phase,
// metadata.name), which the fake client cannot select by without one, and the
// controller's own (relations.RegisterIndexes).
func withIndexes(t *testing.T, b *fake.ClientBuilder) *fake.ClientBuilder {
	t.Helper()
	b.WithIndex(&corev1.Pod{}, "status.phase", func(o client.Object) []string { return []string{string(o.(*corev1.Pod).Status.Phase)} }).
		WithIndex(&corev1.Pod{}, release.NameField, func(o client.Object) []string { return []string{o.GetName()} })
	if err := relations.RegisterIndexes(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeClient is a fake client holding objs, with the controller's field indexes.
func fakeClient(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	return withIndexes(t, fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&v1alpha1.BatchAccount{})).Build()
}

func withUID(j *batchv1.Job, uid string) *batchv1.Job { j.UID = types.UID(uid); return j }

func jobSetChild(rj string, idx string) *batchv1.Job {
	j := wrappers.MakeJob("ts-"+rj+"-"+idx, "ns").Indexed(2).
		Label(jobsetapi.JobSetNameKey, "ts").Label(jobsetapi.ReplicatedJobNameKey, rj).
		Label(jobsetapi.JobIndexKey, idx).Label(jobsetkind.LabelRestartAttempt, "0").Obj()
	return withUID(j, j.Name+"-uid")
}

// TestHoldMatchesCapture: the pod releaser holds a pod exactly when result capture would
// record it, so no pod waits for a recording that never comes. Each case is one where the
// two used to disagree, or a plain one for contrast.
func TestHoldMatchesCapture(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	j := withUID(wrappers.MakeJob("j", "ns").Indexed(4).Obj(), "j-uid")
	oldJ := withUID(wrappers.MakeJob("j", "ns").Indexed(4).Obj(), "j-old-uid") // superseded identity
	k := withUID(wrappers.MakeJob("k", "ns").Indexed(1).Obj(), "k-uid")
	workers1, workers0, leader1 := jobSetChild("workers", "1"), jobSetChild("workers", "0"), jobSetChild("leader", "1")
	accounts := []client.Object{
		wrappers.MakeBatchAccount("results", "ns").Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").RequireResults("").Obj(),
		wrappers.MakeBatchAccount("train", "ns").Shards("W0", "W1").AssignJobSet("ts", "workers", 1, "0-1", "0-1").RequireResults("").Obj(),
		wrappers.MakeBatchAccount("counts", "ns").Shards("K").AssignJob("k", "0", "K").Obj(),
	}
	held := func(w *wrappers.PodWrapper) *corev1.Pod { return w.Finalizers(v1alpha1.ResultFinalizer).Obj() }
	done := func(w *wrappers.PodWrapper) *wrappers.PodWrapper { return w.Succeeded(now.Add(-time.Minute), "") }
	cases := []struct {
		name     string
		pod      *corev1.Pod
		jobs     []client.Object
		wantHold bool
	}{
		{"succeeded pod of the named Job, unrecorded", held(done(wrappers.MakeIndexPod(j, "j-0", 0))), []client.Object{j}, true},
		{"running pod of the named Job", held(wrappers.MakeIndexPod(j, "j-1", 1).Phase(corev1.PodRunning)), []client.Object{j}, true},
		{"pod of a superseded identity of the named Job", held(done(wrappers.MakeIndexPod(oldJ, "j-old-0", 0))), []client.Object{j}, true},
		{"pod of the named Job, deleted before the account observed it", held(done(wrappers.MakeIndexPod(j, "j-0", 0)).Deleting(now)), nil, true},
		{"pod of a superseded JobSet attempt, its successor not created yet", held(done(wrappers.MakeIndexPod(workers1, "w1-0", 0)).Deleting(now)), nil, true},
		{"pod no Job controls, with the Job's labels", held(done(wrappers.MakeIndexPod(j, "forged-0", 0)).NotByJobController().NoOwner()), []client.Object{j}, false},
		{"pod of the named Job orphaned by its deletion (propagationPolicy Orphan)", held(done(wrappers.MakeIndexPod(j, "j-0", 0)).NoOwner()), []client.Object{j}, true},
		{"orphaned pod whose controller-uid label names another Job than its mark", held(done(wrappers.MakeIndexPod(j, "j-0", 0)).NoOwner().Label(batchv1.ControllerUidLabel, "other-uid")), []client.Object{j}, false},
		{"malformed completion index", held(done(wrappers.MakeIndexPod(j, "j-x", 0)).Annotation(batchv1.JobCompletionIndexAnnotation, "x")), []client.Object{j}, false},
		{"pod of the named JobSet child", held(done(wrappers.MakeIndexPod(workers1, "w1-0", 0))), []client.Object{workers1}, true},
		{"pod of another job index of the named replicatedJob", held(done(wrappers.MakeIndexPod(workers0, "w0-0", 0))), []client.Object{workers0, workers1}, false},
		{"pod of another replicatedJob of the named JobSet (an Indexed leader)", held(done(wrappers.MakeIndexPod(leader1, "l1-0", 0))), []client.Object{leader1, workers1}, false},
		{"pod of a Job whose account does not require results", held(done(wrappers.MakeIndexPod(k, "k-0", 0))), []client.Object{k}, false},
		{"failed pod", held(wrappers.MakeIndexPod(j, "j-2", 2).Phase(corev1.PodFailed)), []client.Object{j}, false},
		{"deleted before it finished: it may still succeed while it terminates", held(wrappers.MakeIndexPod(j, "j-3", 3).Phase(corev1.PodRunning).Deleting(now)), []client.Object{j}, true},
		{"deleted before it finished, of a Job whose account does not require results", held(wrappers.MakeIndexPod(k, "k-0", 0).Phase(corev1.PodRunning).Deleting(now)), []client.Object{k}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeClient(t, append(append(slices.Clone(accounts), tc.jobs...), tc.pod)...)
			r := &PodReleaser{Client: c, Now: func() time.Time { return now }}
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.pod)}); err != nil {
				t.Fatal(err)
			}
			var got corev1.Pod
			// A deleted pod whose last finalizer went is gone: released.
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(tc.pod), &got); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
			if hold := slices.Contains(got.Finalizers, v1alpha1.ResultFinalizer); hold != tc.wantHold {
				t.Errorf("held = %v, want %v", hold, tc.wantHold)
			}
			if tc.pod.Status.Phase != corev1.PodSucceeded {
				return
			}
			// Capture must record exactly the succeeded pods the releaser holds.
			if captured := capturedByReconciler(t, c, tc.pod); captured != tc.wantHold {
				t.Errorf("captured = %v, but held = %v: capture and release disagree", captured, tc.wantHold)
			}
		})
	}
}

// capturedByReconciler runs the reconciler's observation and capture for every account
// and says whether pod's result was recorded.
func capturedByReconciler(t *testing.T, c client.Client, pod *corev1.Pod) bool {
	t.Helper()
	ctx := context.Background()
	r := &Reconciler{Client: c}
	var list v1alpha1.BatchAccountList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		ba := &list.Items[i]
		m := account.Compile(ba.Namespace, &ba.Spec)
		_, seen, err := r.observeAccount(ctx, ba, m)
		if err != nil {
			t.Fatal(err)
		}
		results, _, err := r.captureResults(ctx, ba, m, seen)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range results {
			if res.PodUID == pod.UID {
				return true
			}
		}
	}
	return false
}

// TestReleaseAfterMaxHold: a succeeded pod whose result is never recorded (its account's
// reconcile keeps failing) is held at most MaxHold after it finished, then released with
// a Warning event and a metric, so that it never strands its namespace.
func TestReleaseAfterMaxHold(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	j := withUID(wrappers.MakeJob("j", "ns").Indexed(1).Obj(), "j-uid")
	ba := wrappers.MakeBatchAccount("results", "ns").Shards("A").AssignJob("j", "0", "A").RequireResults("").Obj()
	for _, tc := range []struct {
		name      string
		finished  time.Duration // before now
		wantHold  bool
		wantAfter time.Duration
	}{
		{"within the hold: requeued for the rest of it", 10 * time.Minute, true, 50 * time.Minute},
		{"past the hold: released", 61 * time.Minute, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := wrappers.MakeIndexPod(j, "j-0", 0).Succeeded(now.Add(-tc.finished), "").Finalizers(v1alpha1.ResultFinalizer).Obj()
			c := fakeClient(t, ba, j, pod)
			m := newMetrics(prometheus.NewRegistry())
			// The releaser ran all along (TestPodReleaserHoldsAndReleases holds a pod that
			// finished before it started).
			r := &PodReleaser{Client: c, Metrics: m, MaxHold: time.Hour, Now: func() time.Time { return now }, started: now.Add(-2 * time.Hour)}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)})
			if err != nil {
				t.Fatal(err)
			}
			var got corev1.Pod
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), &got); err != nil {
				t.Fatal(err)
			}
			if hold := slices.Contains(got.Finalizers, v1alpha1.ResultFinalizer); hold != tc.wantHold || res.RequeueAfter != tc.wantAfter {
				t.Errorf("held = %v, requeue after %v; want %v, %v", hold, res.RequeueAfter, tc.wantHold, tc.wantAfter)
			}
			wantExpired := 0.0
			if !tc.wantHold {
				wantExpired = 1
			}
			if got := testutil.ToFloat64(m.HoldsExpired); got != wantExpired {
				t.Errorf("batchledger_pod_hold_expired_total = %v, want %v", got, wantExpired)
			}
		})
	}
}

// TestAccountChangesWakeItsHeldPods: turning requireResults off, or naming another Job,
// wakes the pods the account held under its old spec (the mapper runs for the old and the
// new object of an update), and each is released at once: no account captures it any
// more, so it never waits out MaxHold. Status writes and creations wake nothing.
func TestAccountChangesWakeItsHeldPods(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	j := withUID(wrappers.MakeJob("j", "ns").Indexed(1).Obj(), "j-uid")
	before := wrappers.MakeBatchAccount("results", "ns").Shards("A").AssignJob("j", "0", "A").RequireResults("").Generation(1).Obj()
	statusOnly := before.DeepCopy()
	statusOnly.Status.ObservedGeneration = 1
	for _, tc := range []struct {
		name  string
		after *v1alpha1.BatchAccount
	}{
		{"requireResults turned off", wrappers.MakeBatchAccount("results", "ns").Shards("A").AssignJob("j", "0", "A").Generation(2).Obj()},
		{"another Job named", wrappers.MakeBatchAccount("results", "ns").Shards("A").AssignJob("k", "0", "A").RequireResults("").Generation(2).Obj()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := wrappers.MakeIndexPod(j, "j-0", 0).Succeeded(now.Add(-time.Minute), "").Finalizers(v1alpha1.ResultFinalizer).Obj()
			c := fakeClient(t, tc.after, j, pod)
			r := &PodReleaser{Client: c, MaxHold: time.Hour, Now: func() time.Time { return now }}
			update := event.UpdateEvent{ObjectOld: before, ObjectNew: tc.after}
			if !accountReleasesPods.Update(update) {
				t.Fatal("the spec change does not pass accountReleasesPods")
			}
			woken := append(r.heldPodsOfAccount(context.Background(), before), r.heldPodsOfAccount(context.Background(), tc.after)...)
			if !slices.ContainsFunc(woken, func(req ctrl.Request) bool { return req.Name == pod.Name }) {
				t.Fatalf("woken %v, want pod %s", woken, pod.Name)
			}
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)}); err != nil {
				t.Fatal(err)
			}
			var got corev1.Pod
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), &got); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(got.Finalizers, v1alpha1.ResultFinalizer) {
				t.Errorf("pod still held after the account stopped capturing it")
			}
		})
	}
	if accountReleasesPods.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: statusOnly}) {
		t.Error("a status write passes accountReleasesPods")
	}
	// The status write that counts the first result lets the pods it records go
	// (PodReleaser.unrecorded waits for it); later counts change nothing for them.
	first := statusOnly.DeepCopy()
	first.Status.Results.Recorded = 1
	if !accountReleasesPods.Update(event.UpdateEvent{ObjectOld: statusOnly, ObjectNew: first}) {
		t.Error("the status write counting the first result does not pass accountReleasesPods")
	}
	second := first.DeepCopy()
	second.Status.Results.Recorded = 2
	if accountReleasesPods.Update(event.UpdateEvent{ObjectOld: first, ObjectNew: second}) {
		t.Error("a status write counting one more result passes accountReleasesPods")
	}
	if accountReleasesPods.Create(event.CreateEvent{Object: before}) {
		t.Error("a creation passes accountReleasesPods")
	}
}

// TestNamespaceDeletionWakesItsHeldPods: the start of a namespace's deletion wakes the
// pods held in it (and only those), whose hold it bounds; other Namespace events wake
// nothing.
func TestNamespaceDeletionWakesItsHeldPods(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	j := withUID(wrappers.MakeJob("j", "ns").Indexed(2).Obj(), "j-uid")
	heldPod := wrappers.MakeIndexPod(j, "j-0", 0).Succeeded(now, "").Finalizers(v1alpha1.ResultFinalizer).Obj()
	released := wrappers.MakeIndexPod(j, "j-1", 1).Succeeded(now, "").Obj()
	elsewhere := wrappers.MakeIndexPod(withUID(wrappers.MakeJob("j", "other").Indexed(1).Obj(), "other-uid"), "j-0", 0).
		Finalizers(v1alpha1.ResultFinalizer).Obj()
	live := namespaceMetadata()
	live.Name = "ns"
	deleting := live.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	for _, tc := range []struct {
		name string
		old  *metav1.PartialObjectMetadata
		new  *metav1.PartialObjectMetadata
		want bool
	}{
		{"its deletion begins", live, deleting, true},
		{"another change while it is live", live, live, false},
		{"another change while it is being deleted", deleting, deleting, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := namespaceDeletionStarted.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("passed = %v, want %v", got, tc.want)
			}
		})
	}
	if namespaceDeletionStarted.Create(event.CreateEvent{Object: deleting}) || namespaceDeletionStarted.Delete(event.DeleteEvent{Object: deleting}) {
		t.Error("a create or delete event passed")
	}
	c := fakeClient(t, j, heldPod, released, elsewhere)
	got := (&PodReleaser{Client: c}).heldPodsOfNamespace(context.Background(), deleting)
	want := []ctrl.Request{{NamespacedName: client.ObjectKeyFromObject(heldPod)}}
	if !slices.Equal(got, want) {
		t.Errorf("woken %v, want %v", got, want)
	}
}

// TestChunkChangesWakeNewlyRecordedPods: a chunk's creation wakes every pod it records
// (results, and dropped pods found by UID); an update of a trusted chunk wakes only the
// pods it records anew, so an account's releases do not grow with the square of its
// shards; an update of a chunk that was not trusted wakes all it records, since they
// may all be recorded only now. A dropped pod that is gone wakes nothing.
func TestChunkChangesWakeNewlyRecordedPods(t *testing.T) {
	key, _, err := ledgerkey.Generate(testNow)
	if err != nil {
		t.Fatal(err)
	}
	j := jobJ(v1alpha1.ScopeResults).Obj()
	ba := accountOfJ().RequireResults("").Obj()
	pods := make([]*corev1.Pod, 4)
	for i := range pods {
		pods[i] = wrappers.MakeIndexPod(j, fmt.Sprintf("j-%d", i), i%2).Succeeded(testNow, "").Finalizers(v1alpha1.ResultFinalizer).Obj()
	}
	// chunk records results of pods[results...] and drops the pods of UIDs dropped.
	chunk := func(results []int, dropped ...types.UID) *v1alpha1.ShardResults {
		c := newChunk(ba, chunkName(ba.UID, "0", 0), 0)
		for _, i := range results {
			p := pods[i]
			c.Results = append(c.Results, v1alpha1.RecordedResult{Ordinal: int32(i % 2), Target: "job/j", JobUID: j.UID, Index: int32(i % 2), Pod: p.Name, PodUID: p.UID})
		}
		c.DroppedPods = dropped
		key.Sign(c)
		return c
	}
	tampered := chunk([]int{0})
	tampered.Results[0].Shard = "forged"
	// judged is chunk with each result judged under the rule of digest rule, and rejudged
	// is judged("old") with pods[0]'s result judged again under the rule "new" (the rule
	// changed while the pod was held).
	judged := func(rule string, results ...int) *v1alpha1.ShardResults {
		c := chunk(results)
		for i := range c.Results {
			c.Results[i].RuleDigest = rule
		}
		key.Sign(c)
		return c
	}
	rejudged := judged("old", 0, 1)
	again := rejudged.Results[0]
	again.RuleDigest = "new"
	rejudged.Results = append(rejudged.Results, again)
	key.Sign(rejudged)
	for _, tc := range []struct {
		name     string
		old, new *v1alpha1.ShardResults
		want     []string
	}{
		{"created", nil, chunk([]int{0, 1}, pods[2].UID), []string{"j-0", "j-1", "j-2"}},
		{"a result added", chunk([]int{0}), chunk([]int{0, 1}), []string{"j-1"}},
		{"a pod dropped", chunk([]int{0, 1}), chunk([]int{0, 1}, pods[3].UID), []string{"j-3"}},
		{"nothing recorded anew", chunk([]int{0, 1}, pods[2].UID), chunk([]int{0, 1}, pods[2].UID), nil},
		{"a gone pod dropped", chunk([]int{0}), chunk([]int{0}, "gone-uid"), nil},
		{"the old chunk not trusted", tampered, chunk([]int{0, 1}), []string{"j-0", "j-1"}},
		{"a result judged again under a new rule", judged("old", 0, 1), rejudged, []string{"j-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &PodReleaser{Client: fakeClient(t, j, pods[0], pods[1], pods[2], pods[3]), Ledger: &Ledger{key: key}}
			var got []string
			for _, req := range r.podsNewlyRecorded(context.Background(), tc.old, tc.new) {
				got = append(got, req.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("woken %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHeldPodMayGoPassesWhatJudgeReads: the releaser is woken by a held pod's creation
// and by the updates that hold it, finish it, begin its deletion or change whose index pod it is;
// not by the updates of a running pod that change nothing judge reads, nor by any event
// of a pod it does not hold.
func TestHeldPodMayGoPassesWhatJudgeReads(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	j := withUID(wrappers.MakeJob("j", "ns").Indexed(2).Obj(), "j-uid")
	running := func() *wrappers.PodWrapper {
		return wrappers.MakeIndexPod(j, "j-0", 0).Finalizers(v1alpha1.ResultFinalizer)
	}
	scheduled := running().Obj()
	scheduled.Spec.NodeName = "node-1"
	started := scheduled.DeepCopy()
	started.Status.Phase = corev1.PodRunning
	failed := started.DeepCopy()
	failed.Status.Phase = corev1.PodFailed
	ownerChanged := started.DeepCopy()
	ownerChanged.OwnerReferences[0].UID = "another-j-uid"
	for _, tc := range []struct {
		name     string
		old, new *corev1.Pod
		want     bool
	}{
		{"scheduled", running().Obj(), scheduled, false},
		{"started", scheduled, started, false},
		{"succeeded", started, running().Succeeded(now, "").Obj(), true},
		{"failed", started, failed, true},
		{"deletion begun", started, running().Deleting(now).Obj(), true},
		{"relabelled", started, running().Label("batchledger.dev/scope", "coverage").Obj(), true},
		{"annotated", started, running().Annotation("note", "x").Obj(), true},
		{"another owner", started, ownerChanged, true},
		{"released", running().Succeeded(now, "").Obj(), wrappers.MakeIndexPod(j, "j-0", 0).Succeeded(now, "").Obj(), false},
		{"held only now", wrappers.MakeIndexPod(j, "j-0", 0).Obj(), running().Obj(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := heldPodMayGo.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("passed = %v, want %v", got, tc.want)
			}
		})
	}
	if !heldPodMayGo.Create(event.CreateEvent{Object: running().Obj()}) {
		t.Error("a held pod's creation does not pass")
	}
	if heldPodMayGo.Create(event.CreateEvent{Object: wrappers.MakeIndexPod(j, "j-0", 0).Obj()}) {
		t.Error("the creation of a pod not held passes")
	}
	if heldPodMayGo.Delete(event.DeleteEvent{Object: running().Obj()}) {
		t.Error("a deletion passes")
	}
}

// TestReleaseFromStaleCache: the cache's copy of a pod the releaser lets go still lists
// the Job controller's tracking finalizer before batchledger's, which the API server has
// already dropped, so the patch's test of the finalizer's index fails with 422 Invalid.
// The releaser reads the pod from the API server and releases it from that copy, without
// an error for the queue's backoff; a pod of the same name but another UID is not the one
// judged, and no API reader leaves the error to the queue.
func TestReleaseFromStaleCache(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	j := withUID(wrappers.MakeJob("j", "ns").Indexed(1).Obj(), "j-uid")
	ba := wrappers.MakeBatchAccount("results", "ns").Shards("A").AssignJob("j", "0", "A").RequireResults("").Obj()
	const tracking = "batch.kubernetes.io/job-tracking"
	// Held past MaxHold: the verdict is to let it go.
	pod := func(uid string, finalizers ...string) *corev1.Pod {
		return wrappers.MakeIndexPod(j, "j-0", 0).UID(uid).Succeeded(now.Add(-2*time.Hour), "").Finalizers(finalizers...).Obj()
	}
	for _, tc := range []struct {
		name      string
		stored    *corev1.Pod
		noReader  bool
		wantErr   bool
		wantHeld  bool
		wantTaken float64 // batchledger_pod_hold_expired_total
	}{
		{name: "released from the API server's copy", stored: pod("p-uid", v1alpha1.ResultFinalizer), wantTaken: 1},
		{name: "another pod of the same name is left alone", stored: pod("other-uid", v1alpha1.ResultFinalizer), wantHeld: true},
		{name: "without an API reader the error goes to the queue", stored: pod("p-uid", v1alpha1.ResultFinalizer), noReader: true, wantErr: true, wantHeld: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apiServer := fakeClient(t, ba, j, tc.stored)
			stale := pod("p-uid", tracking, v1alpha1.ResultFinalizer)
			cached := interceptor.NewClient(apiServer, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if p, ok := obj.(*corev1.Pod); ok && key.Name == stale.Name {
						stale.DeepCopyInto(p)
						return nil
					}
					return c.Get(ctx, key, obj, opts...)
				},
				// The fake returns json-patch's own error for a failed test; the API
				// server answers 422 Invalid.
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					err := c.Patch(ctx, obj, patch, opts...)
					if err != nil && !apierrors.IsNotFound(err) {
						return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure,
							Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid, Message: err.Error()}}
					}
					return err
				},
			})
			m := newMetrics(prometheus.NewRegistry())
			r := &PodReleaser{Client: cached, APIReader: apiServer, Metrics: m, MaxHold: time.Hour, Now: func() time.Time { return now },
				started: now.Add(-3 * time.Hour)}
			if tc.noReader {
				r.APIReader = nil
			}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(stale)})
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("Reconcile error = %v, want an error: %v", err, tc.wantErr)
			}
			var got corev1.Pod
			if err := apiServer.Get(context.Background(), client.ObjectKeyFromObject(stale), &got); err != nil {
				t.Fatal(err)
			}
			if held := slices.Contains(got.Finalizers, v1alpha1.ResultFinalizer); held != tc.wantHeld {
				t.Errorf("held = %v (finalizers %v), want %v", held, got.Finalizers, tc.wantHeld)
			}
			if got := testutil.ToFloat64(m.HoldsExpired); got != tc.wantTaken {
				t.Errorf("batchledger_pod_hold_expired_total = %v, want %v", got, tc.wantTaken)
			}
		})
	}
}
