package workerrole

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/controller"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

var testNow = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

const maxHold = time.Hour

// copyOfJ is the worker's copy of Job j, dispatched for the manager Workload job-j-d41e5.
func copyOfJ() *wrappers.JobWrapper {
	return wrappers.MakeJob("j", "ns").UID("worker-j-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).
		Label(multikueue.PrebuiltWorkloadKey, "job-j-d41e5").Label(multikueue.OriginLabel, "multikueue")
}

// heldPod is a held index pod of job, as the worker's webhook admits it: with the
// Workload annotation when job is a MultiKueue copy the Job controller created it for.
func heldPod(job *batchv1.Job) *wrappers.PodWrapper {
	p := wrappers.MakeIndexPod(job, "j-3", 3).Finalizers(v1alpha1.ResultFinalizer)
	if wl := multikueue.CopiedFor(job); wl != "" {
		p = p.Annotation(v1alpha1.AnnotationWorkload, wl)
	}
	return p
}

// runningSince makes r a releaser that started at t (its first reconcile): one running
// since before the pods it judges finished, which MaxHold then counts from their finish.
func runningSince(r *controller.PodReleaser, t time.Time) {
	now := r.Now
	r.Now = func() time.Time { return t }
	_, _ = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "none"}})
	r.Now = now
}

func newCapture(objs []client.Object, funcs interceptor.Funcs) (*Capture, client.Client) {
	c := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
	now := func() time.Time { return testNow }
	return &Capture{Client: c, Now: now,
		Releaser: &controller.PodReleaser{Client: c, Recorders: Recorders{c}, MaxHold: maxHold, Now: now}}, c
}

// TestCaptureRecordsThenReleases: a succeeded held pod of a dispatched Job copy is
// recorded in a WorkerResult under the manager's identity and then released; a pod no
// manager Workload asked for is released unrecorded; a running pod stays held; a pod whose
// record cannot be written is held for MaxHold after it finished, never longer; a pod
// whose Job Kueue deleted is still recorded from the annotation the webhook wrote.
func TestCaptureRecordsThenReleases(t *testing.T) {
	ok := `{"version":"batchledger.dev/v1","shard":"s3"}`
	refuseRecords := interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*v1alpha1.WorkerResult); ok {
			return errors.New("refused")
		}
		return c.Create(ctx, obj, opts...)
	}}
	for name, tc := range map[string]struct {
		objs         []client.Object
		pod          *corev1.Pod
		funcs        interceptor.Funcs
		wantRecord   string // the Workload recorded for; "" none
		wantReleased bool
		wantErr      bool
	}{
		"succeeded, attributed": {objs: []client.Object{copyOfJ().Obj()}, pod: heldPod(copyOfJ().Obj()).Succeeded(testNow.Add(-time.Minute), ok).Obj(),
			wantRecord: "job-j-d41e5", wantReleased: true},
		"succeeded, Job deleted": {pod: heldPod(copyOfJ().Obj()).Succeeded(testNow.Add(-time.Minute), ok).Obj(),
			wantRecord: "job-j-d41e5", wantReleased: true},
		"succeeded, job-name label changed": {objs: []client.Object{copyOfJ().Obj()},
			pod: heldPod(copyOfJ().Obj()).Label(batchv1.JobNameLabel, "other").Succeeded(testNow.Add(-time.Minute), ok).Obj(), wantRecord: "job-j-d41e5", wantReleased: true},
		"succeeded, not attributed by the webhook": {objs: []client.Object{copyOfJ().Obj()},
			pod: heldPod(wrappers.MakeJob("j", "ns").UID("worker-j-uid").Obj()).Succeeded(testNow.Add(-time.Minute), ok).Obj(), wantReleased: true},
		"succeeded, attributed, no controlling Job": {objs: []client.Object{copyOfJ().Obj()},
			pod: heldPod(copyOfJ().Obj()).NoOwner().Succeeded(testNow.Add(-time.Minute), ok).Obj(), wantReleased: true},
		"running":        {objs: []client.Object{copyOfJ().Obj()}, pod: heldPod(copyOfJ().Obj()).Phase(corev1.PodRunning).Obj()},
		"failed":         {objs: []client.Object{copyOfJ().Obj()}, pod: heldPod(copyOfJ().Obj()).Phase(corev1.PodFailed).Obj(), wantReleased: true},
		"record refused": {objs: []client.Object{copyOfJ().Obj()}, pod: heldPod(copyOfJ().Obj()).Succeeded(testNow.Add(-time.Minute), ok).Obj(), funcs: refuseRecords, wantErr: true},
		"record refused past MaxHold": {objs: []client.Object{copyOfJ().Obj()}, pod: heldPod(copyOfJ().Obj()).Succeeded(testNow.Add(-maxHold-time.Second), ok).Obj(), funcs: refuseRecords,
			wantErr: true, wantReleased: true},
	} {
		t.Run(name, func(t *testing.T) {
			c, cl := newCapture(append(tc.objs, tc.pod), tc.funcs)
			runningSince(c.Releaser, testNow.Add(-2*maxHold))
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.pod)}
			_, err := c.Reconcile(context.Background(), req)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile error = %v, want error %v", err, tc.wantErr)
			}
			var recs v1alpha1.WorkerResultList
			if err := cl.List(context.Background(), &recs); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantRecord == "" && len(recs.Items) > 0:
				t.Errorf("recorded %+v, want nothing", recs.Items)
			case tc.wantRecord != "":
				if len(recs.Items) != 1 {
					t.Fatalf("records = %+v, want one", recs.Items)
				}
				r := recs.Items[0]
				if r.Workload != tc.wantRecord || r.Job != "j" || r.Index != 3 || r.PodUID != tc.pod.UID || r.Name != string(tc.pod.UID) ||
					len(r.Containers) != 1 || r.Containers[0].Message != ok {
					t.Errorf("record = %+v", r)
				}
			}
			var pod corev1.Pod
			if err := cl.Get(context.Background(), req.NamespacedName, &pod); err != nil {
				t.Fatal(err)
			}
			if released := !slices.Contains(pod.Finalizers, v1alpha1.ResultFinalizer); released != tc.wantReleased {
				t.Errorf("released = %v, want %v", released, tc.wantReleased)
			}
		})
	}
}

