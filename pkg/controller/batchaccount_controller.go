// Package controller holds batchledger's reconcilers: they observe Jobs, JobSet children,
// pods and Kueue Workloads, hand the observations to the pure account package, write
// the BatchAccount status once per reconcile and publish the verdict on Workloads.
package controller

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	"batchledger.dev/batchledger/pkg/acceptance"
	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/identity"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/all"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/relations"
)

// FieldManager is the server-side apply field manager batchledger writes under; Kueue's
// own managers keep their conditions.
const FieldManager = "batchledger"

// Reconciler keeps each BatchAccount true to the cluster.
type Reconciler struct {
	client.Client
	// APIReader reads from the API server directly: the pods of a Job outside the opt-in
	// scope (its account came after it started) are not in the cache, nor a target's Job
	// or Workload without the scope label on its metadata (resolveLive, workloadLive).
	APIReader client.Reader
	// CoveragePods, when set, is the cache of the succeeded pods of the coverage scope
	// (v1alpha1.ScopeCoverage), as metadata (relations.PodMetadata), with the
	// relations.RegisterPodIndexes indexes: all a coverage account reads of its pods, so
	// the Pending and Running updates of its pods are never sent to the controller, and
	// their specs and statuses are never decoded; it also holds the earlier pods of a Job
	// raised to the results scope after Kueue preempted it (withEarlierScope). The
	// manager's cache then holds only the pods of the results scope, which the releaser
	// follows in every phase. Unset (unit tests), coverage pods are read from Client like
	// results pods.
	CoveragePods cache.Cache
	// LatePods, when set, holds the succeeded pods of the Jobs that started before an
	// account named them, one small cache per such Job; unset, they are listed from
	// APIReader on every reconcile.
	LatePods *LatePods
	Recorder events.EventRecorder
	// Writer sends the account status, Workload condition and result chunk writes; nil
	// sends them through Client (clientWriter). The manager's never decodes an answer
	// (NewRESTWriter).
	Writer Writer
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Metrics, when set, counts the reconciler's writes.
	Metrics *Metrics
	// Criteria caches compiled acceptance rules; created on first use when nil.
	Criteria *acceptance.Cache
	// MaxConcurrentReconciles is how many accounts are reconciled side by side (0: one).
	// Each reconcile reads and writes only its own account, so workers never contend.
	MaxConcurrentReconciles int
	// WorkloadMessageInterval is how long progress waits before it is written to a
	// Workload (a count that moved); what a reader must learn at once is written at once
	// (see publish and urgent). 0 writes every change at once.
	WorkloadMessageInterval time.Duration
	// WaitingStatusDelay is how long an account status that only changes which wait the
	// account is in (waitingOnly) waits before it is written, so that the steps of a
	// batch's start share one write; coverage, verdicts and problems are written at once.
	// 0 writes every change at once.
	WaitingStatusDelay time.Duration
	// UnfoundRecheck is the least an account naming a Job that no read found waits before
	// it looks again (unfoundRecheck). 0: DefaultUnfoundRecheck.
	UnfoundRecheck time.Duration
	// APIs are the optional APIs the cluster serves (DiscoverAPIs): no watch, no read of
	// a kind not served, and its targets are observed as such (APINotServed). nil: all.
	APIs *ServedAPIs
	// Ledger decides which ShardResults chunks count (only those the manager signed) and
	// signs the chunks capture writes; nil is a Ledger with a key of this reconciler only.
	Ledger *Ledger
	// ShortFormTTL is how long a short-form account whose spec sets no
	// ttlSecondsAfterFinished is kept after its batch finished (see batchFinished); 0
	// keeps it.
	ShortFormTTL time.Duration
	// WorkerResults, on a MultiKueue manager given worker kubeconfigs, reads the results
	// the worker role recorded on worker clusters; nil reads none.
	WorkerResults WorkerResults
	// Mappings keeps the accounts' compiled mappings, one per spec, which every
	// reconcile of the spec reads (nil: each reconcile compiles its account's).
	Mappings *account.MappingCache

	deletedJobs    deletedJobs
	workloadMisses liveMisses
	criteriaOnce   sync.Once
	ledgerOnce     sync.Once
	workloadWrites progressClock
	accountWaits   progressClock
	// pendingVerdicts backs off the recheck of Workloads awaiting another account's
	// verdict.
	pendingVerdicts pendingVerdicts
}

