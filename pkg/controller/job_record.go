package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/release"
)

// DefaultMaxRecordHold is how long a Job being deleted is held for its accounts' records
// at most, counted from its deletion or, when later, the recorder's start on the current
// leader. Past it the Job is released unrecorded (with a Warning event and a metric), so
// that an account whose reconcile keeps failing never keeps a Job, nor a JobSet restart
// waiting for the child of that name to be gone (with BlockingRecreate, for every child
// of the previous attempt), Terminating for good. It outlasts a
// manager restart or a leader change by far; a JobSet restart waits for it only while the
// ledger cannot record.
const DefaultMaxRecordHold = time.Hour

// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=list;watch;patch
// +kubebuilder:rbac:groups=batchledger.dev,resources=batchaccounts,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// JobRecorder keeps v1alpha1.RecordFinalizer on the Jobs live accounts name until every
// one of them has recorded the Job's end, so that a Job deleted while no manager leads
// (its TTL the moment it finished, a JobSet restart, a cleanup) is still readable,
// Terminating with its final status, when one leads again: the account observes it like
// any Job (a JobSet child being deleted through jobset.CurrentChild) and records its end, and only
// then does the Job go.
//
// Two controllers share it. job-record-hold (Hold) adds the finalizer to a named Job that
// lacks it (the Job webhook missed it, the Job came before its account, or before this
// version), when the Job first appears in the cache or an account comes to name it; never
// in answer to the finalizer's removal, so that `batchledger release` (the uninstall
// hook) is not undone behind its back. job-record (Reconcile) removes it as soon as
// holding the Job serves no purpose: every live account naming it records its end
// (recordsEnd), no live account names it, or MaxHold passed since its deletion started
// or, when later, since the recorder started (holdLeft).
type JobRecorder struct {
	client.Client
	Recorder events.EventRecorder
	// Metrics, when set, counts holds and releases.
	Metrics *JobRecordMetrics
	// MaxHold bounds how long a Job being deleted is held, from its deletion or the
	// recorder's start, whichever is later (0: DefaultMaxRecordHold).
	MaxHold time.Duration
	// ShortFormTTL is the short-form accounts' retention (ShortFormReconciler.TTL): a
	// Job of a batch that ended longer ago waits for no short-form account.
	ShortFormTTL time.Duration
	// APIs are the optional APIs the cluster serves (nil: all). An account does not
	// observe a target whose kind is not served (observeTarget), so that target holds no
	// Job.
	APIs *ServedAPIs
	// APIReader reads a held Job that left the cache (nil: none is read): one whose
	// scope label was taken off, which nothing would otherwise ever release. It also
	// reads the pods of a Job deleted before it terminated (relations.TrackedPods): no
	// cache holds the running pods of the coverage scope, and a cache may lag the count.
	APIReader client.Reader
	// CoveragePods, when set, is the cache of the coverage scope's succeeded pods
	// (Reconciler.CoveragePods): a scoped Job's coverage-scope successes the Job
	// controller has yet to count are read there without an APIReader
	// (uncountedSuccessInCaches), the manager's cache
	// holding only the results scope's pods; a Job raised to the results scope after
	// Kueue preempted it may still have pods of the coverage scope (stampScope).
	CoveragePods client.Reader
	// LatePods, when set, reads the succeeded pods of a Job whose template carries no scope
	// label (Reconciler.LatePods' SucceededPods: it started before an account named it),
	// which neither the manager's cache nor CoveragePods holds: without an APIReader,
	// uncountedSuccessInCaches reads there the successes the Job controller has yet to
	// count.
	LatePods func(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error)
	// Now is the clock; tests may replace it.
	Now func() time.Time

	// started is when the recorder first ran (on the leader only): accounts a short form
	// declares are waited for ShortFormWait from then at least.
	started   time.Time
	startOnce sync.Once
}

