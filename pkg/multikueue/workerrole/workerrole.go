// Package workerrole is batchledger in the worker role of a MultiKueue worker cluster
// (`batchledger --role=worker`): its pod webhook holds the results-scope pods of the
// Job copies MultiKueue dispatches there, as on a single cluster, and names the
// manager's Workload on them; its capture records each succeeded held pod's result in a
// WorkerResult on the worker, then lets the pod go under the single-cluster release rules
// (controller.PodReleaser). It keeps no BatchAccount and needs no credential of the
// manager: the manager reads the records (docs/multikueue.md).
package workerrole

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/controller"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/relations"
)

// DefaultRetention is how long a WorkerResult is kept after it was recorded: the manager
// copies it within seconds while it reaches the worker, and the retention bounds how long
// the manager may lose the worker without losing a result.
const DefaultRetention = 7 * 24 * time.Hour

// The worker role's RBAC is config/worker/worker_role.yaml (hand-written: exactly the verbs
// of this package and of the releaser it runs).

// CacheOptions are the worker role's caches: the pods of the results scope (the only
// pods it holds), Jobs (the Workload a copy was dispatched for; a dispatched JobSet's
// child Jobs whole, JobRecorder), JobSets' and TrainJobs' metadata (MultiKueue's marks on
// a child's owner) and its own records.
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{v1alpha1.LabelScope: v1alpha1.ScopeResults})},
		},
	}
}

// jobMetadata is an empty Job in the form the worker role caches Jobs: metadata only.
func jobMetadata() *metav1.PartialObjectMetadata {
	j := &metav1.PartialObjectMetadata{}
	j.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
	return j
}

// dispatchedFor is the manager Workload a pod's Job copy was dispatched for: the
// annotation the worker's pod webhook wrote at the pod's creation (the Job may be gone
// since: Kueue deletes it once the Workload finished), "" without one. Nothing else
// attributes a pod: the webhook writes the annotation only on a pod the Job controller
// created for a Job copy MultiKueue made and removes one its creator wrote, and the
// worker-pod-workload policy keeps anyone but the worker role from writing it later.
func dispatchedFor(pod metav1.Object) string {
	return pod.GetAnnotations()[v1alpha1.AnnotationWorkload]
}

// Recorders are who records a held pod's result on a worker (controller.Recorders): the
// WorkerResult of a pod of a dispatched Job copy.
type Recorders struct{ client.Reader }

var _ controller.Recorders = Recorders{}

// CapturedBy names the manager Workload the pod's result is recorded for; none for a
// pod of a Job MultiKueue did not dispatch here, which nothing records on a worker.
func (r Recorders) CapturedBy(_ context.Context, pod *corev1.Pod) ([]string, error) {
	wl := dispatchedFor(pod)
	if wl == "" || relations.ControllingJob(pod) == nil {
		return nil, nil
	}
	if _, ok := relations.CompletionIndex(pod); !ok {
		return nil, nil
	}
	return []string{wl}, nil
}

// Unrecorded is capturing until the pod's WorkerResult exists.
func (r Recorders) Unrecorded(ctx context.Context, pod *corev1.Pod, capturing []string) ([]string, error) {
	var rec v1alpha1.WorkerResult
	err := r.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: multikueue.RecordName(pod)}, &rec)
	switch {
	case apierrors.IsNotFound(err):
		return capturing, nil
	case err != nil:
		return nil, err
	case rec.PodUID != pod.UID:
		return capturing, nil
	}
	return nil, nil
}

// Capture records the result of each succeeded held pod of a dispatched Job copy in its
// WorkerResult, then hands the pod to the releaser, which lets it go once recorded (or
// once the single-cluster rules say so: never later than MaxHold).
type Capture struct {
	client.Client
	// Releaser releases held pods; its Recorders must be this worker's (Recorders).
	Releaser *controller.PodReleaser
	// Retention is how long a WorkerResult is kept (0: DefaultRetention).
	Retention time.Duration
	// Now is the clock; tests may replace it.
	Now func() time.Time
}

// Reconcile records a succeeded held pod's result, then releases what may go.
func (c *Capture) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pod corev1.Pod
	if err := c.Get(ctx, req.NamespacedName, &pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !held(&pod) {
		return ctrl.Result{}, nil
	}
	var recordErr error
	if pod.Status.Phase == corev1.PodSucceeded {
		recordErr = c.record(ctx, &pod)
		if apierrors.HasStatusCause(recordErr, corev1.NamespaceTerminatingCause) {
			// No record can be created in a namespace being deleted: retried, the error
			// would hold the pod for the queue's backoff (minutes after many failures)
			// rather than the releaser's NamespaceGrace.
			ctrl.LoggerFrom(ctx).Info("no record of a result in a namespace being deleted", "workload", dispatchedFor(&pod))
			recordErr = nil
		}
	}
	// Released or not, by the releaser's rules: a record that cannot be written never
	// holds the pod past MaxHold.
	res, err := c.Releaser.Reconcile(ctx, req)
	if err = errors.Join(recordErr, err); err != nil {
		return ctrl.Result{}, err
	}
	return res, nil
}

