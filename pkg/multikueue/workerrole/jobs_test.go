package workerrole

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/controller"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/interceptors"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
	"batchledger.dev/batchledger/pkg/webhook"
)

// copyOfJS is the worker's copy of JobSet js, dispatched for the manager Workload
// jobset-js-f2331 (MultiKueue's two marks on it).
func copyOfJS() *wrappers.JobSetWrapper {
	w := wrappers.MakeJobSet("js", "ns").Label(multikueue.PrebuiltWorkloadKey, "jobset-js-f2331").Label(multikueue.OriginLabel, "multikueue")
	w.UID = "worker-js-uid"
	return w
}

// trainJobTJ is the worker's copy of TrainJob tj, dispatched for the manager Workload
// trainjob-tj-0a1b2, and tjJobSet the JobSet Trainer renders from it (no mark of its own).
func trainJobTJ() *trainer.TrainJob {
	return wrappers.MakeTrainJob("tj", "ns", "torch-distributed").UID("worker-tj-uid").
		Label(multikueue.PrebuiltWorkloadKey, "trainjob-tj-0a1b2").Label(multikueue.OriginLabel, "multikueue").Obj()
}

func tjJobSet() *jobsetapi.JobSet { return tjJobSetOf(trainer.GroupVersion.Version) }

// tjJobSetOf is tjJobSet with its controller reference spelled in version of Trainer's API.
func tjJobSetOf(version string) *jobsetapi.JobSet {
	gvk := schema.GroupVersionKind{Group: trainer.GroupVersion.Group, Version: version, Kind: trainer.TrainJobKind}
	return wrappers.MakeJobSet("tj", "ns").ControlledBy(trainJobTJ(), gvk, "worker-tjjs-uid").Obj()
}

// child is child Job index 1 of replicatedJob "workers" of js, restart attempt attempt,
// of 4 completions, in the results scope.
func child(js *jobsetapi.JobSet, attempt int) *wrappers.JobWrapper {
	return wrappers.MakeJob(js.Name+"-workers-1", "ns").UID("worker-child-uid").Indexed(4).
		Label(v1alpha1.LabelScope, v1alpha1.ScopeResults).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).
		JobSetChild(js, "workers", 1, attempt)
}

// podScopedOnly is job with the scope on its pod template only: a child of a JobSet
// created before its account, whose Job template the manager could not stamp.
func podScopedOnly(job *batchv1.Job) *batchv1.Job {
	delete(job.Labels, v1alpha1.LabelScope)
	return job
}

// unscoped is job without the scope anywhere: a child of a JobSet no account named.
func unscoped(job *batchv1.Job) *batchv1.Job {
	delete(podScopedOnly(job).Spec.Template.Labels, v1alpha1.LabelScope)
	return job
}

// namespaceDeleted is namespace ns, its deletion started at t.
func namespaceDeleted(t time.Time) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Finalizers: []string{"example.com/keep"}, DeletionTimestamp: &metav1.Time{Time: t}}}
}

// succeededPod is the pod of index idx of child(copyOfJS(), 2), Succeeded, with finalizers
// (batchv1.JobTrackingFinalizer: the Job controller has yet to count it).
func succeededPod(idx int, finalizers ...string) *corev1.Pod {
	job := child(copyOfJS().Obj(), 2).Obj()
	return wrappers.MakeIndexPod(job, fmt.Sprintf("%s-%d", job.Name, idx), idx).Finalizers(finalizers...).
		Succeeded(testNow.Add(-2*time.Minute), "{}").Obj()
}

// runningPod is succeededPod(idx, finalizers...) still Running.
func runningPod(idx int, finalizers ...string) *corev1.Pod {
	job := child(copyOfJS().Obj(), 2).Obj()
	return wrappers.MakeIndexPod(job, fmt.Sprintf("%s-%d", job.Name, idx), idx).Finalizers(finalizers...).Phase(corev1.PodRunning).Obj()
}

// refuseWorkerJobs fails every WorkerJob's creation with err, as an API server that
// cannot take the record; it creates the rest.
func refuseWorkerJobs(err error) interceptor.Funcs {
	return interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*v1alpha1.WorkerJob); ok {
			return err
		}
		return c.Create(ctx, obj, opts...)
	}}
}

// heldJob says whether job is still there, held by the worker role's finalizer.
func heldJob(c client.Client, job *batchv1.Job) bool {
	var got batchv1.Job
	err := c.Get(context.Background(), client.ObjectKeyFromObject(job), &got)
	return err == nil && slices.Contains(got.Finalizers, v1alpha1.WorkerJobFinalizer)
}