// +kubebuilder:rbac:groups=batchledger.dev,resources=batchaccounts,verbs=list;watch;create
// +kubebuilder:rbac:groups=batchledger.dev,resources=batchaccounts/status,verbs=update
// Chunks are created with a blockOwnerDeletion owner reference to their account, which
// the OwnerReferencesPermissionEnforcement admission plugin allows only to a user who may
// update the account's finalizers.
// +kubebuilder:rbac:groups=batchledger.dev,resources=batchaccounts/finalizers,verbs=update
// +kubebuilder:rbac:groups=batchledger.dev,resources=shardresults,verbs=list;watch;create;update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;patch
// A Workload made without the scope label is labelled so that the cache holds it.
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=list;watch;patch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// CacheLagWait is how long after the later of two writes an account waits for caches
// that disagree on them (kinds.CacheLagError) before it takes them as they are. Informers
// catch up in well under a second; the rest allows for the clocks the writes were
// stamped by, and a busy API server.
const CacheLagWait = 10 * time.Second

// CacheLagRecheck is how soon an account waiting for its caches (CacheLagWait) looks
// again, if no event woke it before.
const CacheLagRecheck = time.Second

// ResultsUnreadableRecheck is how soon an account whose results could not be read (the
// signing key did not load) tries again.
const ResultsUnreadableRecheck = 30 * time.Second