// TestHoldNeverOutlivesMaxHold: a succeeded pod whose record never appears is held for
// the rest of MaxHold after it finished (the worker role running since before),
// then released: the releaser's rules, not the manager's reach, bound the hold.
func TestHoldNeverOutlivesMaxHold(t *testing.T) {
	for name, tc := range map[string]struct {
		finished     time.Time
		wantReleased bool
		wantAfter    time.Duration
	}{
		"within MaxHold": {finished: testNow.Add(-time.Minute), wantAfter: maxHold - time.Minute},
		"past MaxHold":   {finished: testNow.Add(-maxHold - time.Second), wantReleased: true},
	} {
		t.Run(name, func(t *testing.T) {
			pod := heldPod(copyOfJ().Obj()).Succeeded(tc.finished, "").Obj()
			c, cl := newCapture([]client.Object{copyOfJ().Obj(), pod}, interceptor.Funcs{})
			runningSince(c.Releaser, testNow.Add(-2*maxHold))
			// The releaser alone: the capture never recorded the pod.
			res, err := c.Releaser.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)})
			if err != nil {
				t.Fatal(err)
			}
			var got corev1.Pod
			if err := cl.Get(context.Background(), client.ObjectKeyFromObject(pod), &got); err != nil {
				t.Fatal(err)
			}
			if released := !slices.Contains(got.Finalizers, v1alpha1.ResultFinalizer); released != tc.wantReleased || res.RequeueAfter != tc.wantAfter {
				t.Errorf("released = %v after %s, want %v after %s", released, res.RequeueAfter, tc.wantReleased, tc.wantAfter)
			}
		})
	}
}

// TestCaptureInANamespaceBeingDeleted: in a namespace being deleted, where the API server
// refuses every new record (NamespaceLifecycle), a succeeded pod's record that cannot be
// created is no error to retry: the releaser holds the pod NamespaceGrace, then lets it
// go. Retried instead, the pod would wait for the queue's backoff, minutes once its
// record had failed many times, and keep the namespace meanwhile. A record refused in a
// live namespace is still retried.
func TestCaptureInANamespaceBeingDeleted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ns        *corev1.Namespace
		wantErr   bool
		wantAfter time.Duration
	}{
		{name: "namespace being deleted: held for the grace, not retried",
			ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Finalizers: []string{"example.com/keep"},
				DeletionTimestamp: &metav1.Time{Time: testNow.Add(-time.Second)}}},
			wantAfter: controller.DefaultNamespaceGrace},
		{name: "namespace live: the refused record retried",
			ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := heldPod(copyOfJ().Obj()).Succeeded(testNow.Add(-time.Minute), `{"version":"batchledger.dev/v1"}`).Obj()
			c, cl := newCapture([]client.Object{copyOfJ().Obj(), tc.ns, pod}, refusedRecords)
			res, err := c.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile error = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && res.RequeueAfter != tc.wantAfter {
				t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, tc.wantAfter)
			}
			var got corev1.Pod
			if err := cl.Get(context.Background(), client.ObjectKeyFromObject(pod), &got); err != nil || !slices.Contains(got.Finalizers, v1alpha1.ResultFinalizer) {
				t.Errorf("pod released (%v), want it held for its record", err)
			}
		})
	}
}