func newJobRecorder(funcs interceptor.Funcs, objs ...client.Object) (*JobRecorder, client.Client) {
	c := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
	// Started long before testNow: the grace a start gives is TestJobRecorderNamespaceGrace's.
	return &JobRecorder{Client: c, MaxHold: maxHold, Now: func() time.Time { return testNow }, started: testNow.Add(-time.Hour)}, c
}

// TestJobRecorderRecordsDispatchedChildren: a child Job of a dispatched JobSet (or of the
// JobSet a dispatched TrainJob renders) is recorded with the manager Workload, its place
// in the JobSet and its status; a record that says the same is not written again, one
// that differs is updated; the worker role's finalizer stays while the Job runs and goes
// once its terminal status or its deletion is recorded (a deleted Job's only once the
// Job controller counted its pods' successes), or MaxHold after its deletion
// when the record cannot be written, at once when its namespace is being deleted and
// the record cannot be created there, and NamespaceGrace after the namespace's deletion
// started when it cannot be written for another reason (retried meanwhile without the
// queue's backoff); a child of a JobSet MultiKueue did not dispatch, or
// of another JobSet of the same name (UID), is not recorded and not held.
func TestJobRecorderRecordsDispatchedChildren(t *testing.T) {
	refuse := refuseWorkerJobs(errors.New("refused"))
	// terminating refuses a new record as the API server does in a namespace being
	// deleted (NamespaceLifecycle), which deletes the records there too.
	terminating := interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*v1alpha1.WorkerJob); ok {
				err := apierrors.NewForbidden(v1alpha1.GroupVersion.WithResource("workerjobs").GroupResource(), obj.GetName(),
					errors.New("unable to create new content in namespace ns because it is being terminated"))
				err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes,
					metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated", Field: "metadata.namespace"})
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
	}
	// cacheLags hides the records from reads, as the cache does right after the record
	// was created.
	cacheLags := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*v1alpha1.WorkerJob); ok {
			return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("workerjobs").GroupResource(), key.Name)
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	running := child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0,2", 2)
	stale := multikueue.NewJobRecord(child(copyOfJS().Obj(), 2).Completed("0", 1).Obj(), multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"})
	otherJS := copyOfJS().Obj()
	otherJS.UID = "another-js-uid"
	for name, tc := range map[string]struct {
		objs         []client.Object
		job          *batchv1.Job
		funcs        interceptor.Funcs
		wantRecord   *multikueue.Dispatch
		wantIndexes  string
		wantTerminal string
		wantHeld     bool
		wantErr      bool
		wantWrites   int
	}{
		"running child of a dispatched JobSet": {objs: []client.Object{copyOfJS().Obj()}, job: running.Obj(),
			wantRecord: &multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}, wantIndexes: "0,2", wantHeld: true, wantWrites: 1},
		"record out of date is updated": {objs: []client.Object{copyOfJS().Obj(), stale}, job: running.Obj(),
			wantRecord: &multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}, wantIndexes: "0,2", wantHeld: true, wantWrites: 1},
		"record up to date is not written": {objs: []client.Object{copyOfJS().Obj(),
			multikueue.NewJobRecord(running.Obj(), multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"})}, job: running.Obj(),
			wantRecord: &multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}, wantIndexes: "0,2", wantHeld: true},
		"complete, its record created just before and not in the cache yet: held, retried": {objs: []client.Object{copyOfJS().Obj(), stale},
			funcs:      cacheLags,
			job:        child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0-3", 4).Complete(testNow).Obj(),
			wantRecord: &multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}, wantIndexes: "0", wantHeld: true, wantErr: true},
		"complete: recorded, then released": {objs: []client.Object{copyOfJS().Obj()},
			job:        child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0-3", 4).Complete(testNow).Obj(),
			wantRecord: &multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}, wantIndexes: "0-3", wantTerminal: "Complete", wantWrites: 1},
		"deleted by Kueue: recorded, then released": {objs: []client.Object{copyOfJS().Obj()},
			job:        child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0,2", 2).Deleting(testNow.Add(-time.Minute)).Obj(),
			wantRecord: &multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}, wantIndexes: "0,2", wantWrites: 1},
		"deleted, a success the Job controller has yet to count: recorded, held for the count": {
			objs:       []client.Object{copyOfJS().Obj(), succeededPod(1, batchv1.JobTrackingFinalizer)},
			job:        child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0,2", 2).Deleting(testNow.Add(-time.Minute)).Obj(),
			wantRecord: &multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}, wantIndexes: "0,2", wantHeld: true, wantWrites: 1},
		"deleted, a non-indexed success not counted yet: recorded, held for the count": {objs: []client.Object{copyOfJS().Obj()},
			job: func() *batchv1.Job {
				j := child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0,2", 2).Deleting(testNow.Add(-time.Minute)).Obj()
				j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"p-uid"}}
				return j
			}(),
			wantRecord: &multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}, wantIndexes: "0,2", wantHeld: true, wantWrites: 1},
		"deleted, its successes counted: recorded, then released": {
			objs:       []client.Object{copyOfJS().Obj(), succeededPod(2, batchv1.JobTrackingFinalizer), succeededPod(1)},
			job:        child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0,2", 2).Deleting(testNow.Add(-time.Minute)).Obj(),
			wantRecord: &multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}, wantIndexes: "0,2", wantWrites: 1},
		"deleted, a success not counted past MaxHold: released": {
			objs:       []client.Object{copyOfJS().Obj(), succeededPod(1, batchv1.JobTrackingFinalizer)},
			job:        child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0,2", 2).Deleting(testNow.Add(-maxHold - time.Second)).Obj(),
			wantRecord: &multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}, wantIndexes: "0,2", wantWrites: 1},
		"deleted, a success not counted, namespace being deleted past the grace: released": {
			objs: []client.Object{copyOfJS().Obj(), succeededPod(1, batchv1.JobTrackingFinalizer),
				namespaceDeleted(testNow.Add(-controller.DefaultNamespaceGrace - time.Second))},
			job:        child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0,2", 2).Deleting(testNow.Add(-time.Minute)).Obj(),
			wantRecord: &multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}, wantIndexes: "0,2", wantWrites: 1},
		"deleted, JobSet gone: recorded from the webhook's annotation, then released": {
			job: child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Annotation(v1alpha1.AnnotationWorkload, "jobset-js-f2331").
				Completed("0,2", 2).Deleting(testNow.Add(-time.Minute)).Obj(),
			wantRecord: &multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}, wantIndexes: "0,2", wantWrites: 1},
		"JobSet gone, annotation on a Job not held: not recorded": {
			job: child(copyOfJS().Obj(), 2).Annotation(v1alpha1.AnnotationWorkload, "jobset-js-f2331").Completed("0,2", 2).Obj()},
		"deleted, record refused: held within MaxHold": {objs: []client.Object{copyOfJS().Obj()}, funcs: refuse,
			job:      child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Deleting(testNow.Add(-time.Minute)).Obj(),
			wantHeld: true, wantErr: true},
		"deleted, record refused: released past MaxHold": {objs: []client.Object{copyOfJS().Obj()}, funcs: refuse,
			job:     child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Deleting(testNow.Add(-maxHold - time.Second)).Obj(),
			wantErr: true},
		"deleted, record refused, namespace being deleted: held within the grace, not retried": {
			objs: []client.Object{copyOfJS().Obj(), namespaceDeleted(testNow.Add(-time.Second))}, funcs: refuse,
			job:      child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Deleting(testNow.Add(-time.Minute)).Obj(),
			wantHeld: true},
		"deleted, record refused, namespace being deleted past the grace: released": {
			objs: []client.Object{copyOfJS().Obj(), namespaceDeleted(testNow.Add(-controller.DefaultNamespaceGrace - time.Second))}, funcs: refuse,
			job:     child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Deleting(testNow.Add(-time.Minute)).Obj(),
			wantErr: true},
		"deleted with its namespace, record refused: released at once": {objs: []client.Object{copyOfJS().Obj()}, funcs: terminating,
			job: child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0,2", 2).Deleting(testNow.Add(-time.Minute)).Obj()},
		"running in a namespace being deleted, record refused: released": {objs: []client.Object{copyOfJS().Obj()}, funcs: terminating,
			job: child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0,2", 2).Obj()},
		"child of a dispatched TrainJob's JobSet": {objs: []client.Object{trainJobTJ(), tjJobSet()},
			job:        child(tjJobSet(), 0).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("1", 1).Obj(),
			wantRecord: &multikueue.Dispatch{Workload: "trainjob-tj-0a1b2", JobSet: "tj", TrainJob: "tj"}, wantIndexes: "1", wantHeld: true, wantWrites: 1},
		"child of a dispatched TrainJob's JobSet, its owner spelled in another version": {objs: []client.Object{trainJobTJ(), tjJobSetOf("v1")},
			job:        child(tjJobSetOf("v1"), 0).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("1", 1).Obj(),
			wantRecord: &multikueue.Dispatch{Workload: "trainjob-tj-0a1b2", JobSet: "tj", TrainJob: "tj"}, wantIndexes: "1", wantHeld: true, wantWrites: 1},
		"child of a JobSet not dispatched": {objs: []client.Object{wrappers.MakeJobSet("js", "ns").Obj()},
			job: child(wrappers.MakeJobSet("js", "ns").Obj(), 0).Completed("1", 1).Obj()},
		"child scoped on its pod template only, admitted unheld": {objs: []client.Object{copyOfJS().Obj()},
			job:        podScopedOnly(child(copyOfJS().Obj(), 2).Completed("0,2", 2).Obj()),
			wantRecord: &multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"}, wantIndexes: "0,2", wantWrites: 1},
		"child of a dispatched JobSet no account named": {objs: []client.Object{copyOfJS().Obj()},
			job: unscoped(child(copyOfJS().Obj(), 2).Completed("0,2", 2).Obj())},
		"held, no child any more (its JobSet labels taken off): released unrecorded": {objs: []client.Object{copyOfJS().Obj()},
			job: func() *batchv1.Job {
				j := child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Annotation(v1alpha1.AnnotationWorkload, "jobset-js-f2331").
					Deleting(testNow.Add(-time.Minute)).Obj()
				delete(j.Labels, jobsetapi.JobSetNameKey)
				return j
			}()},
		"child of another JobSet of the name": {objs: []client.Object{copyOfJS().Obj()},
			job: child(otherJS, 0).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("1", 1).Obj()},
	} {
		t.Run(name, func(t *testing.T) {
			writes := 0
			funcs := tc.funcs
			create, update := funcs.Create, funcs.Update
			funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				var err error
				if create != nil {
					err = create(ctx, c, obj, opts...)
				} else {
					err = c.Create(ctx, obj, opts...)
				}
				if _, ok := obj.(*v1alpha1.WorkerJob); ok && err == nil {
					writes++
				}
				return err
			}
			funcs.Update = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				writes++
				if update != nil {
					return update(ctx, c, obj, opts...)
				}
				return c.Update(ctx, obj, opts...)
			}
			r, c := newJobRecorder(funcs, append(tc.objs, tc.job)...)
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.job)})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile error = %v, want error %v", err, tc.wantErr)
			}
			var recs v1alpha1.WorkerJobList
			if err := c.List(context.Background(), &recs); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantRecord == nil && len(recs.Items) > 0:
				t.Errorf("recorded %+v, want nothing", recs.Items)
			case tc.wantRecord != nil:
				if len(recs.Items) != 1 {
					t.Fatalf("records %+v, want one", recs.Items)
				}
				got := recs.Items[0]
				want := multikueue.NewJobRecord(tc.job, *tc.wantRecord)
				if got.Name != string(tc.job.UID) || got.Workload != tc.wantRecord.Workload || got.JobSet != tc.wantRecord.JobSet ||
					got.TrainJob != tc.wantRecord.TrainJob || got.ReplicatedJob != "workers" || got.JobIndex != 1 ||
					got.RestartAttempt != want.RestartAttempt || got.Job != tc.job.Name || got.JobUID != tc.job.UID ||
					got.CompletedIndexes != tc.wantIndexes || got.Terminal != tc.wantTerminal || got.Scope != v1alpha1.ScopeResults {
					t.Errorf("record %+v", got)
				}
			}
			if writes != tc.wantWrites {
				t.Errorf("%d record writes, want %d", writes, tc.wantWrites)
			}
			if held := heldJob(c, tc.job); held != tc.wantHeld {
				t.Errorf("held = %v, want %v", held, tc.wantHeld)
			}
		})
	}
}

