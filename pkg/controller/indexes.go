package controller

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// Field indexes. A change to one Job, pod or Workload wakes only the accounts that name
// it, through these, instead of a resync of every account.
const (
	// IndexAccountTarget indexes BatchAccounts by "job/<name>" and "jobset/<name>" of
	// each assignment target.
	IndexAccountTarget = "batchledger.dev/target"
	// IndexOwnerUID indexes Workloads and pods by the UID of their controller owner.
	IndexOwnerUID = "batchledger.dev/owner-uid"
)

// Labels JobSet puts on its child Jobs; the restart attempt label lives in an internal
// JobSet package, so it is repeated here.
const (
	LabelRestartAttempt = "jobset.sigs.k8s.io/restart-attempt"
)

func accountTargets(obj client.Object) []string {
	ba := obj.(*v1alpha1.BatchAccount)
	seen := map[string]bool{}
	var out []string
	for _, a := range ba.Spec.Assignments {
		k := "job/" + a.Target.Job
		if a.Target.JobSet != "" {
			k = "jobset/" + a.Target.JobSet
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

func ownerUID(obj client.Object) []string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// SetupIndexes registers the field indexes the reconciler and its watches rely on.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	return RegisterIndexes(ctx, mgr.GetFieldIndexer())
}

// RegisterIndexes registers the field indexes with fi: the manager's cache, or a fake
// client's builder in unit tests of the webhooks.
func RegisterIndexes(ctx context.Context, fi client.FieldIndexer) error {
	if err := fi.IndexField(ctx, &v1alpha1.BatchAccount{}, IndexAccountTarget, accountTargets); err != nil {
		return err
	}
	if err := fi.IndexField(ctx, &kueue.Workload{}, IndexOwnerUID, ownerUID); err != nil {
		return err
	}
	if err := fi.IndexField(ctx, &v1alpha1.ShardResults{}, IndexResultPod, resultPods); err != nil {
		return err
	}
	return fi.IndexField(ctx, &corev1.Pod{}, IndexOwnerUID, ownerUID)
}

// targetKeysOfJob are the account index keys a Job answers to: its own name, and its
// JobSet when it is a JobSet child.
func targetKeysOfJob(labels map[string]string, name string) []string {
	keys := []string{"job/" + name}
	if js := labels[jobsetapi.JobSetNameKey]; js != "" {
		keys = append(keys, "jobset/"+js)
	}
	return keys
}

// liveAccountsNaming lists the accounts that name one of keys and are not being deleted,
// each once, through the IndexAccountTarget field index of c. Holding and releasing pods,
// stamping scopes and publishing Workload conditions all ask it.
func liveAccountsNaming(ctx context.Context, c client.Reader, namespace string, keys ...string) ([]*v1alpha1.BatchAccount, error) {
	var out []*v1alpha1.BatchAccount
	seen := map[string]bool{}
	for _, k := range keys {
		var list v1alpha1.BatchAccountList
		if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{IndexAccountTarget: k}); err != nil {
			return nil, err
		}
		for i := range list.Items {
			ba := &list.Items[i]
			if !seen[ba.Name] && ba.DeletionTimestamp == nil {
				seen[ba.Name] = true
				out = append(out, ba)
			}
		}
	}
	return out, nil
}

// accountsFor maps index keys to reconcile requests of the accounts that name them.
func accountsFor(ctx context.Context, c client.Client, namespace string, keys ...string) []reconcile.Request {
	var reqs []reconcile.Request
	seen := map[types.NamespacedName]bool{}
	for _, k := range keys {
		var list v1alpha1.BatchAccountList
		if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{IndexAccountTarget: k}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing accounts by target", "target", k)
			continue
		}
		for i := range list.Items {
			nn := client.ObjectKeyFromObject(&list.Items[i])
			if !seen[nn] {
				seen[nn] = true
				reqs = append(reqs, reconcile.Request{NamespacedName: nn})
			}
		}
	}
	return reqs
}

// jobToAccounts wakes the accounts naming a Job or its JobSet.
func (r *Reconciler) jobToAccounts(ctx context.Context, obj client.Object) []reconcile.Request {
	return accountsFor(ctx, r.Client, obj.GetNamespace(), targetKeysOfJob(obj.GetLabels(), obj.GetName())...)
}

// podToAccounts wakes the accounts naming the pod's Job.
func (r *Reconciler) podToAccounts(ctx context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[batchv1.JobNameLabel]
	if name == "" {
		return nil
	}
	return accountsFor(ctx, r.Client, obj.GetNamespace(), targetKeysOfJob(obj.GetLabels(), name)...)
}

// workloadToAccounts wakes the accounts naming the Workload's owner Job or JobSet.
func (r *Reconciler) workloadToAccounts(ctx context.Context, obj client.Object) []reconcile.Request {
	return accountsFor(ctx, r.Client, obj.GetNamespace(), workloadOwnerKeys(obj)...)
}

// workloadOwnerKeys are the account index keys of a Workload's owner Job or JobSet.
func workloadOwnerKeys(obj client.Object) []string {
	var keys []string
	for _, ref := range obj.GetOwnerReferences() {
		switch ref.Kind {
		case "Job":
			keys = append(keys, "job/"+ref.Name)
		case "JobSet":
			keys = append(keys, "jobset/"+ref.Name)
		}
	}
	return keys
}

// BatchPeriod is how long the reconciler lets Job and pod changes gather before it
// recomputes an account: the Job controller itself batches pod updates (its
// syncJobBatchPeriod), and a Job of many indexes finishing pods every few milliseconds
// would otherwise cost one account computation and status write per pod.
const BatchPeriod = 300 * time.Millisecond

// batched is an event handler that maps an object to accounts like mapFn, but enqueues
// them after BatchPeriod: the workqueue keeps one pending entry per account, so every
// change within the period folds into one reconcile.
func batched(mapFn handler.MapFunc) handler.EventHandler {
	enqueue := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range mapFn(ctx, obj) {
			q.AddAfter(req, BatchPeriod)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
	}
}
