package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds/all"
	"batchledger.dev/batchledger/pkg/relations"
)

// Our conditions on a Workload speak for the accounts that name its Job or JobSet
// (desiredWorkloadConditions). An account that is deleted, or changed so that it no longer
// names the Job, publishes nothing more there; a finished Workload never changes again to
// wake anyone, so its last verdict would stay for good, read by admins as the verdict of
// an account that no longer exists. Three paths take it away:
//   - the other accounts naming the Workload are woken (accountChanges) and republish
//     without it;
//   - when no account names the Workload any more (or only Accepted ones that do not
//     follow its Job: speaksFor), workloadCleanup removes our conditions from it;
//   - an account being deleted, reconciled while a finalizer keeps it, publishes the
//     verdict of the others without its own, or removes ours when none is left
//     (workloadAccounts, planPublish): a publish of it that read it before its deletion
//     may land after the first two, so the cleanup looks again (WorkloadCleanupRecheck).

// WorkloadCleanupControllerName names the controller that removes our conditions from
// Workloads no account names any more.
const WorkloadCleanupControllerName = "workload-conditions"

// WorkloadCleanupRecheck is when the cleanup looks at a former account's Workloads again,
// after its first look BatchPeriod after the account's deletion or spec change: a
// Workload apply the account's reconcile sent before it may land after that first look,
// and no Workload update wakes the cleanup.
const WorkloadCleanupRecheck = 10 * time.Second

// EventReasonConditionsRemoved is the reason of the event on a Workload whose batchledger
// conditions were removed because no account names its Job or JobSet any more.
const EventReasonConditionsRemoved = "BatchLedgerConditionsRemoved"

// workloadCleanup removes batchledger's conditions from a Workload that no live account
// names. It writes only such Workloads; every other publish is the account reconciler's.
type workloadCleanup struct{ r *Reconciler }

// Reconcile removes our conditions from the Workload when it carries some and no live
// account names its owner: an apply of no condition under our field manager takes away
// the ones it owned, and nobody else's.
func (w workloadCleanup) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var wl kueue.Workload
	if err := w.r.Get(ctx, req.NamespacedName, &wl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !carriesOurConditions(&wl) {
		return ctrl.Result{}, nil
	}
	accounts, err := relations.LiveAccountsNaming(ctx, w.r.Client, wl.Namespace, relations.WorkloadKeys(&wl)...)
	if err != nil {
		return ctrl.Result{}, err
	}
	if slices.ContainsFunc(accounts, func(ba *v1alpha1.BatchAccount) bool { return speaksFor(ba, &wl) }) {
		// They republish: accountChanges woke them with this request. An Accepted
		// account that names the Workload's Job but not its identity never does.
		return ctrl.Result{}, nil
	}
	ac := kueueac.Workload(wl.Name, wl.Namespace).WithUID(wl.UID).WithStatus(kueueac.WorkloadStatus())
	switch err := w.r.writer().ApplyWorkloadStatus(ctx, ac); {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("removing batchledger's conditions from Workload %s: %w", wl.Name, err)
	}
	w.r.Metrics.workloadWritten()
	if w.r.Recorder != nil {
		w.r.Recorder.Eventf(&wl, nil, corev1.EventTypeNormal, EventReasonConditionsRemoved, EventActionVerdict,
			"no BatchAccount names %s any more; batchledger's conditions removed", ownerDescription(&wl))
	}
	return ctrl.Result{}, nil
}

// ownerDescription names a Workload's owner for a person: "job j", "jobset js",
// "trainjob llm".
func ownerDescription(wl *kueue.Workload) string {
	if ref := relations.WorkloadOwner(wl); ref != nil {
		return all.Kinds.Owning(*ref).Name() + " " + ref.Name
	}
	return "its owner"
}

// carriesOurConditions reports whether any batchledger condition is on the Workload.
func carriesOurConditions(wl *kueue.Workload) bool {
	ours, _ := splitConditions(wl.Status.Conditions)
	return len(ours) > 0
}

// setupWorkloadCleanup registers workloadCleanup. It runs for a Workload that carries our
// conditions when the cache first lists it (so a deletion while the manager was down is
// caught at its start), and for the Workloads of an account that was deleted or whose
// assignments changed (the old account's targets). Workload updates never wake it: those
// are the account reconciler's.
func (r *Reconciler) setupWorkloadCleanup(mgr ctrl.Manager) error {
	listed := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return carriesOurConditions(e.Object.(*kueue.Workload)) },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&kueue.Workload{}, builder.WithPredicates(listed)).
		Watches(&v1alpha1.BatchAccount{}, r.formerWorkloads(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named(WorkloadCleanupControllerName).
		Complete(workloadCleanup{r})
}

// formerWorkloads maps an account that is deleted, or whose spec changed, to the
// Workloads its targets ran under before: those it may have published on and no longer
// will. A new account publishes itself.
func (r *Reconciler) formerWorkloads() handler.EventHandler {
	enqueue := func(ctx context.Context, ba client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		acct, ok := ba.(*v1alpha1.BatchAccount)
		if !ok {
			return
		}
		wls, err := relations.WorkloadsOf(ctx, r.Client, acct.Namespace, relations.FollowedKeys(acct)...)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing the Workloads of a former account's targets", "account", acct.Name)
		}
		for _, wl := range wls {
			// After BatchPeriod, as the accounts woken by the same event: they republish
			// first when they still name the Workload. And once more later: a publish of
			// the account that read it before the change may land after the first look.
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}}
			q.AddAfter(req, BatchPeriod)
			q.AddAfter(req, WorkloadCleanupRecheck)
		}
	}
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.ObjectOld, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
	}
}

// accountChanges wakes, for an account's own changes, the account itself and, when it is
// deleted or its spec changed, the other accounts that share a target with it (before or
// after the change): they publish the Workload conditions of every account naming their
// Workloads, and must republish without it, or with its new verdict.
func (r *Reconciler) accountChanges() handler.EventHandler {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
		r.Metrics.wokeUp("BatchAccount", len(reqs))
		for _, req := range reqs {
			q.AddAfter(req, BatchPeriod)
		}
	}
	others := func(ctx context.Context, ba client.Object) []reconcile.Request {
		acct, ok := ba.(*v1alpha1.BatchAccount)
		if !ok {
			return nil
		}
		return accountsFor(ctx, r.Client, acct.Namespace, relations.FollowedKeys(acct)...)
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, self(ctx, e.Object))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, self(ctx, e.ObjectNew))
			add(q, others(ctx, e.ObjectOld))
			add(q, others(ctx, e.ObjectNew))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			// Itself too: the reconcile of a deleted account forgets its metrics.
			add(q, self(ctx, e.Object))
			add(q, others(ctx, e.Object))
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, self(ctx, e.Object))
		},
	}
}