// TestJobRecorderWaitsForTheJobControllersCount: a child Job deleted before it terminated
// is held, and read again soon, while the API server shows a pod it controls with the Job
// controller's tracking finalizer, whatever the worker role's cache shows of it (still
// Running a moment after it succeeded, or nothing: the cache holds the results scope's
// pods only). The Job controller counts such a pod in the sync that takes the tracking
// finalizers off; released before, the Job could be gone with the index unrecorded. Once
// no pod it controls carries the finalizer (an orphan's does not count), the Job is
// released, even if the cache still shows an uncounted success; a Job another controller
// manages is judged by the cache alone; MaxHold still bounds the hold.
func TestJobRecorderWaitsForTheJobControllersCount(t *testing.T) {
	deleted := func(ago time.Duration) *wrappers.JobWrapper {
		return child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0,2", 2).Deleting(testNow.Add(-ago))
	}
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		// cached are the Job's pods as the worker role's cache shows them; apiPods as the
		// API server holds them (APIReader).
		cached, apiPods []client.Object
		// listRefused makes the API server refuse the pods' list (a role without it).
		listRefused      bool
		wantHeld         bool
		wantRequeueAfter time.Duration
	}{
		{name: "a success the cache shows running, still tracked: held, read again soon",
			job:      deleted(time.Minute).Obj(),
			cached:   []client.Object{runningPod(1, batchv1.JobTrackingFinalizer)},
			apiPods:  []client.Object{succeededPod(1, batchv1.JobTrackingFinalizer)},
			wantHeld: true, wantRequeueAfter: 15 * time.Second},
		{name: "a running pod not in the cache, still tracked: held, read again soon",
			job:      deleted(time.Minute).Obj(),
			apiPods:  []client.Object{runningPod(1, batchv1.JobTrackingFinalizer)},
			wantHeld: true, wantRequeueAfter: 15 * time.Second},
		{name: "still tracked, MaxHold almost passed: held for the rest of it",
			job:      deleted(maxHold - time.Second).Obj(),
			apiPods:  []client.Object{runningPod(1, batchv1.JobTrackingFinalizer)},
			wantHeld: true, wantRequeueAfter: time.Second},
		{name: "still tracked past MaxHold: released",
			job:     deleted(maxHold + time.Second).Obj(),
			apiPods: []client.Object{runningPod(1, batchv1.JobTrackingFinalizer)}},
		{name: "the pods' list refused: held as if tracked, read again soon",
			job: deleted(time.Minute).Obj(), listRefused: true, wantHeld: true, wantRequeueAfter: 15 * time.Second},
		{name: "the pods' list refused past MaxHold: released",
			job: deleted(maxHold + time.Second).Obj(), listRefused: true},
		{name: "its running pod no longer tracked: released",
			job:     deleted(time.Minute).Obj(),
			cached:  []client.Object{runningPod(1)},
			apiPods: []client.Object{runningPod(1)}},
		{name: "the cache still shows an uncounted success the API server shows counted: released",
			job:     deleted(time.Minute).Obj(),
			cached:  []client.Object{succeededPod(1, batchv1.JobTrackingFinalizer)},
			apiPods: []client.Object{succeededPod(1)}},
		{name: "an orphan still tracked: released",
			job:     deleted(time.Minute).Obj(),
			apiPods: []client.Object{wrappers.MakeIndexPod(deleted(0).Obj(), "js-workers-1-1", 1).NoOwner().Phase(corev1.PodRunning).Finalizers(batchv1.JobTrackingFinalizer).Obj()}},
		{name: "a non-indexed success not counted yet, nothing tracked: held for the count",
			job: func() *batchv1.Job {
				j := deleted(time.Minute).Obj()
				j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"p-uid"}}
				return j
			}(),
			apiPods:  []client.Object{succeededPod(1)},
			wantHeld: true, wantRequeueAfter: maxHold - time.Minute},
		{name: "managed by another controller: only the cache's successes are waited for",
			job:     deleted(time.Minute).ManagedBy("example.com/other").Obj(),
			apiPods: []client.Object{runningPod(1, batchv1.JobTrackingFinalizer)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, c := newJobRecorder(interceptor.Funcs{}, append([]client.Object{copyOfJS().Obj(), tc.job}, tc.cached...)...)
			api := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(tc.apiPods...)
			if tc.listRefused {
				api = api.WithInterceptorFuncs(interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
					return apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("pods is forbidden"))
				}})
			}
			r.APIReader = api.Build()
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.job)})
			if err != nil {
				t.Fatalf("Reconcile error = %v", err)
			}
			if held := heldJob(c, tc.job); held != tc.wantHeld {
				t.Errorf("held = %v, want %v", held, tc.wantHeld)
			}
			if res.RequeueAfter != tc.wantRequeueAfter {
				t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, tc.wantRequeueAfter)
			}
		})
	}
}