// Reconcile observes the account's targets, computes the account and writes its status
// at most once; events follow only a successful write.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var ba v1alpha1.BatchAccount
	if err := r.Get(ctx, req.NamespacedName, &ba); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.accountDeleted(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Metrics.reconciled()
	if left, ok := r.expiresIn(&ba, r.now()); ok && left <= 0 {
		// Judged on the status as written: a batch that finished stays finished until its
		// spec changes, and the delete is conditional on the version read.
		return ctrl.Result{}, r.collect(ctx, &ba, "its batch finished longer ago than its TTL")
	}
	m := r.Mappings.Get(&ba)
	obs, seen, err := r.observeAccount(ctx, &ba, m)
	if lag := (*kinds.CacheLagError)(nil); errors.As(err, &lag) {
		// Nothing is written from caches that may not have caught up; a write of the
		// object they lag on wakes the account, and CacheLagRecheck bounds the wait.
		log.V(2).Info("account waits for the caches", "reason", lag.Reason)
		return ctrl.Result{RequeueAfter: CacheLagRecheck}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	results, ruleErr, err := r.captureResults(ctx, &ba, m, seen)
	var unreadable *resultsUnreadable
	var unreadableWhy string
	if errors.As(err, &unreadable) {
		// The status is written all the same: the Job ends the record finalizer waits
		// for, a verdict that needs no new result. The reconcile comes back for the
		// results.
		log.Error(err, "results can be neither recorded nor read")
		unreadableWhy = err.Error()
	} else if err != nil {
		return ctrl.Result{}, err
	}
	now := r.now()
	out := account.Compute(account.Input{
		Namespace:    ba.Namespace,
		Generation:   ba.Generation,
		Spec:         &ba.Spec,
		Mapping:      m,
		Previous:     &ba.Status,
		Observations: obs,
		Results:      results,
		RuleError:    ruleErr,
		Now:          metav1.NewTime(now),

		ResultsUnreadable: unreadableWhy,
	})
	if gone, err := r.orphanedShortForm(ctx, &ba, &out.Status); err != nil {
		return ctrl.Result{}, err
	} else if gone {
		return ctrl.Result{}, r.collect(ctx, &ba, "its short form's object is gone and it observed nothing of it")
	}
	if ba.Spec.RequiresResults() {
		out.Status.Results.IgnoredChunks = r.ledger().IgnoredChunks(ba.UID)
	}
	workloads := followedWorkloads(&ba, seen, &out.Status)
	changed := !equality.Semantic.DeepEqual(out.Status, ba.Status)
	// due is when deferred progress (of the account, of a Workload) brings it back.
	var due time.Duration
	if changed && !out.AheadOfJobs && (waitingOnly(&ba.Status, &out.Status, out.Changed) ||
		len(ba.Status.Conditions) == 0 && r.APIs.Served(APIWorkload) && aheadOfKueue(seen)) {
		due = r.accountWaits.wait(ba.UID, now, r.WaitingStatusDelay)
	}
	switch {
	case !changed:
	case out.AheadOfJobs:
		// Only attempts the Job controller is about to count changed; its status write
		// wakes the account again and this write goes with it.
		log.V(3).Info("account status waits for the Job controller to count its pods")
	case due > 0:
		log.V(3).Info("account status waits: only which wait the account is in changed", "for", due)
	default:
		prev := ba.Status.Conditions
		if v := log.V(3); v.Enabled() {
			v.Info("writing account status", "changes", statusChanges(&ba.Status, &out.Status))
		}
		ba.Status = out.Status
		if err := r.writer().UpdateAccountStatus(ctx, &ba); err != nil {
			// A conflict (a stale cache) is retried like any error: with the queue's
			// backoff, from a fresh read.
			return ctrl.Result{}, err
		}
		r.Metrics.statusWritten()
		r.Metrics.verdictWritten(prev, &ba.Status, now)
		r.accountWaits.wrote(ba.UID)
		// Events follow only the write that recorded the change: the update carries the
		// resourceVersion read, so a replica with a stale cache, or a second replica
		// after a leader change, conflicts above instead of repeating them.
		// A condition message may be 32 KiB (a long rule or claim quoted in it), a note
		// maxEventNote bytes: a longer event would be refused, and the verdict go unsaid.
		for _, e := range accountEvents(prev, out.Changed) {
			r.Recorder.Eventf(&ba, nil, e.Type, e.Reason, EventActionVerdict, "%s", clip(e.Note, maxEventNote))
		}
		// An account being deleted speaks for no Workload (workloadAccounts).
		if evs := workloadEvents(prev, out.Changed); len(evs) > 0 && ba.DeletionTimestamp == nil {
			for _, wl := range workloads {
				for _, e := range evs {
					r.Recorder.Eventf(wl, &ba, e.Type, e.Reason, EventActionVerdict, "%s", clip("BatchAccount "+ba.Name+": "+e.Note, maxEventNote))
				}
			}
		}
		log.V(2).Info("account written", "covered", out.Status.Shards.Covered, "total", out.Status.Shards.Total)
	}
	// ba.Status is now what the API server holds, written or already equal: the gauges
	// follow it even when nothing was written (e.g. after a controller restart).
	r.Metrics.accountObserved(&ba, localQueues(seen))
	if r.WorkerResults != nil && pendingOnWorker(&ba, seen) && !apimeta.IsStatusConditionTrue(ba.Status.Conditions, v1alpha1.ConditionAccepted) {
		due = soonest(due, WorkerRecheck)
	}
	if unreadableWhy != "" {
		due = soonest(due, ResultsUnreadableRecheck) // the key may load by then
	}
	// A Job created unlabelled while the scope webhook failed open sends no event.
	due = soonest(due, r.unfoundRecheck(&ba, seen, now))
	// Retention brings it back when its TTL after the batch finished has passed.
	if left, ok := r.expiresIn(&ba, now); ok {
		due = soonest(due, max(left, time.Millisecond))
	}
	// Progress deferred on any Workload brings the account back when it is due.
	wait, err := r.publishAll(ctx, workloads, &ba)
	if err != nil {
		return ctrl.Result{}, err
	}
	due = soonest(due, wait)
	if due > 0 {
		r.Metrics.wokeUp(WakeupRequeue, 1)
	}
	return ctrl.Result{RequeueAfter: due}, nil
}

// observeAccount observes every target of ba (observeTarget): the observations the
// account is computed from, and the targets' Jobs, pods and Workloads by target key. It
// stamps each Job it finds with the account's scope (stampTarget).
func (r *Reconciler) observeAccount(ctx context.Context, ba *v1alpha1.BatchAccount, m *account.Mapping) (map[string]account.Observation, map[string]observed, error) {
	obs := make(map[string]account.Observation, len(m.Targets))
	seen := make(map[string]observed, len(m.Targets))
	followed := make(map[string]kinds.Followed, len(ba.Status.Targets))
	for _, ts := range ba.Status.Targets {
		followed[ts.Name] = kinds.Followed{UID: ts.UID, RestartAttempt: ts.RestartAttempt}
	}
	for _, t := range m.Targets {
		o, err := r.observeTarget(ctx, ba.Namespace, t, followed[t.Key], ba.Spec.RequiresResults())
		if err != nil {
			return nil, nil, fmt.Errorf("observing %s: %w", t.Key, err)
		}
		if err := r.observeWorker(ctx, ba, t, &o); err != nil {
			return nil, nil, fmt.Errorf("observing %s: %w", t.Key, err)
		}
		seen[t.Key] = o
		obs[t.Key] = o.obs
		r.stampTarget(ctx, ba, t.Ref, o.job)
	}
	return obs, seen, nil
}

// followedWorkloads are the Workloads of the observed targets (seen) that the account ba
// speaks for, with the status st just computed: not the Workload of a Job the account
// does not follow, which runs another batch (a Job of a target's name after an Accepted
// verdict, account.Final; one made under a child's name after its JobSet was gone). A
// Workload observed without a Job (a dispatched child's owner's) stays, unless the
// account is Accepted and its record names another (account.Follows): an owner created
// again under the name and dispatched runs another batch under it.
func followedWorkloads(ba *v1alpha1.BatchAccount, seen map[string]observed, st *v1alpha1.BatchAccountStatus) map[types.UID]*kueue.Workload {
	uids := make(map[string]types.UID, len(st.Targets))
	for _, t := range st.Targets {
		uids[t.Name] = t.UID
	}
	computed := &v1alpha1.BatchAccount{ObjectMeta: ba.ObjectMeta, Spec: ba.Spec, Status: *st}
	out := map[types.UID]*kueue.Workload{}
	for key, o := range seen {
		if o.workload == nil || o.job != nil && o.job.UID != uids[key] ||
			!account.Follows(computed, account.RunRef{WorkloadUID: o.workload.UID, WorkloadName: o.workload.Name}) {
			continue
		}
		out[o.workload.UID] = o.workload
	}
	return out
}

// localQueues are the Kueue LocalQueues of the observed targets: their Workloads'
// queueName, else their Jobs' kueue.x-k8s.io/queue-name label.
func localQueues(seen map[string]observed) []string {
	var out []string
	for _, o := range seen {
		job := o.job
		if job == nil {
			job = o.deletedJob
		}
		switch {
		case o.workload != nil && o.workload.Spec.QueueName != "":
			out = append(out, string(o.workload.Spec.QueueName))
		case job != nil && job.Labels[kueueconstants.QueueLabel] != "":
			out = append(out, job.Labels[kueueconstants.QueueLabel])
		}
	}
	return out
}

// soonest is the earlier of two requeue delays, 0 meaning none.
func soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

func (r *Reconciler) writer() Writer {
	if r.Writer != nil {
		return r.Writer
	}
	return clientWriter{r.Client}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// AccountControllerName names the account reconciler's controller, its workqueue and
// their metrics (the "controller" and "name" labels of controller-runtime's).
const AccountControllerName = "batchaccount"

// SetupWithManager registers the reconciler and its watches, and the cleanup of our
// Workload conditions that no account speaks for any more (workloadCleanup). Jobs, pods
// and Workloads wake only the accounts that name them, through field indexes; there is
// no periodic resync of all accounts. Only changes of what an account reads pass the
// predicates (jobChanged, workloadChanged), and every change is batched (BatchPeriod; a
// pod's success PodBatchPeriod; a Job or Workload update that only leads up to a change
// LeadUpPeriod) so that a burst of pod completions, or a Job's completion followed by its
// Workload's, costs one computation and at most one status write.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr)
	if r.CoveragePods != nil {
		b = b.WatchesRawSource(source.Kind[client.Object](r.CoveragePods, relations.PodMetadata(), batched(PodBatchPeriod, r.counted("Pod", r.podToAccounts)), succeededPodArrived))
	}
	if r.LatePods != nil {
		b = b.WatchesRawSource(source.Channel(r.LatePods.Events(), batched(PodBatchPeriod, r.counted("LatePod", r.podToAccounts))))
	}
	if r.WorkerResults != nil {
		b = b.WatchesRawSource(source.Channel(r.WorkerResults.Events(), batched(PodBatchPeriod, r.counted("WorkerResult", r.workerResultToAccounts))))
	}
	if r.APIs.ServedObject(&kueue.Workload{}, mgr.GetScheme()) {
		if err := r.setupWorkloadCleanup(mgr); err != nil {
			return err
		}
	}
	// The watches of optional APIs, each only when the cluster serves it (r.APIs): the
	// informer of a kind not served never syncs, and the manager would stop.
	for _, w := range []struct {
		obj     client.Object
		handler handler.EventHandler
		pred    predicate.Predicate
	}{
		{&kueue.Workload{}, coalesced(BatchPeriod, workloadUpdateDelay, r.counted("Workload", r.workloadToAccounts)), workloadChanged},
	} {
		if r.APIs.ServedObject(w.obj, mgr.GetScheme()) {
			b = b.Watches(w.obj, w.handler, builder.WithPredicates(w.pred))
		}
	}
	for _, k := range all.Kinds {
		if o, ok := k.(kinds.Owner); ok && r.APIs.ServedObject(k.NewObject(), mgr.GetScheme()) {
			b = b.Watches(k.NewObject(), batched(BatchPeriod, r.counted(k.Name(), r.ownerToAccounts(k))), builder.WithPredicates(ownerEnding(o)))
		}
	}
	return b.
		// An account is mostly created just before its Jobs (one kubectl apply): batched
		// too, its first status already finds them and their Workloads.
		Watches(&v1alpha1.BatchAccount{}, r.accountChanges(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&batchv1.Job{}, r.jobEvents(), builder.WithPredicates(jobChanged)).
		Watches(&corev1.Pod{}, batched(PodBatchPeriod, r.counted("Pod", r.podToAccounts)), builder.WithPredicates(podSucceeded)).
		Named(AccountControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}

// jobChanged passes creation, deletion and changes of what the accounts naming the Job
// read (jobReadChanged), and of the labels and controller that make a JobSet child. The
// Job controller writes a Job's status several times per pod (active, ready,
// terminating, as pods start and stop); only the writes that move what an account reads
// wake its accounts.
var jobChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*batchv1.Job), e.ObjectNew.(*batchv1.Job)
		return jobReadChanged(o, n) || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
			!equality.Semantic.DeepEqual(o.Labels, n.Labels) || o.Generation != n.Generation ||
			!ownersEqual(o.OwnerReferences, n.OwnerReferences)
	},
}

