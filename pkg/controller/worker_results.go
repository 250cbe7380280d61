package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/relations"
)

// WorkerResults are the results the worker role of MultiKueue worker clusters recorded,
// as the manager reads them (pkg/multikueue/workers).
type WorkerResults interface {
	// Records are the WorkerResults worker holds of the manager Workload
	// namespace/workload, and what is known of the worker.
	Records(ctx context.Context, worker, namespace, workload string) ([]v1alpha1.WorkerResult, multikueue.WorkerState, error)
	// Events carry each WorkerResult a worker recorded, to wake its accounts.
	Events() <-chan event.GenericEvent
}

// WorkerRecheck is how often an account whose results are pending on a worker cluster
// is looked at again: a worker's reachability is probed, not watched.
const WorkerRecheck = 30 * time.Second

// resultSource is a succeeded pod whose result an account records: a pod of this
// cluster, or the pod a worker's WorkerResult records (cluster names the worker).
type resultSource struct {
	pod     *corev1.Pod
	jobUID  types.UID
	index   int
	cluster string
}

// workerAdmissions are the (worker, Workload) pairs whose records a dispatched target
// accepts: its admissions the account recorded (status.targets[].admissions[]) and the
// Workload observed now. A record naming another Workload, or read from a worker the
// Workload was never admitted to, is not the target's.
func workerAdmissions(ba *v1alpha1.BatchAccount, key string, o observed) [][2]string {
	var out [][2]string
	add := func(cluster, workload string) {
		if cluster == "" || workload == "" {
			return
		}
		for _, p := range out {
			if p == [2]string{cluster, workload} {
				return
			}
		}
		out = append(out, [2]string{cluster, workload})
	}
	for _, ts := range ba.Status.Targets {
		if ts.Name != key || o.job == nil || ts.UID != o.job.UID {
			continue
		}
		for _, a := range ts.Admissions {
			add(a.Cluster, a.Workload)
		}
	}
	if o.workload != nil {
		add(multikueue.Cluster(o.workload), o.workload.Name)
	}
	return out
}

// workerSources are the results of a dispatched target the workers it was admitted to
// recorded, under the manager's identity (its Job's UID, the record's index).
func (r *Reconciler) workerSources(ctx context.Context, ba *v1alpha1.BatchAccount, t account.Target, o observed) ([]resultSource, error) {
	if r.WorkerResults == nil || !multikueue.Dispatched(o.job) {
		return nil, nil
	}
	var out []resultSource
	for _, p := range workerAdmissions(ba, t.Key, o) {
		recs, _, err := r.WorkerResults.Records(ctx, p[0], ba.Namespace, p[1])
		if err != nil {
			return nil, err
		}
		for i := range recs {
			if recs[i].Job != o.job.Name {
				continue
			}
			out = append(out, resultSource{pod: multikueue.RecordPod(&recs[i]), jobUID: o.job.UID, index: int(recs[i].Index), cluster: p[0]})
		}
	}
	return out, nil
}

// observeWorker tells the account of a dispatched target where its results are read
// from (account.Observation.ResultsOnWorker, WorkerProblem). A worker the manager has no
// kubeconfig for (never given, or its Secret deleted) can report none of the results
// recorded there: once the Job terminated they count as lost (PodsListed), as the
// results of a terminated Job without pods do on one cluster.
func (r *Reconciler) observeWorker(ctx context.Context, namespace string, o *observed) error {
	if r.WorkerResults == nil || !multikueue.Dispatched(o.job) || o.workload == nil {
		return nil
	}
	cluster := multikueue.Cluster(o.workload)
	if cluster == "" {
		return nil
	}
	_, state, err := r.WorkerResults.Records(ctx, cluster, namespace, o.workload.Name)
	if err != nil {
		return err
	}
	o.obs.ResultsOnWorker = true
	o.obs.WorkerProblem = state.Problem(cluster)
	o.obs.PodsListed = !state.Configured
	return nil
}

// pendingOnWorker is whether an account's results wait on a worker cluster: it is
// looked at again every WorkerRecheck, so that its message follows the worker's state.
func pendingOnWorker(ba *v1alpha1.BatchAccount, seen map[string]observed) bool {
	if !ba.Spec.RequiresResults() {
		return false
	}
	for _, o := range seen {
		if o.obs.ResultsOnWorker {
			return true
		}
	}
	return false
}

// workerResultToAccounts maps a WorkerResult to the live accounts naming its Job.
func (r *Reconciler) workerResultToAccounts(ctx context.Context, obj client.Object) []reconcile.Request {
	rec, ok := obj.(*v1alpha1.WorkerResult)
	if !ok {
		return nil
	}
	accounts, err := relations.LiveAccountsNaming(ctx, r.Client, rec.Namespace, kinds.Key("job", rec.Job))
	if err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(accounts))
	for _, ba := range accounts {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ba)})
	}
	return reqs
}
