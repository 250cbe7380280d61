package controller

import (
	"cmp"
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/release"
)

// DefaultMaxResultHold is how long a succeeded pod is held for its result at most. Past
// it the pod is released unrecorded (with a Warning event and a metric), so that an
// account whose reconcile keeps failing never strands pods, nor the namespace they are in.
const DefaultMaxResultHold = 24 * time.Hour

// PodReleaser removes the result-capture finalizer from a pod as soon as holding it
// serves no purpose: its result is recorded, it did not succeed (no result to read), or
// no account requiring results records it (relations.CapturedBy: the same rule result
// capture applies). Pods are held only while a result would otherwise be lost, and at most
// MaxHold after they finished.
type PodReleaser struct {
	client.Client
	Metrics  *Metrics
	Recorder events.EventRecorder
	// MaxHold bounds how long a succeeded, unrecorded pod is held (0: DefaultMaxResultHold).
	MaxHold time.Duration
	// Now is the clock; tests may replace it.
	Now func() time.Time
}

// Reconcile releases one pod when it may go.
func (r *PodReleaser) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pod corev1.Pod
	if err := r.Get(ctx, req.NamespacedName, &pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !slices.Contains(pod.Finalizers, v1alpha1.ResultFinalizer) {
		return ctrl.Result{}, nil
	}
	hold, err := r.mustHold(ctx, &pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	if hold {
		if pod.Status.Phase != corev1.PodSucceeded {
			return ctrl.Result{}, nil // running: its success wakes us again
		}
		maxHold := cmp.Or(r.MaxHold, DefaultMaxResultHold)
		if left := maxHold - r.now().Sub(finishedAt(&pod)); left > 0 {
			return ctrl.Result{RequeueAfter: left}, nil
		}
		if r.Recorder != nil {
			r.Recorder.Eventf(&pod, nil, corev1.EventTypeWarning, v1alpha1.EventReasonResultNotRecorded, "Release",
				"released after holding it %s for its result, which was never recorded (see the account's status and the controller's log)", maxHold)
		}
		r.Metrics.holdExpired()
	}
	patch, ok := release.FinalizerRemovalPatch(&pod)
	if !ok {
		return ctrl.Result{}, nil
	}
	if err := r.Patch(ctx, &pod, patch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Metrics.podReleased()
	return ctrl.Result{}, nil
}

func (r *PodReleaser) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// finishedAt is when the pod finished: its containers' latest termination, else its
// latest condition change (a pod whose statuses were never written).
func finishedAt(pod *corev1.Pod) time.Time {
	var t time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && term.FinishedAt.After(t) {
			t = term.FinishedAt.Time
		}
	}
	if t.IsZero() {
		for _, c := range pod.Status.Conditions {
			if c.LastTransitionTime.After(t) {
				t = c.LastTransitionTime.Time
			}
		}
	}
	if t.IsZero() {
		t = pod.CreationTimestamp.Time
	}
	return t
}

// mustHold is whether the pod's result still has to be recorded before it may go.
func (r *PodReleaser) mustHold(ctx context.Context, pod *corev1.Pod) (bool, error) {
	if pod.Status.Phase != corev1.PodSucceeded && (pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil) {
		// Failed, or deleted before it finished: there is no result to wait for.
		return false, nil
	}
	if pod.Status.Phase == corev1.PodSucceeded {
		var recorded v1alpha1.ShardResultsList
		if err := r.List(ctx, &recorded, client.InNamespace(pod.Namespace), client.MatchingFields{relations.IndexResultPod: string(pod.UID)}); err != nil {
			return false, err
		}
		if len(recorded.Items) > 0 {
			return false, nil
		}
	}
	accounts, err := relations.CapturedBy(ctx, r.Client, pod)
	return len(accounts) > 0, err
}

// SetupWithManager watches held pods, the result chunks that record them, and account
// deletions that leave pods held for nothing.
func (r *PodReleaser) SetupWithManager(mgr ctrl.Manager) error {
	held := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return slices.Contains(o.GetFinalizers(), v1alpha1.ResultFinalizer)
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Pod{}, builder.WithPredicates(held)).
		Watches(&v1alpha1.ShardResults{}, handler.EnqueueRequestsFromMapFunc(recordedPods)).
		Watches(&v1alpha1.BatchAccount{}, handler.EnqueueRequestsFromMapFunc(r.heldPodsOfAccount),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(_ event.CreateEvent) bool { return false },
				UpdateFunc: func(e event.UpdateEvent) bool { return e.ObjectNew.GetDeletionTimestamp() != nil },
			})).
		Named("pod-release").
		Complete(r)
}

func recordedPods(_ context.Context, obj client.Object) []reconcile.Request {
	sr := obj.(*v1alpha1.ShardResults)
	reqs := make([]reconcile.Request, 0, len(sr.Results))
	for _, res := range sr.Results {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sr.Namespace, Name: res.Pod}})
	}
	return reqs
}

// heldPodsOfAccount wakes the held pods of a deleted account's targets.
func (r *PodReleaser) heldPodsOfAccount(ctx context.Context, obj client.Object) []reconcile.Request {
	ba := obj.(*v1alpha1.BatchAccount)
	var reqs []reconcile.Request
	for _, a := range ba.Spec.Assignments {
		var pods corev1.PodList
		if err := r.List(ctx, &pods, client.InNamespace(ba.Namespace), client.MatchingLabels(relations.TargetPodLabels(a.Target))); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing held pods of a deleted account")
			continue
		}
		for _, p := range pods.Items {
			if slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
			}
		}
	}
	return reqs
}
