package controller

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
)

// EventActionCreateAccount is the action of the events about a short form: creating the
// account it declares.
const EventActionCreateAccount = "CreateAccount"

// maxEventNote bounds an event's note: the API server refuses a longer one.
const maxEventNote = 1024

// ShortFormReconciler creates the BatchAccount a short-form Job or JobSet declares
// (relations.ShortForm). Whatever stands in the way of that account is a Warning event on
// the Job or JobSet, whose author is the one to act: annotations that do not parse
// (InvalidShortForm), an account the API server refuses (ShortFormRejected).
type ShortFormReconciler struct {
	client.Client
	// Recorder emits the Warnings on the Job or JobSet.
	Recorder events.EventRecorder
	// Kind is relations.KindJob or relations.KindJobSet.
	Kind string
}

// +kubebuilder:rbac:groups=batchledger.dev,resources=batchaccounts,verbs=list;watch;create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile creates the declared account once. A mistake in the annotations, or an
// account the API server refuses, is terminal until the Job or JobSet changes: it is a
// Warning, not a retry. An existing account of that name is never modified: the account
// is the user's from now on.
func (r *ShortFormReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.newObject()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !relations.HasShortForm(obj.GetAnnotations()) {
		return ctrl.Result{}, nil
	}
	spec, err := relations.ShortForm(obj)
	if err != nil {
		r.warn(ctx, obj, nil, v1alpha1.EventReasonInvalidShortForm,
			"no BatchAccount was created (and the pods get no batchledger scope): %s. Fix the annotation; the account is created as soon as the annotations parse", err)
		return ctrl.Result{}, nil
	}
	var existing v1alpha1.BatchAccount
	if err := r.Get(ctx, req.NamespacedName, &existing); err == nil {
		return ctrl.Result{}, nil
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	ba := &v1alpha1.BatchAccount{
		ObjectMeta: metav1.ObjectMeta{
			Name: obj.GetName(), Namespace: obj.GetNamespace(),
			Labels: map[string]string{v1alpha1.LabelShortFormOf: r.Kind},
		},
		Spec: spec,
	}
	switch err := r.Create(ctx, ba); {
	case err == nil, apierrors.IsAlreadyExists(err):
		// AlreadyExists: the cache lags a create; the next change of the object compares.
		return ctrl.Result{}, nil
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
		r.warn(ctx, obj, nil, v1alpha1.EventReasonShortFormRejected,
			"the API server refused BatchAccount %s, which the short-form annotations declare: %s. It is tried again when the %s's annotations or spec change",
			ba.Name, err, r.Kind)
		return ctrl.Result{}, nil
	default:
		return ctrl.Result{}, err
	}
}

// newObject is an empty object of the reconciler's kind.
func (r *ShortFormReconciler) newObject() client.Object {
	if r.Kind == relations.KindJobSet {
		return &jobsetapi.JobSet{}
	}
	return &batchv1.Job{}
}

// warn emits a Warning about obj's short form, and logs it.
func (r *ShortFormReconciler) warn(ctx context.Context, obj client.Object, related runtime.Object, reason, note string, args ...any) {
	msg := clip(fmt.Sprintf(note, args...), maxEventNote)
	ctrl.LoggerFrom(ctx).Info("short form: no account as declared", "reason", reason, "message", msg)
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, related, corev1.EventTypeWarning, reason, EventActionCreateAccount, "%s", msg)
	}
}

// SetupWithManager watches Jobs or JobSets carrying a short form (shortFormChanges).
func (r *ShortFormReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(r.newObject(), builder.WithPredicates(shortFormChanges())).
		Named("shortform-" + strings.ToLower(r.Kind)).
		Complete(r)
}

// shortFormChanges passes a Job or JobSet carrying a short form when it is created and
// when its spec or annotations change: fixing an annotation is the way forward from an
// InvalidShortForm or a ShortFormRejected.
func shortFormChanges() predicate.Predicate {
	hasShortForm := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return relations.HasShortForm(o.GetAnnotations())
	})
	return predicate.And(hasShortForm, predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
}