// jobReadChanged reports whether the status of a Job changed in what a reconcile reads
// of it: its facts (jobkind.Facts: completed and failed indexes, succeeded count, the
// True conditions), the successes the Job controller has yet to count (the account
// waits for them, account.Output.AheadOfJobs), and its start time (a suspended Job
// never started may still have its pod template stamped, stampTarget). Its counts of
// active, ready and terminating pods, its failed count and its completion time are not
// read.
func jobReadChanged(o, n *batchv1.Job) bool {
	was, now := jobkind.Facts(o), jobkind.Facts(n)
	was.ResourceVersion, now.ResourceVersion = "", ""
	return !equality.Semantic.DeepEqual(was, now) ||
		!equality.Semantic.DeepEqual(o.Status.UncountedTerminatedPods, n.Status.UncountedTerminatedPods) ||
		!o.Status.StartTime.Equal(n.Status.StartTime)
}

// jobUpdateDelay is how long a Job update that passed jobChanged waits before it wakes
// its accounts: LeadUpPeriod when it only leads up to a change an account writes
// (jobLeadUp), else BatchPeriod.
func jobUpdateDelay(e event.UpdateEvent) time.Duration { return updateDelay(e, jobLeadUp) }

// updateDelay is LeadUpPeriod when both sides of e are Ts and leadUp says the update
// only leads up to a write, else BatchPeriod.
func updateDelay[T client.Object](e event.UpdateEvent, leadUp func(o, n T) bool) time.Duration {
	o, ok1 := e.ObjectOld.(T)
	n, ok2 := e.ObjectNew.(T)
	if ok1 && ok2 && leadUp(o, n) {
		return LeadUpPeriod
	}
	return BatchPeriod
}

