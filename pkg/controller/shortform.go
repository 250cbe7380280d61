package controller

import (
	"context"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
)

// ShortFormReconciler creates the BatchAccount a short-form Job or JobSet declares
// (relations.ShortForm, the parse the scope webhook shares).
type ShortFormReconciler struct {
	client.Client
	// Kind is relations.KindJob or relations.KindJobSet.
	Kind string
}

// +kubebuilder:rbac:groups=batchledger.dev,resources=batchaccounts,verbs=list;watch;create

// Reconcile applies the declared account. Errors in the annotations become an event-free
// account-less log line: there is no account to carry a condition yet, so the message
// names the annotation to fix.
func (r *ShortFormReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var obj client.Object = &batchv1.Job{}
	if r.Kind == relations.KindJobSet {
		obj = &jobsetapi.JobSet{}
	}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !relations.HasShortForm(obj.GetAnnotations()) {
		return ctrl.Result{}, nil
	}
	spec, err := relations.ShortForm(obj)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("ignoring malformed batchledger short form", "error", err.Error())
		return ctrl.Result{}, nil
	}
	var existing v1alpha1.BatchAccount
	if err := r.Get(ctx, req.NamespacedName, &existing); err == nil {
		return ctrl.Result{}, nil // created before; the account is the user's from now on
	} else if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	ba := &v1alpha1.BatchAccount{
		ObjectMeta: metav1.ObjectMeta{
			Name: obj.GetName(), Namespace: obj.GetNamespace(),
			Labels: map[string]string{v1alpha1.LabelShortFormOf: r.Kind},
		},
		Spec: spec,
	}
	return ctrl.Result{}, client.IgnoreAlreadyExists(r.Create(ctx, ba))
}

// SetupWithManager watches annotated Jobs or JobSets.
func (r *ShortFormReconciler) SetupWithManager(mgr ctrl.Manager) error {
	hasShortForm := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return relations.HasShortForm(o.GetAnnotations())
	})
	var obj client.Object = &batchv1.Job{}
	if r.Kind == relations.KindJobSet {
		obj = &jobsetapi.JobSet{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(obj, builder.WithPredicates(hasShortForm, predicate.GenerationChangedPredicate{})).
		Named("shortform-" + strings.ToLower(r.Kind)).
		Complete(r)
}