// TestJobRecorderReleasesOnlyTheStateRecorded: the Job controller counts a last index of
// a child Job deleted before it terminated, then takes its pods' tracking finalizers off,
// right after the recorder read the Job from its cache. The pods say nothing is left to
// count, the stale copy (recorded) says index 1 is not complete: releasing it would let
// the Job go with index 1 never recorded. The release is pinned to the resourceVersion
// read, fails, and the Job stays held for the retry.
func TestJobRecorderReleasesOnlyTheStateRecorded(t *testing.T) {
	job := child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0,2", 2).Deleting(testNow.Add(-time.Minute)).Obj()
	r, c := newJobRecorder(interceptors.CountedRightAfterFirstRead("0-2", 3), copyOfJS().Obj(), job)
	r.APIReader = fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(succeededPod(1)).Build()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)}); err == nil {
		t.Errorf("released from a copy older than the Job controller's last count; want the release refused and retried")
	}
	if !heldJob(c, job) {
		t.Errorf("the Job was released: index 1 never recorded")
	}
}

// TestJobRecorderMaxHoldUnsetIsTheDefault: a JobRecorder whose MaxHold is unset (0, as
// --max-result-hold=0 gives it) holds a deleted Job whose record cannot be written for
// the pods' default, controller.DefaultMaxResultHold, as the releaser it shares the flag
// with does: never releasing it unrecorded at once.
func TestJobRecorderMaxHoldUnsetIsTheDefault(t *testing.T) {
	refuse := refuseWorkerJobs(errors.New("refused"))
	for name, tc := range map[string]struct {
		deleted          time.Duration // before testNow
		wantHeld         bool
		wantRequeueAfter time.Duration
	}{
		"deleted a minute ago: held for the rest of the default": {deleted: time.Minute, wantHeld: true,
			wantRequeueAfter: controller.DefaultMaxResultHold - time.Minute},
		"deleted past the default: released": {deleted: controller.DefaultMaxResultHold + time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			job := child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Deleting(testNow.Add(-tc.deleted)).Obj()
			r, c := newJobRecorder(refuse, copyOfJS().Obj(), job)
			r.MaxHold = 0
			r.started = testNow.Add(-2 * controller.DefaultMaxResultHold) // running since before the deletion
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)})
			if err == nil {
				t.Fatal("Reconcile error = nil, want the refused record's")
			}
			if res.RequeueAfter != tc.wantRequeueAfter {
				t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, tc.wantRequeueAfter)
			}
			if held := heldJob(c, job); held != tc.wantHeld {
				t.Errorf("held = %v, want %v", held, tc.wantHeld)
			}
		})
	}
}