// Hold adds the record finalizer to a Job that a live account names and whose end is
// not recorded yet by all of them. A Job being deleted can be given no new finalizer.
func (r *JobRecorder) Hold(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var job batchv1.Job
	if err := r.Get(ctx, req.NamespacedName, &job); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if recordHeld(&job) || job.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	pending, _, err := r.pendingAccounts(ctx, &job)
	if err != nil || len(pending) == 0 {
		return ctrl.Result{}, err
	}
	// A strategic merge patch of a list merged by value: our finalizer is added to
	// whatever the list holds by then, never replacing another's, never twice. The UID
	// makes it fail on a new Job of the same name.
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"finalizers":[%q]}}`, job.UID, v1alpha1.RecordFinalizer)
	if err := r.Patch(ctx, &job, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Metrics.held()
	return ctrl.Result{}, nil
}

// Reconcile releases a held Job once holding it serves no purpose, and a Job being
// deleted at the latest MaxHold after its deletion started or, when later, after the
// recorder started (holdLeft).
func (r *JobRecorder) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var job batchv1.Job
	if err := r.Get(ctx, req.NamespacedName, &job); apierrors.IsNotFound(err) {
		return r.releaseOutOfScope(ctx, req.NamespacedName)
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if !recordHeld(&job) {
		return ctrl.Result{}, nil
	}
	pending, recheck, err := r.pendingAccounts(ctx, &job)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(pending) > 0 {
		if job.DeletionTimestamp == nil {
			return ctrl.Result{}, nil // its end, or its deletion, wakes us again
		}
		if left := r.holdLeft(&job); left > 0 {
			return ctrl.Result{RequeueAfter: soonest(left, recheck)}, nil
		}
		if r.Recorder != nil {
			// Many accounts' names would make a note the API server refuses.
			r.Recorder.Eventf(&job, nil, corev1.EventTypeWarning, v1alpha1.EventReasonRecordNotWritten, "Release", "%s",
				clip(fmt.Sprintf("released %s after its deletion started, for accounts that never recorded its end (see their status and the controller's log): %v", r.maxHold(), pending), maxEventNote))
		}
		r.Metrics.holdExpired()
	}
	_, err = r.releaseRecord(ctx, &job)
	return ctrl.Result{}, err
}

// maxHold is MaxHold, or DefaultMaxRecordHold when unset.
func (r *JobRecorder) maxHold() time.Duration { return cmp.Or(r.MaxHold, DefaultMaxRecordHold) }

// holdLeft is how much longer job, being deleted, may be held (0 or less: none): MaxHold
// from the later of its deletion and the recorder's start (pendingAccounts sets it). A
// Job deleted while no manager led is what the hold is for, so a leader back after an
// outage longer than MaxHold gives its accounts MaxHold to record the Job's end rather
// than racing them to release it.
func (r *JobRecorder) holdLeft(job *batchv1.Job) time.Duration {
	from := job.DeletionTimestamp.Time
	if r.started.After(from) {
		from = r.started
	}
	return r.maxHold() - r.now().Sub(from)
}

// releaseRecord removes the record finalizer from job, reporting whether it did (false
// for a Job that carries none, or is gone). A rejected test (the finalizers changed since
// the copy read: the garbage collector's foregroundDeletion leaving) returns the error:
// the retry reads again. A Job deleted before it terminated is released only as read
// (unchangedSince): the copy may predate the Job controller's last count, written before
// it took the tracking finalizers off that countingSuccess found gone.
func (r *JobRecorder) releaseRecord(ctx context.Context, job *batchv1.Job) (bool, error) {
	patch, ok := release.RemovalPatch(job, v1alpha1.RecordFinalizer)
	if !ok {
		return false, nil
	}
	if job.DeletionTimestamp != nil && jobTerminal(job) == "" {
		var err error
		if patch, err = unchangedSince(patch, job); err != nil {
			return false, err
		}
	}
	if err := r.Patch(ctx, job, patch); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	r.Metrics.released()
	return true, nil
}

// unchangedSince is the JSON patch p of obj, applied only while obj's resourceVersion is
// still the one read: a test of it comes first.
func unchangedSince(p client.Patch, obj client.Object) (client.Patch, error) {
	data, err := p.Data(obj)
	if err != nil {
		return nil, err
	}
	var ops []map[string]any
	if err := json.Unmarshal(data, &ops); err != nil {
		return nil, err
	}
	ops = append([]map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": obj.GetResourceVersion()}}, ops...)
	if data, err = json.Marshal(ops); err != nil {
		return nil, err
	}
	return client.RawPatch(types.JSONPatchType, data), nil
}

// releaseOutOfScope looks at the Job key names when it left the cache still held: its
// scope label was taken off (the cache holds only labelled Jobs), so no change of it
// would reach the recorder again, and deleted, it would stay Terminating for good. While
// live accounts naming it have not recorded its end, its label is put back (the
// coverage scope: an account requiring results raises it), so that it comes back into
// sight and is released as any Job; otherwise it is released now. A Job really gone, or
// still labelled (the cache lags), is left alone.
func (r *JobRecorder) releaseOutOfScope(ctx context.Context, key client.ObjectKey) (ctrl.Result, error) {
	if r.APIReader == nil {
		return ctrl.Result{}, nil
	}
	var job batchv1.Job
	if err := r.APIReader.Get(ctx, key, &job); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if _, scoped := job.Labels[v1alpha1.LabelScope]; scoped || !recordHeld(&job) {
		return ctrl.Result{}, nil
	}
	pending, recheck, err := r.pendingAccounts(ctx, &job)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(pending) > 0 {
		if job.DeletionTimestamp == nil {
			return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, &job, scopePatch(v1alpha1.ScopeCoverage, "")))
		}
		// Being deleted: MaxHold bounds the hold whether or not the Job comes back into
		// the cache (a relabel refused, or the label taken off again).
		if left := r.holdLeft(&job); left > 0 {
			if err := r.Patch(ctx, &job, scopePatch(v1alpha1.ScopeCoverage, "")); err != nil && !apierrors.IsNotFound(err) {
				ctrl.LoggerFrom(ctx).Error(err, "labelling a held Job out of scope again")
			}
			return ctrl.Result{RequeueAfter: soonest(left, recheck)}, nil
		}
		r.Metrics.holdExpired()
	}
	released, err := r.releaseRecord(ctx, &job)
	if released && r.Recorder != nil {
		r.Recorder.Eventf(&job, nil, corev1.EventTypeWarning, v1alpha1.EventReasonRecordNotWritten, "Release",
			"released: its %s label was taken off, and no account naming it recorded its end in time", v1alpha1.LabelScope)
	}
	return ctrl.Result{}, err
}

// pendingAccounts are the names of the live accounts naming job that have not recorded
// its end (recordsEnd), and of those a short form declares for it that are still to
// come (relations.ShortFormPending; none in a namespace being deleted), with how soon
// the first of these stops being waited for, or the Job's pods are to be read again
// (countingSuccess; 0: neither). For a Job being deleted, an account counts only if
// it observes the Job (observes): holding a Job for a record never written serves no
// one.
func (r *JobRecorder) pendingAccounts(ctx context.Context, job *batchv1.Job) ([]string, time.Duration, error) {
	accounts, err := relations.LiveAccountsNaming(ctx, r.Client, job.Namespace, relations.JobKeys(job)...)
	if err != nil {
		return nil, 0, err
	}
	counting, countRecheck, err := r.countingSuccess(ctx, job)
	if err != nil {
		return nil, 0, err
	}
	var pending []string
	for _, ba := range accounts {
		refs := r.observedBy(ba, job)
		if len(refs) == 0 || !counting && recordsEnd(&ba.Status, job) {
			continue
		}
		if !account.Follows(ba, account.RunRef{Job: job.UID}) {
			// An Accepted account follows none but the identities on its record: a Job
			// of a target's name since (re-run, or its JobSet applied again) is another
			// batch's, whose end it never records.
			continue
		}
		if job.DeletionTimestamp != nil {
			ok, err := r.observes(ctx, ba, job, refs)
			if err != nil {
				return nil, 0, err
			}
			if !ok {
				continue
			}
		}
		pending = append(pending, ba.Name)
	}
	r.startOnce.Do(func() {
		if r.started.IsZero() {
			r.started = r.now()
		}
	})
	// No account can be created in a namespace being deleted (the API server refuses it):
	// one a short form declares is not coming, and waiting ShortFormWait for it would
	// keep the namespace.
	if nsDeleted, err := NamespaceDeleted(ctx, r.Client, job.Namespace); err != nil || nsDeleted != nil {
		return pending, countRecheck, err
	}
	declared, recheck, err := relations.ShortFormPending(ctx, r.Client, job.Namespace, relations.JobTargets(job), r.ShortFormTTL, r.now(), r.started)
	if err != nil {
		return nil, 0, err
	}
	return append(pending, declared...), soonest(recheck, countRecheck), nil
}

// observedBy are the targets of ba's assignments that name job (relations.NamesJob) in
// ba's namespace, each once, of a kind ba observes: a child target only while its kind's
// API is served (observeTarget observes nothing else of it).
func (r *JobRecorder) observedBy(ba *v1alpha1.BatchAccount, job *batchv1.Job) []v1alpha1.TargetRef {
	if ba.Namespace != job.Namespace {
		return nil
	}
	var out []v1alpha1.TargetRef
	for _, a := range ba.Spec.AllAssignments() {
		if a.Target.Namespace != "" && a.Target.Namespace != ba.Namespace || !relations.NamesJob(a.Target, job) {
			continue
		}
		if _, unserved := unservedAPI(r.APIs, a.Target); unserved {
			continue
		}
		if !slices.ContainsFunc(out, func(t v1alpha1.TargetRef) bool { return t.Key() == a.Target.Key() }) {
			out = append(out, a.Target)
		}
	}
	return out
}

// observes reports whether ba observes job, being deleted, so that it records its end: ba
// followed it already (its UID is in ba's targets or history) and its owner was not
// replaced since (relations.OwnerReplaced), or one of refs, the
// targets naming it (observedBy), resolves to it now as the reconciler resolves it for
// ba, told the identity ba follows (relations.ResolveFollowed: a Job target by name; a
// child target only to a child its JobSet created, while no live child is left, and
// about the JobSet's end only to a later child than the one followed). A Job left by an
// earlier JobSet of the name, or made by a namespace editor with a child's name after
// the JobSet ended, is followed by no target. While the caches lag (a
// kinds.CacheLagError, which the reconciler waits out CacheLagWait), ba may yet follow it.
func (r *JobRecorder) observes(ctx context.Context, ba *v1alpha1.BatchAccount, job *batchv1.Job, refs []v1alpha1.TargetRef) (bool, error) {
	if account.OnRecord(&ba.Status, job.UID) {
		// Unless its owner was deleted and created again since: ba follows the new owner's
		// children only and never records this one (a JobSet applied again at once), and
		// held, it would keep the new owner from creating the child of its name.
		replaced, err := relations.OwnerReplaced(ctx, r.Client, job)
		if err != nil {
			return false, err
		}
		if !replaced {
			return true, nil
		}
	}
	for _, ref := range refs {
		if !ref.IsChild() {
			return true, nil
		}
		followed, _, err := relations.ResolveFollowed(ctx, r.Client, job.Namespace, ref, followedFor(&ba.Status, ref))
		if lag := (*kinds.CacheLagError)(nil); errors.As(err, &lag) {
			if r.now().Before(lag.Since.Add(CacheLagWait)) {
				return true, nil
			}
			followed, err = lag.Job, nil
		}
		if err != nil {
			return false, err
		}
		if followed != nil && followed.UID == job.UID {
			return true, nil
		}
	}
	return false, nil
}

// followedFor is the identity st follows for the target ref (the zero value: none), as
// the reconciler reads it from the account's targets.
func followedFor(st *v1alpha1.BatchAccountStatus, ref v1alpha1.TargetRef) kinds.Followed {
	key := string(ref.Key())
	for _, ts := range st.Targets {
		if ts.Name == key {
			return kinds.Followed{UID: ts.UID, RestartAttempt: ts.RestartAttempt}
		}
	}
	return kinds.Followed{}
}

// recordsEnd reports whether the account status st records job's end: an entry of its
// targets or history for job's UID with the Job's terminal condition and completed
// indexes. A Job that has not terminated ends when it is deleted: once its deletion
// started and the Job controller counted its last pods, what it completed is final. A
// Job still running has no end to record.
func recordsEnd(st *v1alpha1.BatchAccountStatus, job *batchv1.Job) bool {
	terminal := jobTerminal(job)
	if terminal == "" && job.DeletionTimestamp == nil {
		return false
	}
	if u := job.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded) > 0 {
		return false // a success the Job controller is about to count
	}
	completions := 0
	if job.Spec.Completions != nil {
		completions = int(*job.Spec.Completions)
	}
	matches := func(uid types.UID, term, indexes string, omitted bool, recorded int32) bool {
		if uid != job.UID || term != terminal {
			return false
		}
		if omitted {
			return true // left out for size: the entry stands for the Job's own list
		}
		n := completions
		if term != "" && recorded > 0 {
			// An end is recorded at the size the Job ended at (account.atTerminalSize):
			// its completions may change since, which the Job controller ignores.
			n = int(recorded)
		}
		completed, _ := indexset.ParseJobStatus(job.Status.CompletedIndexes, n)
		have, err := indexset.Parse(indexes)
		return err == nil && have.Equal(completed)
	}
	for _, t := range st.Targets {
		if matches(t.UID, t.Terminal, t.CompletedIndexes, t.CompletedIndexesOmitted, t.Completions) {
			return true
		}
	}
	for _, h := range st.History {
		if matches(h.UID, h.Terminal, h.CompletedIndexes, h.CompletedIndexesOmitted, h.Completions) {
			return true
		}
	}
	return false
}

// countingSuccess reports whether the Job controller may still count a success of job,
// deleted before it terminated, and how soon to look again (0: on the Job's next change).
// The Job controller counts a pod of a Job being deleted while it exists, but only one
// that carries its tracking finalizer, and the first sync that sees the deletion takes
// that finalizer off every pod of the Job, running or not (canRemoveFinalizer), after
// writing the successes among them to completedIndexes. Once no pod the Job controls
// carries it, completedIndexes is final: a pod succeeding later is never counted,
// held Job or not. Released before, the Job could be gone before that sync, and the
// index of a pod that succeeded a moment earlier lost to its record, whatever a pod cache
// showed of the pod (still running, or nothing: the coverage scope's cache holds only
// succeeded pods). Running pods keep nothing held for long: the finalizer comes off
// without their end, under background deletion too.
//
// With an APIReader, and for a Job the Job controller manages, the pods are read from
// the API server (relations.TrackedPods). Without one, only the successes a cache shows
// are waited for (uncountedSuccessInCaches).
func (r *JobRecorder) countingSuccess(ctx context.Context, job *batchv1.Job) (bool, time.Duration, error) {
	if job.DeletionTimestamp == nil || jobTerminal(job) != "" {
		return false, 0, nil // running: nothing ends yet; terminated: the Job controller counts no more
	}
	if r.APIReader != nil && relations.CountedByJobController(job) {
		if tracked, recheck := relations.StillTracked(ctx, r.APIReader, job, r.now()); tracked {
			return true, recheck, nil
		}
		// A non-indexed success not yet in the counters: their write wakes the recorder.
		return UncountedSuccess(job, nil), 0, nil
	}
	counting, err := r.uncountedSuccessInCaches(ctx, job)
	return counting, 0, err
}

// uncountedSuccessInCaches reports whether an index pod of job a cache holds (the
// manager's, of the results scope, CoveragePods, of the coverage scope, or LatePods, of
// a Job without a scope) Succeeded with the Job controller's tracking finalizer still
// on, its index not in completedIndexes, the Job still its controller (UncountedSuccess).
// An indexed Job's success goes straight into completedIndexes, never through
// uncountedTerminatedPods. It misses a success the caches do not show yet.
func (r *JobRecorder) uncountedSuccessInCaches(ctx context.Context, job *batchv1.Job) (bool, error) {
	ofJob := client.MatchingFields{relations.IndexOwnerUID: string(job.UID)}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(job.Namespace), ofJob, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	// Not only a coverage-scope Job's: one Kueue preempted may have its template raised to
	// the results scope while its pods of the coverage scope still end (stampScope).
	if r.CoveragePods != nil && job.Spec.Template.Labels[v1alpha1.LabelScope] != "" {
		list := relations.PodMetadataList()
		if err := r.CoveragePods.List(ctx, list, client.InNamespace(job.Namespace), ofJob, client.UnsafeDisableDeepCopy); err != nil {
			return false, err
		}
		pods.Items = append(pods.Items, relations.SucceededPods(list.Items)...)
	}
	// A Job started before its account named it: its pods carry no scope label, and
	// neither cache holds them. A dispatched Job's pods run on a worker cluster.
	if r.LatePods != nil && job.Spec.Template.Labels[v1alpha1.LabelScope] == "" && !multikueue.Dispatched(job) {
		late, err := r.LatePods(ctx, job)
		if err != nil {
			return false, err
		}
		pods.Items = append(slices.Clip(pods.Items), late...)
	}
	return UncountedSuccess(job, pods.Items), nil
}

// UncountedSuccess reports whether pods (those of job the caller could read) hold a
// success the Job controller has yet to count: a non-indexed success in
// uncountedTerminatedPods, or an index pod job controls that Succeeded with the Job
// controller's tracking finalizer still on and its index not in completedIndexes. The
// manager's and the worker role's Job recorders hold a Job being deleted while it does.
func UncountedSuccess(job *batchv1.Job, pods []corev1.Pod) bool {
	if u := job.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded) > 0 {
		return true
	}
	completions := 0
	if job.Spec.Completions != nil {
		completions = int(*job.Spec.Completions)
	}
	completed, _ := indexset.ParseJobStatus(job.Status.CompletedIndexes, completions)
	for i := range pods {
		p := &pods[i]
		if !slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
			continue
		}
		if owner := relations.ControllingJob(p); owner == nil || owner.UID != job.UID {
			// Orphaned (a deletion with propagationPolicy Orphan): a Job being deleted
			// adopts no pod, and the Job controller takes an orphan's tracking finalizer
			// off without counting it, nor writing the Job, so nothing would wake us.
			continue
		}
		if idx, ok := relations.SucceededIndexOf(p, job); ok && idx < completions && !completed.Contains(idx) {
			return true
		}
	}
	return false
}

// jobTerminal is the Job's terminal condition type that is True (Complete, Failed), or "".
func jobTerminal(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return string(c.Type)
		}
	}
	return ""
}

// recordHeld reports whether a Job carries the record finalizer.
func recordHeld(o client.Object) bool {
	return slices.Contains(o.GetFinalizers(), v1alpha1.RecordFinalizer)
}

func (r *JobRecorder) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// The names of the two controllers (and of their workqueues and metrics).
const (
	JobRecordHoldControllerName = "job-record-hold"
	JobRecordControllerName     = "job-record"
)

// SetupWithManager registers job-record-hold (Hold: a Job's creation, an account's
// creation or spec change) and job-record (Reconcile: held Jobs' deletion, end and
// finalizer changes; account records, spec changes and deletions; the start of a
// namespace's deletion).
func (r *JobRecorder) SetupWithManager(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		For(&batchv1.Job{}, builder.WithPredicates(jobAppeared)).
		Watches(&v1alpha1.BatchAccount{}, r.accountNamesJobs()).
		Named(JobRecordHoldControllerName).
		Complete(reconcile.Func(r.Hold))
	if err != nil {
		return err
	}
	// The Jobs whose label was taken off while no manager led: no event brings them.
	outOfScope := make(chan event.GenericEvent)
	if r.APIReader != nil {
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return r.sweepOutOfScope(ctx, outOfScope) })); err != nil {
			return err
		}
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&batchv1.Job{}, builder.WithPredicates(heldJobChanged)).
		Watches(&v1alpha1.BatchAccount{}, r.accountRecordsJobs()).
		WatchesRawSource(source.Channel(outOfScope, &handler.EnqueueRequestForObject{}))
	return WatchNamespaceDeletions(b, r.heldJobsOfNamespace).Named(JobRecordControllerName).Complete(r)
}

// heldJobsOfNamespace wakes the Jobs the record finalizer holds in a namespace whose
// deletion started (WatchNamespaceDeletions): none waits any more for an account its
// short form declares (pendingAccounts), and a Job deleted before sends no event then.
func (r *JobRecorder) heldJobsOfNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	return HeldInNamespace(r.Client, func() client.ObjectList { return &batchv1.JobList{} },
		recordHeld)(ctx, ns)
}

// sweepOutOfScope sends to out, once as the manager starts to lead, every Job the
// record finalizer holds that carries no scope label (HeldOutOfScope). The cache holds
// only labelled Jobs, so a Job whose label was taken off while no manager led never
// leaves it in sight of this leader: without the sweep no event would bring it to
// releaseOutOfScope, and deleted it would stay Terminating for good. A failed list is
// retried with a back-off until it succeeds or the manager stops.
func (r *JobRecorder) sweepOutOfScope(ctx context.Context, out chan<- event.GenericEvent) error {
	return sweepHeld(ctx, "listing held Jobs without a scope label", r.HeldOutOfScope, func() client.Object { return &batchv1.Job{} }, out)
}

// sweepHeld sends to out, once, an object made by newObject for each key list returns,
// then waits for ctx to end. A failed list is retried with a back-off (logged as what)
// until it succeeds or ctx ends; it returns nil either way (the manager stops).
func sweepHeld(ctx context.Context, what string, list func(context.Context) ([]client.ObjectKey, error),
	newObject func() client.Object, out chan<- event.GenericEvent) error {
	var keys []client.ObjectKey
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: time.Second, Factor: 2, Steps: math.MaxInt32, Cap: 5 * time.Minute},
		func(ctx context.Context) (bool, error) {
			var err error
			if keys, err = list(ctx); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, what)
				return false, nil
			}
			return true, nil
		})
	if err != nil {
		return nil // the manager stops
	}
	for _, key := range keys {
		obj := newObject()
		obj.SetNamespace(key.Namespace)
		obj.SetName(key.Name)
		select {
		case out <- event.GenericEvent{Object: obj}:
		case <-ctx.Done():
			return nil
		}
	}
	<-ctx.Done()
	return nil
}

// HeldOutOfScope are the Jobs the API server holds with the record finalizer and no
// scope label, read in pages of their metadata alone, selected by the label's absence.
func (r *JobRecorder) HeldOutOfScope(ctx context.Context) ([]client.ObjectKey, error) {
	return heldOutOfScope(ctx, r.APIReader, batchv1.SchemeGroupVersion.WithKind("Job"), v1alpha1.RecordFinalizer,
		v1alpha1.LabelScope, selection.DoesNotExist)
}

// heldOutOfScope are the objects of kind the API server holds with finalizer whose labels
// meet the requirement key op values: those a cache selecting by the scope label never
// shows. Read through r in pages of their metadata alone (release.EachHeld), selected by
// the API server, so a cluster's unscoped objects cost no transfer of their own.
func heldOutOfScope(ctx context.Context, r client.Reader, kind schema.GroupVersionKind, finalizer string,
	key string, op selection.Operator, values ...string) ([]client.ObjectKey, error) {
	req, err := labels.NewRequirement(key, op, values)
	if err != nil {
		return nil, err
	}
	var out []client.ObjectKey
	if _, err := release.EachHeld(ctx, r, kind, []string{finalizer},
		func(obj *metav1.PartialObjectMetadata, _ []string) {
			out = append(out, client.ObjectKeyFromObject(obj))
		},
		client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)}); err != nil {
		return nil, err
	}
	return out, nil
}

// jobAppeared passes a Job's appearance in the cache only: its creation, and every Job
// when the manager starts.
var jobAppeared = predicate.Funcs{
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// heldJobChanged passes a held Job's appearance, and the changes of a Job held before or
// after that may let it go: its finalizers, its deletion starting, its end, and while it
// is being deleted its status (the Job controller counting its last pods).
var heldJobChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return recordHeld(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*batchv1.Job), e.ObjectNew.(*batchv1.Job)
		if !recordHeld(o) && !recordHeld(n) {
			return false
		}
		return !slices.Equal(o.Finalizers, n.Finalizers) || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
			jobTerminal(o) != jobTerminal(n) || (n.DeletionTimestamp != nil && !equality.Semantic.DeepEqual(o.Status, n.Status))
	},
	// A Job that leaves the cache still held lost its scope label (releaseOutOfScope):
	// a deleted Job was released before it went.
	DeleteFunc:  func(e event.DeleteEvent) bool { return recordHeld(e.Object) },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

type jobQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// accountNamesJobs wakes Hold for the Jobs an account names when it is created or its
// spec changes.
func (r *JobRecorder) accountNamesJobs() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q jobQueue) {
			r.enqueueNamed(ctx, e.Object.(*v1alpha1.BatchAccount), q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q jobQueue) {
			if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
				r.enqueueNamed(ctx, e.ObjectNew.(*v1alpha1.BatchAccount), q)
			}
		},
	}
}

// accountRecordsJobs wakes Reconcile for the Jobs an account's status newly records
// (newlyRecorded), and for every Job it names, before and after, when its spec changes or
// it is deleted.
func (r *JobRecorder) accountRecordsJobs() handler.EventHandler {
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q jobQueue) {
			o, n := e.ObjectOld.(*v1alpha1.BatchAccount), e.ObjectNew.(*v1alpha1.BatchAccount)
			if o.Generation != n.Generation || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) {
				r.enqueueNamed(ctx, o, q)
				r.enqueueNamed(ctx, n, q)
				return
			}
			for _, name := range newlyRecorded(&o.Status, &n.Status) {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: n.Namespace, Name: name}})
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q jobQueue) {
			if ba, ok := e.Object.(*v1alpha1.BatchAccount); ok {
				r.enqueueNamed(ctx, ba, q)
			}
		},
	}
}

// enqueueNamed adds the Jobs ba names: a Job target's Job by name, and the child Jobs of
// a child target (of every restart attempt) from the cache.
func (r *JobRecorder) enqueueNamed(ctx context.Context, ba *v1alpha1.BatchAccount, q jobQueue) {
	seen := map[string]bool{}
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ba.Namespace, Name: name}})
		}
	}
	for _, a := range ba.Spec.AllAssignments() {
		ref := a.Target
		k := relations.KindOf(ref)
		switch {
		case k == nil || (ref.Namespace != "" && ref.Namespace != ba.Namespace):
		case k.CandidateLabels(ref) == nil:
			add(ref.Job)
		default:
			var jobs batchv1.JobList
			if err := r.List(ctx, &jobs, client.InNamespace(ba.Namespace), client.MatchingLabels(k.CandidateLabels(ref))); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "listing the child Jobs an account names", "account", ba.Name)
				continue
			}
			for i := range jobs.Items {
				add(jobs.Items[i].Name)
			}
		}
	}
}

// newlyRecorded are the names of the Jobs whose entry in now (a target's observed
// identity, or history) says something was that no entry said: a new identity, terminal
// condition or completed indexes. Only such a write can complete a Job's record.
func newlyRecorded(was, now *v1alpha1.BatchAccountStatus) []string {
	type entry struct {
		job, uid, terminal, completed string
		omitted                       bool
	}
	had := map[entry]bool{}
	for _, t := range was.Targets {
		had[entry{t.Job, string(t.UID), t.Terminal, t.CompletedIndexes, t.CompletedIndexesOmitted}] = true
	}
	for _, h := range was.History {
		had[entry{h.Job, string(h.UID), h.Terminal, h.CompletedIndexes, h.CompletedIndexesOmitted}] = true
	}
	var out []string
	add := func(e entry) {
		if e.job != "" && e.uid != "" && !had[e] && !slices.Contains(out, e.job) {
			out = append(out, e.job)
		}
	}
	for _, t := range now.Targets {
		add(entry{t.Job, string(t.UID), t.Terminal, t.CompletedIndexes, t.CompletedIndexesOmitted})
	}
	for _, h := range now.History {
		add(entry{h.Job, string(h.UID), h.Terminal, h.CompletedIndexes, h.CompletedIndexesOmitted})
	}
	return out
}

// JobRecordMetrics count what the JobRecorder does. A nil *JobRecordMetrics counts
// nothing.
type JobRecordMetrics struct {
	// Holds counts record finalizers the controller added (the webhook's are not counted).
	Holds prometheus.Counter
	// Releases counts record finalizers removed.
	Releases prometheus.Counter
	// HoldsExpired counts Jobs released unrecorded after MaxHold.
	HoldsExpired prometheus.Counter
}

// Metric names of the JobRecorder.
const (
	MetricJobRecordHolds        = "batchledger_job_record_holds_total"
	MetricJobRecordReleases     = "batchledger_job_record_releases_total"
	MetricJobRecordHoldsExpired = "batchledger_job_record_hold_expired_total"
)

// NewJobRecordMetrics creates the JobRecorder's counters and registers them with
// controller-runtime's registry.
func NewJobRecordMetrics() *JobRecordMetrics { return newJobRecordMetrics(metrics.Registry) }

func newJobRecordMetrics(reg prometheus.Registerer) *JobRecordMetrics {
	m := &JobRecordMetrics{
		Holds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricJobRecordHolds, Help: "Record finalizers the controller added to Jobs accounts name.",
		}),
		Releases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricJobRecordReleases, Help: "Record finalizers removed from Jobs.",
		}),
		HoldsExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricJobRecordHoldsExpired, Help: "Jobs being deleted released after the maximum record hold, their end unrecorded.",
		}),
	}
	reg.MustRegister(m.Holds, m.Releases, m.HoldsExpired)
	return m
}

func (m *JobRecordMetrics) held() {
	if m != nil {
		m.Holds.Inc()
	}
}

func (m *JobRecordMetrics) released() {
	if m != nil {
		m.Releases.Inc()
	}
}

func (m *JobRecordMetrics) holdExpired() {
	if m != nil {
		m.HoldsExpired.Inc()
	}
}
