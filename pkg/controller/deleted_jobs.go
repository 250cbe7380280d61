package controller

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Bounds of deletedJobs: how long a deleted Job's last state is kept for the reconciles
// of its accounts, and how many are kept at most (the oldest go first).
const (
	deletedJobTTL   = 10 * time.Minute
	maxDeletedJobs  = 10000
	deletedJobSweep = 1000
)

// deletedJobs keeps the last state of deleted Jobs that accounts name, by namespace and
// name, for a while: a Job deleted the moment it finished (ttlSecondsAfterFinished: 0) is
// gone from the cache before the reconcile its Complete woke, and without its last state
// the account would record it as deleted before it terminated
// (account.Observation.DeletedJob). The zero value is ready to use.
//
// It is the fallback for Jobs without v1alpha1.RecordFinalizer (created while the webhook
// was unreachable and gone before the controller added it, or released by hand): a Job
// that carries it stays, Terminating with its final status, until its accounts recorded
// its end (JobRecorder), so they read that end from the Job itself, also after a restart,
// which this memory does not survive.
type deletedJobs struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]deletedJob
}

type deletedJob struct {
	job *batchv1.Job
	at  time.Time
}

// add keeps job's last state, deleted at now.
func (d *deletedJobs) add(job *batchv1.Job, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.jobs == nil {
		d.jobs = map[types.NamespacedName]deletedJob{}
	}
	if len(d.jobs) >= maxDeletedJobs {
		d.sweep(now)
	}
	d.jobs[types.NamespacedName{Namespace: job.Namespace, Name: job.Name}] = deletedJob{job: job, at: now}
}

// sweep forgets the expired entries, and when that is not enough the oldest, down to
// deletedJobSweep under the bound, so that the next adds find room; called with d.mu held.
func (d *deletedJobs) sweep(now time.Time) {
	for k, e := range d.jobs {
		if now.Sub(e.at) > deletedJobTTL {
			delete(d.jobs, k)
		}
	}
	excess := len(d.jobs) - (maxDeletedJobs - deletedJobSweep)
	if excess <= 0 {
		return
	}
	keys := slices.Collect(maps.Keys(d.jobs))
	slices.SortFunc(keys, func(a, b types.NamespacedName) int { return d.jobs[a].at.Compare(d.jobs[b].at) })
	for _, k := range keys[:excess] {
		delete(d.jobs, k)
	}
}

// get is the last state of the Job of that name deleted within deletedJobTTL of now, or
// nil. It is read-only.
func (d *deletedJobs) get(namespace, name string, now time.Time) *batchv1.Job {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.jobs[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok || now.Sub(e.at) > deletedJobTTL {
		return nil
	}
	return e.job
}

// jobEvents is coalesced(BatchPeriod, jobUpdateDelay, jobToAccounts) that also keeps the last state of a
// deleted Job some account names (deletedJobs), before its accounts are woken.
func (r *Reconciler) jobEvents() handler.EventHandler {
	toAccounts := r.counted("Job", r.jobToAccounts)
	h := coalesced(BatchPeriod, jobUpdateDelay, toAccounts)
	return handler.Funcs{
		CreateFunc:  h.Create,
		UpdateFunc:  h.Update,
		GenericFunc: h.Generic,
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if job, ok := e.Object.(*batchv1.Job); ok {
				if reqs := toAccounts(ctx, job); len(reqs) > 0 {
					r.deletedJobs.add(job, r.now())
					for _, req := range reqs {
						q.AddAfter(req, BatchPeriod)
					}
				}
				return
			}
			h.Delete(ctx, e, q)
		},
	}
}