// jobLeadUp reports whether a Job update changed nothing an account writes at once:
// not its completed or failed indexes, its succeeded count, a condition that ends it
// (jobEnding), its deletion, labels or owners, nor the spec an account reads (in
// jobkind.Facts). What is left leads up to such a change: the Job admitted and
// unsuspended, its Suspended condition cleared, its start time set, successes the Job
// controller has yet to count (the account waits for the count,
// account.Output.AheadOfJobs). Those arrive within a second or so of each other and of
// the count that follows, and go in one reconcile with it.
func jobLeadUp(o, n *batchv1.Job) bool {
	was, now := jobkind.Facts(o), jobkind.Facts(n)
	was.ResourceVersion, now.ResourceVersion = "", ""
	// Its start leads up to its first indexes; the reconcile it wakes records it.
	was.StartTime, now.StartTime = nil, nil
	was.Conditions, now.Conditions = jobEnding(was.Conditions), jobEnding(now.Conditions)
	return equality.Semantic.DeepEqual(was, now) && o.DeletionTimestamp.Equal(n.DeletionTimestamp) &&
		equality.Semantic.DeepEqual(o.Labels, n.Labels) && ownersEqual(o.OwnerReferences, n.OwnerReferences)
}

// jobEnding are the conditions among a Job's True ones (jobkind.Facts) that end it or
// say it is ending: Complete, Failed, SuccessCriteriaMet, FailureTarget.
func jobEnding(conds []identity.Condition) []identity.Condition {
	var out []identity.Condition
	for _, c := range conds {
		switch batchv1.JobConditionType(c.Type) {
		case batchv1.JobComplete, batchv1.JobFailed, batchv1.JobSuccessCriteriaMet, batchv1.JobFailureTarget:
			out = append(out, c)
		}
	}
	return out
}

