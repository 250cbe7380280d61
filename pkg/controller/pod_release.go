package controller

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
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
//
// A held pod is in the manager's pod cache only while it carries LabelScope=ScopeResults
// (CacheOptions). A pod that loses the label while held (the held-pod-scope admission
// policy forbids it, but a cluster may lack the policy) leaves the cache, and the cache
// would never show it again; ReleaseOutOfScope releases such a pod.
type PodReleaser struct {
	client.Client
	// APIReader reads from the API server directly (the manager's GetAPIReader): a pod
	// that left the results scope is no longer in the cache. Without it ReleaseOutOfScope
	// does nothing.
	APIReader client.Reader
	Metrics   *Metrics
	Recorder  events.EventRecorder
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

// ReleaseOutOfScope releases a pod that left the results scope while held. It is woken
// when a held pod leaves the manager's pod cache (leftResultsScope): the API server sends
// a label-selected watch a DELETED event when the object stops matching, as it does when
// the pod is deleted for real. The event shows the pod as it last matched, so the pod is
// read live: if it still exists, carries the finalizer and not LabelScope=ScopeResults,
// the finalizer is removed (Reconcile's patch) with a Warning event, since the controller
// can no longer see the pod to record its result or to release it later. A pod gone is
// left alone, and a pod back in scope to Reconcile, which sees it in the cache again.
func (r *PodReleaser) ReleaseOutOfScope(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.APIReader == nil {
		return ctrl.Result{}, nil
	}
	pod, err := r.livePod(ctx, req.NamespacedName)
	if err != nil || pod == nil {
		return ctrl.Result{}, err
	}
	if pod.Labels[v1alpha1.LabelScope] == v1alpha1.ScopeResults {
		return ctrl.Result{}, nil
	}
	patch, ok := release.FinalizerRemovalPatch(pod)
	if !ok {
		return ctrl.Result{}, nil // released meanwhile
	}
	// A rejected patch (the finalizers changed since the read) returns the error: the
	// retry reads the pod again.
	if err := r.Patch(ctx, pod, patch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Metrics.podReleased()
	if r.Recorder != nil {
		scope, labelled := pod.Labels[v1alpha1.LabelScope]
		was := "removed"
		if labelled {
			was = "changed to " + strconv.Quote(scope)
		}
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, v1alpha1.EventReasonLeftResultsScope, "Release",
			"released: its label %s=%s was %s while batchledger held it, which took it out of batchledger's sight, so its result may not be recorded",
			v1alpha1.LabelScope, v1alpha1.ScopeResults, was)
	}
	return ctrl.Result{}, nil
}

// livePod reads a pod from the API server, nil when it is gone. A list by name rather
// than a get, so that the manager needs no get permission on pods (list, watch and patch
// are all it has).
func (r *PodReleaser) livePod(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(key.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(release.NameField, key.Name)}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if pods.Items[i].Name == key.Name {
			return &pods.Items[i], nil
		}
	}
	return nil, nil
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
// deletions and spec changes that may leave pods held for nothing (accountReleasesPods);
// and, in a second controller (pod-release-out-of-scope, ReleaseOutOfScope), held pods
// leaving the results scope.
func (r *PodReleaser) SetupWithManager(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(held))).
		Watches(&v1alpha1.ShardResults{}, handler.EnqueueRequestsFromMapFunc(recordedPods)).
		Watches(&v1alpha1.BatchAccount{}, handler.EnqueueRequestsFromMapFunc(r.heldPodsOfAccount),
			builder.WithPredicates(accountReleasesPods)).
		Named("pod-release").
		Complete(r)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Pod{}, builder.WithPredicates(leftResultsScope)).
		Named("pod-release-out-of-scope").
		Complete(reconcile.Func(r.ReleaseOutOfScope))
}

// held reports whether a pod carries batchledger's finalizer.
func held(o client.Object) bool {
	return slices.Contains(o.GetFinalizers(), v1alpha1.ResultFinalizer)
}

// leftResultsScope passes the pod cache's delete events of held pods: each may be a held
// pod leaving the results scope. A label-selected watch reports a pod whose label stops
// matching as DELETED, with the last state that matched (scope=results), so such an
// event cannot be told from a held pod deleted for real (whose last finalizer was ours,
// removed by Reconcile or kubectl batchledger release): ReleaseOutOfScope reads the pod
// live to tell. That costs one read by name per held pod whose deletion ends with our
// finalizer, and none for other pods.
var leftResultsScope = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(e event.DeleteEvent) bool { return held(e.Object) },
}

func recordedPods(_ context.Context, obj client.Object) []reconcile.Request {
	sr := obj.(*v1alpha1.ShardResults)
	reqs := make([]reconcile.Request, 0, len(sr.Results))
	for _, res := range sr.Results {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sr.Namespace, Name: res.Pod}})
	}
	return reqs
}

// accountReleasesPods passes the account changes that may leave pods held for nothing: its
// deletion (starting or done) and a spec change (requireResults turned off, a target no
// longer named). The mapper runs for the old and the new spec of an update, so the pods
// of a target the account no longer names are woken too; each is then judged by
// mustHold, under every account as it is now. Status writes and creations pass not.
var accountReleasesPods = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectNew.GetDeletionTimestamp() != nil || e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration()
	},
}

// heldPodsOfAccount wakes the held pods of an account's targets.
func (r *PodReleaser) heldPodsOfAccount(ctx context.Context, obj client.Object) []reconcile.Request {
	ba := obj.(*v1alpha1.BatchAccount)
	var reqs []reconcile.Request
	for _, a := range ba.Spec.Assignments {
		var pods corev1.PodList
		if err := r.List(ctx, &pods, client.InNamespace(ba.Namespace), client.MatchingLabels(relations.TargetPodLabels(a.Target))); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing held pods of an account's targets")
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
