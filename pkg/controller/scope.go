package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/relations"
)

// scopePatch is a merge patch raising the scope label on an object's own metadata to
// meta, and on its pod template (spec.template) to tmpl; an empty scope leaves that
// place alone.
func scopePatch(meta, tmpl string) client.Patch {
	labels := func(scope string) map[string]any {
		return map[string]any{"labels": map[string]string{v1alpha1.LabelScope: scope}}
	}
	p := map[string]any{}
	if meta != "" {
		p["metadata"] = labels(meta)
	}
	if tmpl != "" {
		p["spec"] = map[string]any{"template": map[string]any{"metadata": labels(tmpl)}}
	}
	b, _ := json.Marshal(p) // maps of strings: cannot fail
	return client.RawPatch(types.MergePatchType, b)
}

// stampScope raises the scope label of a Job the account follows to want: on the Job's
// own metadata always, since the manager's cache holds only the Jobs labelled there
// (CacheOptions), and on its pod template only while it may still change. Kubernetes
// lets the pod template labels of a suspended Job change only until it first starts
// (Kueue creates its Jobs suspended), so a Job that is already running keeps its
// template's scope: its pods are not held, and its results are read while its pods
// exist. A Job Kueue preempted (suspended, its startTime cleared) after pods of it ran
// is raised all the same, so that the pods it runs once admitted again are held; those
// that ran before keep their scope and are read beside them (withEarlierScope). The
// returned scope is the Job's template's after the call.
func (r *Reconciler) stampScope(ctx context.Context, job *batchv1.Job, want string) (string, error) {
	haveTmpl, haveMeta := job.Spec.Template.Labels[v1alpha1.LabelScope], job.Labels[v1alpha1.LabelScope]
	var tmpl, meta string
	if s := relations.StrongerScope(haveTmpl, want); s != haveTmpl && suspended(job) && job.Status.StartTime == nil {
		tmpl = s
	}
	if s := relations.StrongerScope(haveMeta, want); s != haveMeta {
		meta = s
	}
	if tmpl == "" && meta == "" {
		return haveTmpl, nil
	}
	if err := r.Patch(ctx, job, scopePatch(meta, tmpl)); err != nil {
		return haveTmpl, client.IgnoreNotFound(err)
	}
	if tmpl != "" {
		r.Metrics.scopeStamped()
	}
	if meta != "" {
		r.Metrics.scopeLabelled(cachedJob)
	}
	return job.Spec.Template.Labels[v1alpha1.LabelScope], nil
}

// stampTarget raises the scope of a target's Job (nil: none found yet), and of the
// templates its kind makes future Jobs from (Kind.StampScope: a suspended JobSet's
// replicatedJob, so that a restart's new children keep it), to what the account needs.
// The owner is stamped before any child exists too: a JobSet queued in Kueue, or one
// MultiKueue dispatches (its children exist only on the worker), that the creation
// webhook did not stamp (its cache had not seen the account yet) would otherwise run
// unstamped. So is one Kueue preempted after its children ran: JobSet merges its
// template's labels into its children as it resumes them, and a restart creates them
// from it, so the pods they run next are held; those that ran before keep their scope
// and are read beside them (withEarlierScope). A failed stamp costs only the hold of
// results, never the accounting (the
// Job is read from the API server until its label lands), so it is logged and the
// reconcile goes on.
func (r *Reconciler) stampTarget(ctx context.Context, ba *v1alpha1.BatchAccount, ref v1alpha1.TargetRef, job *batchv1.Job) {
	want := relations.AccountScope(ba)
	log := ctrl.LoggerFrom(ctx)
	// A dispatched JobSet's child read from a worker's record is no Job of this cluster.
	if job != nil && !multikueue.FromRecord(job) {
		if _, err := r.stampScope(ctx, job, want); err != nil {
			log.Error(err, "stamping the opt-in scope label on a Job", "job", job.Name)
		}
	}
	k := relations.KindOf(ref)
	if k == nil {
		return
	}
	n, err := k.StampScope(ctx, r.Client, ba.Namespace, ref, want)
	if err != nil {
		log.Error(err, "stamping the opt-in scope label on a suspended owner", "kind", k.Name(), "name", ref.Owner())
	}
	for range n {
		r.Metrics.scopeStamped()
	}
}

// resolveLive finds the Job a target names from the API server, for a target the cache
// does not hold: a Job that carries no scope label on its metadata (created before its
// account, before this version, or while the scope webhook failed open). Only the Jobs
// are read live (relations.JobsFrom); a JobSet or TrainJob is read from the cache. Once
// stampTarget labelled the Job, the cache and its watch carry it and this read is not
// made again. A Job target seen deleted is not looked for. It follows the identity the
// account follows (followed) as the cached read does (resolveFollowed).
func (r *Reconciler) resolveLive(ctx context.Context, namespace string, ref v1alpha1.TargetRef, followed kinds.Followed) (*batchv1.Job, int32, error) {
	if r.APIReader == nil || (!ref.IsChild() && r.deletedJobs.get(namespace, ref.Job, r.now()) != nil) {
		return nil, 0, nil
	}
	r.Metrics.liveRead(cachedJob)
	return r.resolveFollowed(ctx, relations.JobsFrom(r.APIReader, r.Client), namespace, ref, followed)
}

// Bounds of unfoundRecheck: the default of Reconciler.UnfoundRecheck, and the longest.
const (
	DefaultUnfoundRecheck = time.Minute
	MaxUnfoundRecheck     = 5 * time.Minute
)