// ownerEnding passes an owner's (a JobSet's, a TrainJob's) deletion, its deletion
// starting and its terminal condition appearing: then its children gone before they
// terminated stop being a restart in progress (account.Observation.OwnerEnded). JobSet
// may delete them before it writes the condition, and nothing else would wake their
// accounts again.
func ownerEnding(kind kinds.Owner) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return (o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil) || kind.Terminal(o) != kind.Terminal(n)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// workloadChanged passes creation, deletion, spec and owner changes, and the status
// changes that move what an account reads of the Workload (workloadObservation: its
// admission, eviction, finish and MultiKueue cluster). Kueue's other status writes
// (quota reservation alone, requeue state, resource requests, admission checks) and the
// batchledger conditions this reconciler writes itself would each cost one more
// computation of every account of the Workload for nothing.
var workloadChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*kueue.Workload), e.ObjectNew.(*kueue.Workload)
		if o.Generation != n.Generation || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
			!equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) {
			return true
		}
		was, now := workloadObservation(o), workloadObservation(n)
		was.ObservedResourceVersion, now.ObservedResourceVersion = "", ""
		if !equality.Semantic.DeepEqual(was, now) {
			return true
		}
		// Only our conditions changed, if anything. On a Workload several accounts name,
		// each account publishes the verdicts of all of them, reading the others from the
		// cache: the last publish may rest on a copy of another account that was about to
		// change, or that the cache did not show naming the Workload (so a message of
		// several accounts became one account's), and nothing else would wake them again.
		// So that echo wakes them once more; publish writes nothing once the conditions
		// are right, which ends it.
		oursWas, _ := splitConditions(o.Status.Conditions)
		oursNow, _ := splitConditions(n.Status.Conditions)
		return (sharedByAccounts(oursNow) || sharedByAccounts(oursWas)) && !equality.Semantic.DeepEqual(oursWas, oursNow)
	},
}