// TestJobRecorderBackFromAnOutageLongerThanMaxHold: a held Job deleted while the worker
// role was down longer than MaxHold (a JobSet that finished, which Kueue deleted) is held
// MaxHold from the recorder's start when that is later, as the manager holds its Jobs:
// a record that fails once as the worker role comes back is tried again, rather than
// the Job let go with its last status unrecorded. A recorder running since before the
// deletion still lets it go MaxHold after it.
func TestJobRecorderBackFromAnOutageLongerThanMaxHold(t *testing.T) {
	refuse := refuseWorkerJobs(apierrors.NewTimeoutError("etcd timed out", 1))
	for _, tc := range []struct {
		name string
		// deleted and started are how long before testNow the Job was deleted and the
		// recorder started.
		deleted, started time.Duration
		wantRequeueAfter time.Duration // 0: released
	}{
		{name: "deleted during an outage past MaxHold, the recorder just back: held for MaxHold",
			deleted: 2 * maxHold, wantRequeueAfter: maxHold},
		{name: "deleted during an outage, the recorder back a minute ago: held for the rest",
			deleted: 2 * maxHold, started: time.Minute, wantRequeueAfter: maxHold - time.Minute},
		{name: "deleted past MaxHold, the recorder running since before: released",
			deleted: maxHold + time.Second, started: 2 * maxHold},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Annotation(v1alpha1.AnnotationWorkload, "jobset-js-f2331").
				Completed("0-3", 4).Deleting(testNow.Add(-tc.deleted)).Obj()
			r, c := newJobRecorder(refuse, job)
			r.started = testNow.Add(-tc.started)
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)})
			if err == nil {
				t.Error("Reconcile error = nil, want the refused record's")
			}
			if res.RequeueAfter != tc.wantRequeueAfter {
				t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, tc.wantRequeueAfter)
			}
			if held, want := heldJob(c, job), tc.wantRequeueAfter > 0; held != want {
				t.Errorf("held = %v, want %v", held, want)
			}
		})
	}
}