// unfoundRecheck is when an account, age old, that names a Job no read found (neither the
// cache nor the API server, nor seen deleted) looks for it again. Such a Job, created
// later, wakes the account through the cache when the scope webhook labelled it; one
// created while the webhook failed open with the manager up carries no label, and no
// event of it, its Workload or its pods reaches the controller. So the account looks
// again itself: after a quarter of its age, at least r.UnfoundRecheck (an account
// created ahead of its Jobs, as a pipeline does, is not brought back while they come)
// and at most MaxUnfoundRecheck (a name that never comes costs one read per target
// every five minutes). Without an API reader there is no read that could find it: 0.
// A Job target's JobSet child seen deleted while its owner runs is awaited the same way:
// its owner's end wakes only the accounts naming the owner, so without the recheck an
// owner that ends without creating it again would leave the account waiting.
func (r *Reconciler) unfoundRecheck(ba *v1alpha1.BatchAccount, seen map[string]observed, now time.Time) time.Duration {
	if r.APIReader == nil || apimeta.IsStatusConditionTrue(ba.Status.Conditions, v1alpha1.ConditionTerminated) {
		return 0
	}
	least := cmp.Or(r.UnfoundRecheck, DefaultUnfoundRecheck)
	for _, o := range seen {
		awaited := o.deletedJob == nil || o.obs.ChildOwner == account.OwnerRunning
		if o.job == nil && awaited && o.obs.OwnerEnded == "" && o.obs.APINotServed == "" {
			return max(min(now.Sub(ba.CreationTimestamp.Time)/4, MaxUnfoundRecheck), least)
		}
	}
	return 0
}

// liveWorkloadRetry is how long a live read that found no Workload for an owner keeps
// the next one away while the Job stays suspended, or running, as it was: a Job that
// Kueue does not manage has none, and would otherwise cost one LIST per reconcile of its
// account. A Job that Kueue unsuspended (it admitted the Workload made since) is read
// again at once; its other changes (its pods' progress) are not a reason to.
const liveWorkloadRetry = 10 * time.Second

// workloadLive finds, from the API server, the Workload of a target's Job that the cache
// does not hold (Kueue did not copy the scope label onto it: its Configuration's
// integrations.labelKeysToCopy lacks v1alpha1.LabelScope, or the Job was labelled after
// its Workload was made), and labels it with scope so that the cache holds it from then
// on. nil when there is none, or when a read for the same owner and Job suspension
// found none less than liveWorkloadRetry ago.
func (r *Reconciler) workloadLive(ctx context.Context, ref v1alpha1.TargetRef, job *batchv1.Job, scope string) (*kueue.Workload, error) {
	if r.APIReader == nil {
		return nil, nil
	}
	owner, err := relations.WorkloadOwnerUID(ctx, r.Client, ref, job)
	if err != nil || owner == "" || !r.workloadMisses.due(owner, suspended(job), r.now()) {
		return nil, err
	}
	r.Metrics.liveRead(cachedWorkload)
	wl, err := relations.LiveWorkloadOf(ctx, r.APIReader, owner, job)
	if err != nil || wl == nil {
		r.workloadMisses.missed(owner, suspended(job), r.now())
		return nil, err
	}
	r.workloadMisses.found(owner)
	if _, ok := wl.Labels[v1alpha1.LabelScope]; ok {
		return wl, nil
	}
	if err := r.Patch(ctx, wl, scopePatch(scope, "")); err != nil {
		// Read, not labelled: the account still sees it, and the next reconcile tries again.
		ctrl.LoggerFrom(ctx).Error(err, "labelling a Workload with the opt-in scope", "workload", wl.Name)
		return wl, nil
	}
	r.Metrics.scopeLabelled(cachedWorkload)
	return wl, nil
}

// suspended reports whether job is suspended (Kueue has not admitted its Workload).
func suspended(job *batchv1.Job) bool { return ptr.Deref(job.Spec.Suspend, false) }

// liveMisses remembers the owners whose live Workload read found none: when, and whether
// the Job read for was suspended.
type liveMisses struct {
	mu sync.Mutex
	at map[types.UID]liveMiss
}

type liveMiss struct {
	at        time.Time
	suspended bool
}

// due reports whether owner may be read again for its Job, now suspended or not: never
// missed, its Job's suspension changed since, or missed liveWorkloadRetry ago.
func (m *liveMisses) due(owner types.UID, suspended bool, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	miss, ok := m.at[owner]
	return !ok || miss.suspended != suspended || now.Sub(miss.at) >= liveWorkloadRetry
}

// liveMissesPrune is the size from which missed drops the entries past their retry.
const liveMissesPrune = 1024

// missed records a read of owner that found none; past liveMissesPrune entries, those
// past their retry are dropped, so the map stays near the owners of the last
// liveWorkloadRetry.
func (m *liveMisses) missed(owner types.UID, suspended bool, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		m.at = map[types.UID]liveMiss{}
	}
	if len(m.at) >= liveMissesPrune {
		for uid, miss := range m.at {
			if now.Sub(miss.at) >= liveWorkloadRetry {
				delete(m.at, uid)
			}
		}
	}
	m.at[owner] = liveMiss{at: now, suspended: suspended}
}

// found forgets owner: its Workload was found.
func (m *liveMisses) found(owner types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.at, owner)
}