// workloadUpdateDelay is how long a Workload update that passed workloadChanged waits
// before it wakes its accounts: LeadUpPeriod when it only admits the Workload or
// changes its admission (workloadLeadUp), else BatchPeriod.
func workloadUpdateDelay(e event.UpdateEvent) time.Duration {
	return updateDelay(e, workloadLeadUp)
}

// workloadLeadUp reports whether a Workload update changed, of what an account reads,
// only its admission (Admitted, the ClusterQueue, the flavors): a step on the way that
// the account writes only with its next change or after WaitingStatusDelay (waitingOnly),
// while the Job's unsuspension and start follow. Eviction, finish, the MultiKueue
// cluster, our shared conditions and spec, owner and deletion changes do not wait.
func workloadLeadUp(o, n *kueue.Workload) bool {
	if o.Generation != n.Generation || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
		!equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) {
		return false
	}
	was, now := workloadObservation(o), workloadObservation(n)
	was.ObservedResourceVersion, now.ObservedResourceVersion = "", ""
	if equality.Semantic.DeepEqual(was, now) {
		return false // our shared conditions' echo (workloadChanged)
	}
	was.Admitted, was.ClusterQueue, was.Flavors = now.Admitted, now.ClusterQueue, now.Flavors
	return equality.Semantic.DeepEqual(was, now)
}

// sharedByAccounts reports whether our conditions speak for several accounts (their
// message starts "N accounts; ", see desiredWorkloadConditions).
func sharedByAccounts(ours []metav1.Condition) bool {
	for _, c := range ours {
		if multiAccountMessage.MatchString(c.Message) {
			return true
		}
	}
	return false
}

// multiAccountMessage matches the message of a Workload condition aggregating accounts.
var multiAccountMessage = regexp.MustCompile(`^[0-9]+ accounts; `)

// splitConditions separates the conditions batchledger writes (v1alpha1.IsWorkloadCondition)
// from everyone else's, each in its order.
func splitConditions(conds []metav1.Condition) (ours, others []metav1.Condition) {
	for _, c := range conds {
		if v1alpha1.IsWorkloadCondition(c.Type) {
			ours = append(ours, c)
		} else {
			others = append(others, c)
		}
	}
	return ours, others
}

// succeededPodArrived is podSucceeded for the cache of succeeded pods' metadata: a pod
// enters it when it succeeds (a create event) and leaves it when deleted; its later
// updates (the Job controller removing its finalizer) change nothing an account reads.
var succeededPodArrived = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return relations.HasCompletionIndex(e.Object.GetAnnotations()) },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	DeleteFunc:  func(e event.DeleteEvent) bool { return relations.HasCompletionIndex(e.Object.GetAnnotations()) },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// podSucceeded passes pods of Indexed Jobs whose phase became Succeeded, and deletions;
// other pod churn (scheduling, readiness) never wakes an account.
var podSucceeded = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return relations.IsSucceededIndexPod(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !relations.IsSucceededIndexPod(e.ObjectOld) && relations.IsSucceededIndexPod(e.ObjectNew)
	},
	DeleteFunc:  func(e event.DeleteEvent) bool { return relations.IsSucceededIndexPod(e.Object) },
	GenericFunc: func(event.GenericEvent) bool { return false },
}