// TestJobRecorderNamespaceGrace: in a namespace being deleted, a deleted Job whose record
// cannot be written is held NamespaceGrace after the latest of the namespace's deletion,
// its own deletion and the recorder's start, as the pods are: a Job the namespace
// controller reaches late, or one the worker role finds held as it comes back from an
// outage, gets its grace to be recorded rather than a single try.
func TestJobRecorderNamespaceGrace(t *testing.T) {
	refuse := refuseWorkerJobs(errors.New("refused"))
	grace := controller.DefaultNamespaceGrace
	for _, tc := range []struct {
		name string
		// nsDeleted, deleted and started are how long before testNow the namespace's
		// deletion started, the Job was deleted and the recorder started.
		nsDeleted, deleted, started time.Duration
		wantRequeueAfter            time.Duration // 0: released
	}{
		{name: "namespace and Job deleted past the grace, the recorder long started: released",
			nsDeleted: time.Minute, deleted: time.Minute, started: time.Hour},
		{name: "Job deleted within the grace, its namespace's deletion older: held for the rest",
			nsDeleted: time.Minute, deleted: time.Second, started: time.Hour, wantRequeueAfter: grace - time.Second},
		{name: "namespace deleted within the grace, the Job before: held for the rest",
			nsDeleted: 2 * time.Second, deleted: time.Hour, started: time.Hour, wantRequeueAfter: grace - 2*time.Second},
		{name: "both past the grace, the recorder just back from an outage: held for the grace",
			nsDeleted: time.Hour, deleted: time.Hour, wantRequeueAfter: grace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).Deleting(testNow.Add(-tc.deleted)).Obj()
			r, c := newJobRecorder(refuse, copyOfJS().Obj(), namespaceDeleted(testNow.Add(-tc.nsDeleted)), job)
			r.started = testNow.Add(-tc.started)
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)})
			if (err != nil) != (tc.wantRequeueAfter == 0) {
				t.Errorf("Reconcile error = %v; want the refused record's only once released", err)
			}
			if res.RequeueAfter != tc.wantRequeueAfter {
				t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, tc.wantRequeueAfter)
			}
			if held, want := heldJob(c, job), tc.wantRequeueAfter > 0; held != want {
				t.Errorf("held = %v, want %v", held, want)
			}
		})
	}
}

