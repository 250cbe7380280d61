package controller

import (
	"context"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/relations"
)

// SetupIndexes registers the field indexes the reconcilers, their watches and the
// webhooks' lookups rely on (relations.RegisterIndexes) with the manager's cache, those
// of kinds the cluster does not serve (apis; nil: all served) left out.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager, apis *ServedAPIs) error {
	return relations.RegisterIndexes(ctx, servedIndexer{FieldIndexer: mgr.GetFieldIndexer(), apis: apis, scheme: mgr.GetScheme()})
}

// accountsFor maps index keys to reconcile requests of the accounts that name them,
// those being deleted included. A key whose lookup fails is logged and skipped.
func accountsFor(ctx context.Context, c client.Reader, namespace string, keys ...relations.IndexKey) []reconcile.Request {
	var reqs []reconcile.Request
	seen := map[types.NamespacedName]bool{}
	for _, k := range keys {
		accounts, err := relations.AccountsNaming(ctx, c, namespace, k)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing accounts by target", "target", k)
			continue
		}
		for _, ba := range accounts {
			nn := client.ObjectKeyFromObject(ba)
			if !seen[nn] {
				seen[nn] = true
				reqs = append(reqs, reconcile.Request{NamespacedName: nn})
			}
		}
	}
	return reqs
}

// jobToAccounts wakes the accounts naming a Job, or its JobSet when the JobSet controls
// it (relations.JobKeys): a Job that only carries a JobSet's labels wakes no account of
// the JobSet.
func (r *Reconciler) jobToAccounts(ctx context.Context, obj client.Object) []reconcile.Request {
	return accountsFor(ctx, r.Client, obj.GetNamespace(), relations.JobKeys(obj)...)
}

// podToAccounts wakes the accounts naming the pod's Job.
func (r *Reconciler) podToAccounts(ctx context.Context, obj client.Object) []reconcile.Request {
	return accountsFor(ctx, r.Client, obj.GetNamespace(), relations.PodKeys(obj)...)
}

// workloadToAccounts wakes the accounts naming the Workload's owner (a Job, a JobSet, a
// TrainJob), those that observed their targets under it, and those naming a child Job
// of its JobSet by its Job name (relations.WorkloadChildKeys).
func (r *Reconciler) workloadToAccounts(ctx context.Context, obj client.Object) []reconcile.Request {
	keys := relations.WorkloadKeys(obj)
	children, err := relations.WorkloadChildKeys(ctx, r.Client, obj)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the child Jobs of a Workload's JobSet", "workload", obj.GetName())
	}
	return accountsFor(ctx, r.Client, obj.GetNamespace(), append(keys, children...)...)
}

// ownerToAccounts is, for a kind of child target, the mapper of its owners (a JobSet, a
// TrainJob) to the accounts naming one of their children.
func (r *Reconciler) ownerToAccounts(kind kinds.Kind) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		return accountsFor(ctx, r.Client, obj.GetNamespace(), kinds.Key(kind.Name(), obj.GetName()))
	}
}

// BatchPeriod is how long the reconciler lets Job, Workload and account changes gather
// before it recomputes an account: the Job controller itself batches pod updates (its
// syncJobBatchPeriod), and a Job of many indexes finishing pods every few milliseconds
// would otherwise cost one account computation and status write per pod.
const BatchPeriod = 300 * time.Millisecond

// PodBatchPeriod is how long a pod's success waits before it wakes its accounts: the Job
// controller's own batch period (1s, syncJobBatchPeriod) plus BatchPeriod. The Job status
// update that records the index follows the pod by up to that second, so the account reads
// both in one computation and writes once, where waking at once would write the attempt,
// then the index. The pod is held by our finalizer when its result counts, so nothing is
// lost by waiting; a Job update in between wakes the account sooner (the workqueue keeps
// the earliest of an account's pending wake-ups).
const PodBatchPeriod = time.Second + BatchPeriod

// LeadUpPeriod is how long a Job or Workload update waits before it wakes its accounts
// when it only leads up to what an account writes (jobLeadUp, workloadLeadUp): Kueue
// admitting a Workload and unsuspending its Job, the Job starting, a success the Job
// controller has yet to count. The
// Job controller counts a success within its own batch period (1s, syncJobBatchPeriod),
// and the update that does wakes the account after BatchPeriod, taking the lead-up along:
// one reconcile where there were two. An admission changes only which wait the account
// is in (waitingOnly), whose write waits longer still (WaitingStatusDelay).
const LeadUpPeriod = PodBatchPeriod

// batched is an event handler that maps an object to the accounts naming it and enqueues
// them after delay: the workqueue keeps one pending entry per account, so every change
// within the window costs a single reconcile. An update that changed the object's owner
// references maps the old object too: a Job whose JobSet stopped controlling it (it was
// orphaned) is no longer that JobSet's child, and the accounts that followed it must
// learn so.
func batched(delay time.Duration, mapFn handler.MapFunc) handler.EventHandler {
	return coalesced(delay, nil, mapFn)
}

// coalesced is batched whose updates wait updateDelay(e) (delay when nil): an update
// that only leads up to the change an account writes waits longer (LeadUpPeriod), so
// that it goes in one reconcile with that change. The workqueue keeps the earliest of an
// account's pending wake-ups, so a change that must be written soon is never held back
// by a lead-up waiting before it.
func coalesced(delay time.Duration, updateDelay func(event.UpdateEvent) time.Duration, mapFn handler.MapFunc) handler.EventHandler {
	enqueue := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], after time.Duration) {
		for _, req := range mapFn(ctx, obj) {
			q.AddAfter(req, after)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, delay)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			after := delay
			if updateDelay != nil {
				after = updateDelay(e)
			}
			enqueue(ctx, e.ObjectNew, q, after)
			if e.ObjectOld != nil && !ownersEqual(e.ObjectOld.GetOwnerReferences(), e.ObjectNew.GetOwnerReferences()) {
				enqueue(ctx, e.ObjectOld, q, after)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, delay)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, delay)
		},
	}
}

// counted is mapFn counting the accounts it wakes under source (Metrics.Wakeups).
func (r *Reconciler) counted(source string, mapFn handler.MapFunc) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		reqs := mapFn(ctx, obj)
		r.Metrics.wokeUp(source, len(reqs))
		return reqs
	}
}

// self maps an account to itself.
func self(_ context.Context, obj client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(obj)}}
}

// ownersEqual compares two objects' owner references, in memory: the update handlers ask
// it of every event.
func ownersEqual(a, b []metav1.OwnerReference) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.OwnerReference) bool {
		return x.UID == y.UID && x.Kind == y.Kind && x.Name == y.Name && x.APIVersion == y.APIVersion &&
			ptr.Deref(x.Controller, false) == ptr.Deref(y.Controller, false)
	})
}