// TestRecordOfAnotherPodDoesNotRelease: a record named by the pod's UID but of another
// pod (forged by hand) does not let the pod go.
func TestRecordOfAnotherPodDoesNotRelease(t *testing.T) {
	pod := heldPod(copyOfJ().Obj()).Succeeded(testNow.Add(-time.Minute), "").Obj()
	other := multikueue.NewRecord(pod, "job-j-d41e5", "j", 3, testNow)
	other.PodUID = "someone-else"
	c, _ := newCapture([]client.Object{copyOfJ().Obj(), pod, other}, interceptor.Funcs{})
	missing, err := c.Releaser.Recorders.Unrecorded(context.Background(), pod, []string{"job-j-d41e5"})
	if err != nil || len(missing) != 1 {
		t.Errorf("Unrecorded = %v, %v; want the Workload", missing, err)
	}
}

// TestExpireJobs deletes a Job's record past its retention, counted from the Job's end
// or deletion when the record holds them, and never while the Job it records still
// exists.
func TestExpireJobs(t *testing.T) {
	old := testNow.Add(-DefaultRetention - time.Second)
	for name, tc := range map[string]struct {
		created     time.Time
		ended       *time.Time
		deleted     *time.Time   // the Job's deletion requested, recorded before it went
		job         *batchv1.Job // on the worker beside the record
		wantDeleted bool
	}{
		"young, Job gone":                           {created: testNow.Add(-time.Hour)},
		"old, Job gone":                             {created: old, wantDeleted: true},
		"old, its Job still runs":                   {created: old, job: child(copyOfJS().Obj(), 0).Obj()},
		"old, another Job under its name":           {created: old, job: child(copyOfJS().Obj(), 0).UID("next-uid").Obj(), wantDeleted: true},
		"old, ended within the retention":           {created: old, ended: ptr.To(testNow.Add(-time.Hour))},
		"old, ended before it, Job gone":            {created: old, ended: &old, wantDeleted: true},
		"old, ended before it, Job lingering":       {created: old, ended: &old, job: child(copyOfJS().Obj(), 0).Obj()},
		"old, deleted running within the retention": {created: old, deleted: ptr.To(testNow.Add(-time.Hour))},
		"old, deleted running before it":            {created: old, deleted: &old, wantDeleted: true},
	} {
		t.Run(name, func(t *testing.T) {
			j := child(copyOfJS().Obj(), 0)
			if tc.ended != nil {
				j = j.Completed("0-3", 4).Complete(*tc.ended)
			}
			if tc.deleted != nil {
				j = j.Deleting(*tc.deleted)
			}
			rec := multikueue.NewJobRecord(j.Obj(), multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"})
			rec.CreationTimestamp = metav1.NewTime(tc.created)
			objs := []client.Object{rec}
			if tc.job != nil {
				objs = append(objs, tc.job)
			}
			c, cl := newCapture(objs, interceptor.Funcs{})
			res, err := c.ExpireJobs(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rec)})
			if err != nil {
				t.Fatal(err)
			}
			err = cl.Get(context.Background(), client.ObjectKeyFromObject(rec), &v1alpha1.WorkerJob{})
			if deleted := err != nil; deleted != tc.wantDeleted {
				t.Errorf("deleted = %v (requeue after %s), want %v", deleted, res.RequeueAfter, tc.wantDeleted)
			}
			if !tc.wantDeleted && res.RequeueAfter <= 0 {
				t.Errorf("kept without a requeue: it would never expire")
			}
		})
	}
}

// TestExpire deletes a record past its retention only.
func TestExpire(t *testing.T) {
	for name, tc := range map[string]struct {
		age         time.Duration
		wantDeleted bool
	}{
		"young": {age: time.Hour},
		"old":   {age: DefaultRetention + time.Second, wantDeleted: true},
	} {
		t.Run(name, func(t *testing.T) {
			rec := multikueue.NewRecord(heldPod(copyOfJ().Obj()).Obj(), "w", "j", 3, testNow)
			rec.CreationTimestamp = metav1.NewTime(testNow.Add(-tc.age))
			c, cl := newCapture([]client.Object{rec}, interceptor.Funcs{})
			res, err := c.Expire(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: rec.Namespace, Name: rec.Name}})
			if err != nil {
				t.Fatal(err)
			}
			err = cl.Get(context.Background(), client.ObjectKeyFromObject(rec), &v1alpha1.WorkerResult{})
			if deleted := err != nil; deleted != tc.wantDeleted {
				t.Errorf("deleted = %v (requeue after %s), want %v", deleted, res.RequeueAfter, tc.wantDeleted)
			}
		})
	}
}