// TestJobHolderHoldsDispatchedChildren: the Job webhook puts the worker role's finalizer
// and the Workload (and TrainJob) it was dispatched for on a new child Job of a
// dispatched JobSet (also of a dispatched TrainJob's JobSet), keeping the finalizers and
// annotations it has; it removes an attribution the creator wrote on any other Job; a
// Job whose JobSet (or its TrainJob) cannot be read, or is not in the cache yet, is
// refused, for the JobSet controller to create it again.
func TestJobHolderHoldsDispatchedChildren(t *testing.T) {
	broken := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		return errors.New("cache down")
	}}
	held := func(annotations map[string]string, finalizers ...string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: annotations, Finalizers: finalizers}}
	}
	for name, tc := range map[string]struct {
		objs  []client.Object
		job   *batchv1.Job
		funcs interceptor.Funcs
		want  *batchv1.Job // the Job's annotations and finalizers after the webhook; nil: not patched
		// wantLabelled: the webhook puts the pod template's scope on the Job's labels.
		wantLabelled bool
		wantDenied   bool
	}{
		"child of a dispatched JobSet": {objs: []client.Object{copyOfJS().Obj()}, job: child(copyOfJS().Obj(), 0).Annotation("a", "b").Obj(),
			want: held(map[string]string{"a": "b", v1alpha1.AnnotationWorkload: "jobset-js-f2331"}, v1alpha1.WorkerJobFinalizer)},
		"child with finalizers of its own, claiming another Workload": {objs: []client.Object{copyOfJS().Obj()},
			job:  child(copyOfJS().Obj(), 0).Finalizers("other", v1alpha1.WorkerJobFinalizer).Annotation(v1alpha1.AnnotationWorkload, "forged").Obj(),
			want: held(map[string]string{v1alpha1.AnnotationWorkload: "jobset-js-f2331"}, "other", v1alpha1.WorkerJobFinalizer)},
		"child of a dispatched TrainJob": {objs: []client.Object{trainJobTJ(), tjJobSet()}, job: child(tjJobSet(), 0).Obj(),
			want: held(map[string]string{v1alpha1.AnnotationWorkload: "trainjob-tj-0a1b2", AnnotationTrainJob: "tj"}, v1alpha1.WorkerJobFinalizer)},
		"child of a JobSet not dispatched": {objs: []client.Object{wrappers.MakeJobSet("js", "ns").Obj()}, job: child(wrappers.MakeJobSet("js", "ns").Obj(), 0).Obj()},
		"child of a JobSet not dispatched, claiming a Workload": {objs: []client.Object{wrappers.MakeJobSet("js", "ns").Obj()},
			job:  child(wrappers.MakeJobSet("js", "ns").Obj(), 0).Annotation(v1alpha1.AnnotationWorkload, "forged").Annotation("a", "b").Obj(),
			want: held(map[string]string{"a": "b"})},
		"child scoped on its pod template only": {objs: []client.Object{copyOfJS().Obj()}, job: podScopedOnly(child(copyOfJS().Obj(), 0).Obj()),
			want: held(map[string]string{v1alpha1.AnnotationWorkload: "jobset-js-f2331"}, v1alpha1.WorkerJobFinalizer), wantLabelled: true},
		"child of a dispatched JobSet no account named": {objs: []client.Object{copyOfJS().Obj()}, job: unscoped(child(copyOfJS().Obj(), 0).Obj())},
		"child of a dispatched JobSet no account named, claiming a Workload": {objs: []client.Object{copyOfJS().Obj()},
			job: unscoped(child(copyOfJS().Obj(), 0).Annotation(v1alpha1.AnnotationWorkload, "forged").Obj())},
		"child scoped on its pod template only, JobSet not dispatched": {objs: []client.Object{wrappers.MakeJobSet("js", "ns").Obj()},
			job: podScopedOnly(child(wrappers.MakeJobSet("js", "ns").Obj(), 0).Obj())},
		"a Job copy, no JobSet":         {objs: []client.Object{copyOfJS().Obj()}, job: copyOfJ().Obj()},
		"JobSet cannot be read":         {objs: []client.Object{copyOfJS().Obj()}, job: child(copyOfJS().Obj(), 0).Obj(), funcs: broken, wantDenied: true},
		"JobSet not in the cache yet":   {job: child(copyOfJS().Obj(), 0).Obj(), wantDenied: true},
		"TrainJob not in the cache yet": {objs: []client.Object{tjJobSet()}, job: child(tjJobSet(), 0).Obj(), wantDenied: true},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(tc.objs...).WithInterceptorFuncs(tc.funcs).Build()
			job := tc.job.DeepCopy()
			job.UID = "" // not assigned yet at admission
			raw, _ := json.Marshal(job)
			resp := JobHolder{Reader: c}.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Namespace: "ns", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}})
			if resp.Allowed == tc.wantDenied {
				t.Fatalf("allowed = %v (%v), want denied %v", resp.Allowed, resp.Result, tc.wantDenied)
			}
			if tc.want == nil {
				if len(resp.Patches) > 0 {
					t.Errorf("patched %+v, want nothing", resp.Patches)
				}
				return
			}
			got := job.DeepCopy()
			for _, p := range resp.Patches {
				b, _ := json.Marshal(p.Value)
				switch p.Path {
				case "/metadata/annotations":
					got.Annotations = nil
					_ = json.Unmarshal(b, &got.Annotations)
				case "/metadata/finalizers":
					got.Finalizers = nil
					_ = json.Unmarshal(b, &got.Finalizers)
				case "/metadata/labels/batchledger.dev~1scope":
					got.Labels[v1alpha1.LabelScope] = p.Value.(string)
				default:
					t.Errorf("unexpected patch %+v", p)
				}
			}
			if !maps.Equal(got.Annotations, tc.want.Annotations) || !slices.Equal(got.Finalizers, tc.want.Finalizers) {
				t.Errorf("annotations %v, finalizers %v; want %v, %v", got.Annotations, got.Finalizers, tc.want.Annotations, tc.want.Finalizers)
			}
			if scope := got.Labels[v1alpha1.LabelScope]; (scope == v1alpha1.ScopeResults) != (tc.wantLabelled || job.Labels[v1alpha1.LabelScope] != "") {
				t.Errorf("scope label %q after the webhook; want the pod template's (%q) there: %v", scope, v1alpha1.ScopeResults, tc.wantLabelled)
			}
		})
	}
}