// record writes the pod's WorkerResult unless it exists: the record is named by the
// pod's UID, so a second attempt finds the first.
func (c *Capture) record(ctx context.Context, pod *corev1.Pod) error {
	// The Job and index as the Job controller created the pod: its controller reference
	// and completion index, which the worker-pod-workload policy keeps while it is held
	// (not the job-name label, which anyone who may update the pod can change).
	wl, job := dispatchedFor(pod), relations.ControllingJob(pod)
	idx, ok := relations.CompletionIndex(pod)
	if wl == "" || job == nil || !ok {
		return nil
	}
	missing, err := Recorders{c}.Unrecorded(ctx, pod, []string{wl})
	if err != nil || len(missing) == 0 {
		return err
	}
	rec := multikueue.NewRecord(pod, wl, job.Name, idx, controller.FinishedAt(pod))
	if err := c.Create(ctx, rec); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ctrl.LoggerFrom(ctx).V(2).Info("recorded a result for the manager", "workload", wl, "index", idx)
	return nil
}

// Expire deletes a WorkerResult past its retention.
func (c *Capture) Expire(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rec v1alpha1.WorkerResult
	if err := c.Get(ctx, req.NamespacedName, &rec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return c.expire(ctx, &rec, rec.CreationTimestamp.Time)
}

// ExpireJobs deletes a WorkerJob past its retention, the WorkerResults' retention,
// counted from the Job's end or deletion when the record holds them. It keeps the record
// of a Job that still exists, whatever its age: the manager follows the Job's coverage
// by its record, and a run may outlast the retention.
func (c *Capture) ExpireJobs(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rec v1alpha1.WorkerJob
	if err := c.Get(ctx, req.NamespacedName, &rec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	since := rec.CreationTimestamp.Time
	for _, t := range []*metav1.Time{rec.TerminalAt, rec.DeletedAt} {
		if t != nil && t.After(since) {
			since = t.Time
		}
	}
	if c.now().Sub(since) >= c.retention() {
		job := jobMetadata()
		err := c.Get(ctx, types.NamespacedName{Namespace: rec.Namespace, Name: rec.Job}, job)
		switch {
		case err == nil && job.UID == rec.JobUID:
			return ctrl.Result{RequeueAfter: c.retention()}, nil
		case err != nil && !apierrors.IsNotFound(err):
			return ctrl.Result{}, err
		}
	}
	return c.expire(ctx, &rec, since)
}

// expire deletes rec once its retention, counted from since, has passed.
func (c *Capture) expire(ctx context.Context, rec client.Object, since time.Time) (ctrl.Result, error) {
	if left := c.retention() - c.now().Sub(since); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	uid := rec.GetUID()
	return ctrl.Result{}, client.IgnoreNotFound(c.Delete(ctx, rec, client.Preconditions{UID: &uid}))
}

func (c *Capture) retention() time.Duration { return cmp.Or(c.Retention, DefaultRetention) }

func (c *Capture) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// SetupWithManager watches held pods, the records that let them go and the start of a
// namespace's deletion, which bounds the hold of its pods (the releaser's
// WatchNamespaceDeletions) (worker-capture); held pods leaving the results scope, also
// while the worker role was down (the releaser's SetupOutOfScope); and the records'
// retention (worker-result-retention).
func (c *Capture) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(held))).
		Watches(&v1alpha1.WorkerResult{}, handler.EnqueueRequestsFromMapFunc(recordedPod))
	if err := c.Releaser.WatchNamespaceDeletions(b).Named("worker-capture").Complete(c); err != nil {
		return err
	}
	if err := c.Releaser.SetupOutOfScope(mgr, "worker-release-out-of-scope"); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.WorkerResult{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("worker-result-retention").
		Complete(reconcile.Func(c.Expire))
}

// held reports whether a pod carries batchledger's finalizer.
func held(o client.Object) bool { return slices.Contains(o.GetFinalizers(), v1alpha1.ResultFinalizer) }

// recordedPod wakes the pod a record was written for.
func recordedPod(_ context.Context, obj client.Object) []reconcile.Request {
	rec := obj.(*v1alpha1.WorkerResult)
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: rec.Namespace, Name: rec.Pod}}}
}