// TestCaptureBackFromAnOutageLongerThanMaxHold: the worker role back after an outage
// longer than MaxHold finds pods that succeeded meanwhile, still held. Each is held for
// MaxHold from the worker role's start, as on the manager: the releaser reads the record
// the capture has just created through the cache, which does not show it yet (counted
// from the pod's finish alone, a pod recorded on the worker role's return was released
// with a Warning that its result was never recorded), and a record refused once on
// return is tried again rather than its pod released and its result lost. A record
// never written is still let go MaxHold after the start.
func TestCaptureBackFromAnOutageLongerThanMaxHold(t *testing.T) {
	ok := `{"version":"batchledger.dev/v1","shard":"s3"}`
	finished := testNow.Add(-maxHold - time.Hour)
	// cacheLags hides the records from reads, as the cache does right after a create.
	cacheLags := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*v1alpha1.WorkerResult); ok {
			return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("workerresults").GroupResource(), key.Name)
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	refusedOnce := func() interceptor.Funcs {
		refused := false
		return interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*v1alpha1.WorkerResult); ok && !refused {
				refused = true
				return apierrors.NewTimeoutError("etcd timed out", 1)
			}
			return c.Create(ctx, obj, opts...)
		}}
	}
	refused := interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*v1alpha1.WorkerResult); ok {
			return errors.New("refused")
		}
		return c.Create(ctx, obj, opts...)
	}}
	for name, tc := range map[string]struct {
		funcs interceptor.Funcs
		// later is when the second reconcile runs, after the start at testNow.
		later            time.Duration
		wantHeldFirst    bool
		wantErrFirst     bool
		wantReleasedLast bool
		wantRecorded     bool
		wantWarning      bool
	}{
		"recorded on return, the cache not showing it yet": {funcs: cacheLags, wantHeldFirst: true,
			later: time.Second, wantReleasedLast: true, wantRecorded: true},
		"record refused once on return": {funcs: refusedOnce(), wantHeldFirst: true, wantErrFirst: true,
			later: time.Second, wantReleasedLast: true, wantRecorded: true},
		"record never written: released MaxHold after the start": {funcs: refused, wantHeldFirst: true, wantErrFirst: true,
			later: maxHold + time.Second, wantReleasedLast: true, wantWarning: true},
	} {
		t.Run(name, func(t *testing.T) {
			pod := heldPod(copyOfJ().Obj()).Succeeded(finished, ok).Obj()
			base := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(copyOfJ().Obj(), pod).Build()
			now := testNow
			clock := func() time.Time { return now }
			recorder := events.NewFakeRecorder(10)
			first := interceptor.NewClient(base, tc.funcs)
			c := &Capture{Client: first, Now: clock, Releaser: &controller.PodReleaser{Client: first, Recorders: Recorders{first},
				MaxHold: maxHold, Now: clock, Recorder: recorder}}
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)}
			held := func() bool {
				var got corev1.Pod
				if err := base.Get(context.Background(), req.NamespacedName, &got); err != nil {
					t.Fatal(err)
				}
				return slices.Contains(got.Finalizers, v1alpha1.ResultFinalizer)
			}
			if _, err := c.Reconcile(context.Background(), req); (err != nil) != tc.wantErrFirst {
				t.Fatalf("first Reconcile error = %v, want error %v", err, tc.wantErrFirst)
			}
			if h := held(); h != tc.wantHeldFirst {
				t.Errorf("held on return = %v, want %v", h, tc.wantHeldFirst)
			}
			// The cache catches up (the record's event wakes the pod), or the retry
			// comes; the same releaser, started at testNow.
			now = testNow.Add(tc.later)
			again := interceptor.NewClient(base, interceptor.Funcs{Create: tc.funcs.Create})
			c.Client, c.Releaser.Client, c.Releaser.Recorders = again, again, Recorders{again}
			_, _ = c.Reconcile(context.Background(), req)
			if released := !held(); released != tc.wantReleasedLast {
				t.Errorf("released = %v, want %v", released, tc.wantReleasedLast)
			}
			var recs v1alpha1.WorkerResultList
			if err := base.List(context.Background(), &recs); err != nil {
				t.Fatal(err)
			}
			if recorded := len(recs.Items) == 1; recorded != tc.wantRecorded {
				t.Errorf("recorded = %v (%d records), want %v", recorded, len(recs.Items), tc.wantRecorded)
			}
			warned := false
			for len(recorder.Events) > 0 {
				if e := <-recorder.Events; strings.Contains(e, v1alpha1.EventReasonResultNotRecorded) {
					warned = true
				}
			}
			if warned != tc.wantWarning {
				t.Errorf("warned that the result was not recorded = %v, want %v", warned, tc.wantWarning)
			}
		})
	}
}