// TestPodHolderAttributesDispatchedJobSetPods: a pod the Job controller creates for a
// child Job of a dispatched JobSet is named the JobSet's manager Workload (MultiKueue's
// marks are on the JobSet, not on the child Job), so that its result is recorded.
func TestPodHolderAttributesDispatchedJobSetPods(t *testing.T) {
	job := child(copyOfJS().Obj(), 0).Obj()
	c := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(copyOfJS().Obj(), job).Build()
	raw, _ := json.Marshal(wrappers.MakeIndexPod(job, "js-workers-1-2", 2).Obj())
	resp := PodHolder{Reader: c}.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "ns",
		Object: runtime.RawExtension{Raw: raw}, UserInfo: authenticationv1.UserInfo{Username: webhook.JobControllers[0]}}})
	var wl any
	for _, p := range resp.Patches {
		if p.Path == annotationPath {
			wl = p.Value
		}
	}
	if wl != "jobset-js-f2331" {
		t.Errorf("patches %+v, want the Workload annotation jobset-js-f2331", resp.Patches)
	}
}

// TestPodHolderRefusesAPodOfAnOwnerNotRead: the Job controller creates a pod for a child
// Job of a dispatched JobSet; when the JobSet, or the TrainJob that rendered it, is not in
// the worker role's cache yet, the pod is refused (the Job controller creates it again),
// not admitted held without its Workload, which would let it go unrecorded.
func TestPodHolderRefusesAPodOfAnOwnerNotRead(t *testing.T) {
	for name, tc := range map[string]struct {
		objs []client.Object
		job  *batchv1.Job
	}{
		"JobSet not in the cache":   {job: child(copyOfJS().Obj(), 0).Obj()},
		"TrainJob not in the cache": {objs: []client.Object{tjJobSet()}, job: child(tjJobSet(), 0).Obj()},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(append(tc.objs, tc.job)...).Build()
			raw, _ := json.Marshal(wrappers.MakeIndexPod(tc.job, tc.job.Name+"-2", 2).Obj())
			resp := PodHolder{Reader: c}.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "ns",
				Object: runtime.RawExtension{Raw: raw}, UserInfo: authenticationv1.UserInfo{Username: webhook.JobControllers[0]}}})
			if resp.Allowed {
				t.Errorf("allowed with patches %+v; want refused until the owner is read", resp.Patches)
			}
		})
	}
}
