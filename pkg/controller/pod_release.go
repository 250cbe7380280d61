package controller

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/release"
)

// DefaultMaxResultHold is how long a pod is held for its result at most: a succeeded
// pod after it finished (or after the releaser's start when that is later: holdLeft),
// a pod deleted before it finished after its deletion. Past it the pod is released
// unrecorded (with a Warning event and a metric), so that an account whose
// reconcile keeps failing, or a pod whose node stopped answering, never strands pods, nor
// the namespace they are in.
const DefaultMaxResultHold = 24 * time.Hour

// DefaultNamespaceGrace is how long a pod whose namespace is being deleted is held for
// its result at most: after it finished (or, if it never does, after its grace period
// ended), after the namespace's deletion began and after the releaser started, whichever
// is latest. Result capture records what it still can meanwhile (a chunk that exists may
// still be updated; no new one may be created in a terminating namespace); the rest is
// released unrecorded, so that batchledger never keeps a namespace from going.
const DefaultNamespaceGrace = 5 * time.Second

// PodReleaser removes the result-capture finalizer from a pod as soon as holding it
// serves no purpose: every account requiring results that captures it
// (relations.CapturedBy: the same rule result capture applies) has recorded its result,
// or it failed (no result to read), or no such account captures it. A pod being deleted
// is held until it finishes, since it may still succeed during its graceful termination
// and be counted by the Job controller. Pods are held only while a result would otherwise
// be lost, at most MaxHold after they finished or, when later, after the releaser
// started (holdLeft), MaxHold after their deletion when they never
// finished, and at most
// NamespaceGrace once their namespace is being deleted.
//
// A held pod is in the manager's pod cache only while it carries LabelScope=ScopeResults
// (CacheOptions). A pod that loses the label while held (the held-pod-scope admission
// policy forbids it, but a cluster may lack the policy) leaves the cache, and the cache
// would never show it again; ReleaseOutOfScope releases such a pod, and the sweep as the
// releaser starts to lead (sweepOutOfScope) brings it those that left while none ran.
type PodReleaser struct {
	client.Client
	// APIReader reads from the API server directly (the manager's GetAPIReader): a pod
	// that left the results scope is no longer in the cache. Without it ReleaseOutOfScope
	// does nothing.
	APIReader client.Reader
	Metrics   *Metrics
	Recorder  events.EventRecorder
	// MaxHold bounds how long a pod is held for its result, from its finish or the
	// releaser's start when later (holdLeft), and a pod deleted before it finished from
	// its deletion (0: DefaultMaxResultHold).
	MaxHold time.Duration
	// Ledger tells the chunks the manager recorded (signed) from any other: only those
	// record a pod, so a forged chunk naming a held pod never lets it go. The manager
	// shares the account reconciler's; nil (some tests) checks no signature.
	Ledger *Ledger
	// NamespaceGrace bounds the hold in a namespace being deleted (0: DefaultNamespaceGrace).
	NamespaceGrace time.Duration
	// ShortFormTTL is the short-form accounts' retention (ShortFormReconciler.TTL): a
	// pod of a batch that ended longer ago waits for no short-form account
	// (relations.ShortFormPending).
	ShortFormTTL time.Duration
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Recorders, when set, say who records a held pod's result instead of the accounts of
	// this cluster: the worker role of a MultiKueue worker records results in
	// WorkerResults. The release rules (MaxHold, deletion, namespace) stay these.
	Recorders Recorders

	// started is when the releaser first reconciled (it runs on the leader only): in a
	// namespace being deleted, result capture is given NamespaceGrace from then too, so
	// that a restart or a new leader does not release what it could still record.
	started   time.Time
	startOnce sync.Once
}

// Recorders say who records a held pod's result, for the releaser's rules.
type Recorders interface {
	// CapturedBy names who records pod's result once it succeeds; none: nobody does,
	// and the pod is not held.
	CapturedBy(ctx context.Context, pod *corev1.Pod) ([]string, error)
	// Unrecorded are those of capturing that have not recorded the succeeded pod's result.
	Unrecorded(ctx context.Context, pod *corev1.Pod, capturing []string) ([]string, error)
}

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// releaseCause is why a pod is let go unrecorded, for its Warning event; none for a pod whose
// result is recorded or that has none to record.
type releaseCause int

const (
	causeNone releaseCause = iota
	// causeHoldExpired: held MaxHold, the result never recorded.
	causeHoldExpired
	// causeNeverFinished: deleted before it finished, it did not finish within MaxHold.
	causeNeverFinished
	// causeNamespaceDeleted: its namespace is being deleted and the result could not be
	// recorded within NamespaceGrace.
	causeNamespaceDeleted
)

// verdict is what judge decided for a held pod.
type verdict struct {
	hold bool
	// after is when to look again while held (0: when the pod changes).
	after time.Duration
	// why, when released, is why its result goes unrecorded.
	why releaseCause
	// missing are the accounts that have not recorded the pod's result.
	missing []string
}

// Reconcile releases one pod when it may go.
func (r *PodReleaser) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.startOnce.Do(func() {
		if r.started.IsZero() {
			r.started = r.now()
		}
	})
	var pod corev1.Pod
	if err := r.Get(ctx, req.NamespacedName, &pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !slices.Contains(pod.Finalizers, v1alpha1.ResultFinalizer) {
		return ctrl.Result{}, nil
	}
	v, err := r.judge(ctx, &pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	if v.hold {
		return ctrl.Result{RequeueAfter: v.after}, nil
	}
	released, err := r.removeHold(ctx, &pod)
	if err != nil || released == nil {
		return ctrl.Result{}, err
	}
	r.Metrics.podReleased(r.now().Sub(holdStart(released)))
	r.releasedUnrecorded(ctx, released, v)
	return ctrl.Result{}, nil
}

// judge decides whether the pod's result still has to be recorded before it may go, and
// for how long at most.
func (r *PodReleaser) judge(ctx context.Context, pod *corev1.Pod) (verdict, error) {
	if pod.Status.Phase == corev1.PodFailed {
		return verdict{}, nil // no result to wait for
	}
	// keyless is set when the signing key did not load: no chunk could be verified, so a
	// result recorded may not have been seen.
	keyless := false
	capturedBy, unrecorded := func(ctx context.Context, pod *corev1.Pod) ([]string, error) {
		legacyBefore, err := r.Ledger.LegacyPodsBefore(ctx, r.now())
		if err != nil {
			// Without the key nothing is recorded, and which unmarked pods an earlier
			// version held is not known: every pod counts as reporting, so that none goes
			// unrecorded over a passing error, and the bounds on a hold (MaxHold, a
			// namespace being deleted) still apply.
			ctrl.LoggerFrom(ctx).Error(err, "judging a held pod without the signing key")
			legacyBefore = r.now()
			keyless = true
		}
		return relations.CapturedBy(ctx, r.Client, pod, legacyBefore)
	}, r.unrecorded
	if r.Recorders != nil {
		capturedBy, unrecorded = r.Recorders.CapturedBy, r.Recorders.Unrecorded
	}
	accounts, err := capturedBy(ctx, pod)
	if err != nil {
		return verdict{}, err
	}
	var declared []string
	var recheck time.Duration
	if r.Recorders == nil {
		// Accounts a short form declares are not there yet: waited for (unrecorded, they
		// are missing) until ShortFormWait is over, then looked at again.
		if declared, recheck, err = relations.ShortFormPending(ctx, r.Client, pod.Namespace, relations.PodTargetRefs(pod), r.ShortFormTTL, r.now(), r.started); err != nil {
			return verdict{}, err
		}
	}
	if len(accounts)+len(declared) == 0 {
		return verdict{}, nil
	}
	v, err := r.judgeHeld(ctx, pod, append(accounts, declared...), unrecorded)
	if err == nil && v.hold {
		v.after = soonest(v.after, recheck)
		if keyless && pod.Status.Phase == corev1.PodSucceeded {
			// Once the key loads nothing changes that would wake the pod (its chunk was
			// written before): look again as the accounts do, not only at MaxHold.
			v.after = soonest(v.after, ResultsUnreadableRecheck)
		}
	}
	return v, err
}

// judgeHeld is judge for a pod whose result the accounts record (or will).
func (r *PodReleaser) judgeHeld(ctx context.Context, pod *corev1.Pod, accounts []string,
	unrecorded func(context.Context, *corev1.Pod, []string) ([]string, error)) (verdict, error) {
	if pod.Status.Phase != corev1.PodSucceeded {
		if pod.DeletionTimestamp == nil {
			return verdict{hold: true}, nil // running: its success wakes us again
		}
		// Deleted before it finished: it may still exit 0 during its graceful termination
		// (a worker that checkpoints and exits when preempted), and the Job controller
		// would count that success. A pod whose node is gone is marked Failed by the pod
		// garbage collector; one whose kubelet never answers is let go after MaxHold.
		nsDeleted, err := r.namespaceDeleted(ctx, pod.Namespace)
		if err != nil {
			return verdict{}, err
		}
		if nsDeleted != nil {
			// Past its grace period the kubelet has killed it or will never report.
			return r.namespaceHold(accounts, pod.DeletionTimestamp.Time, nsDeleted.Time), nil
		}
		// Counted from the deletion alone: unlike a result waiting for capture, nothing
		// is to come from a pod its kubelet did not report finished within MaxHold.
		if left := cmp.Or(r.MaxHold, DefaultMaxResultHold) - r.now().Sub(deletionRequested(pod)); left > 0 {
			return verdict{hold: true, after: left}, nil
		}
		return verdict{why: causeNeverFinished, missing: accounts}, nil
	}
	missing, err := unrecorded(ctx, pod, accounts)
	if err != nil || len(missing) == 0 {
		return verdict{}, err
	}
	finished := FinishedAt(pod)
	nsDeleted, err := r.namespaceDeleted(ctx, pod.Namespace)
	if err != nil {
		return verdict{}, err
	}
	if nsDeleted != nil {
		return r.namespaceHold(missing, finished, nsDeleted.Time), nil
	}
	if left := r.holdLeft(finished); left > 0 {
		return verdict{hold: true, after: left}, nil
	}
	return verdict{why: causeHoldExpired, missing: missing}, nil
}

// holdLeft is how much longer a succeeded pod may be held for its result (0 or less:
// none): MaxHold from since (its finish) or, when later, from the releaser's start. A pod that finished while no releaser ran is what the hold is
// for, and the account reconciler captures results apart from the releaser: a leader
// back after an outage longer than MaxHold gives capture MaxHold to record the pod
// rather than racing it to release the pod. So for the worker role's Capture
// (Recorders), which writes the record just before the releaser judges: the releaser
// reads it back from the cache, which does not show it yet, and a write that fails
// once must be tried again, not end the hold.
func (r *PodReleaser) holdLeft(since time.Time) time.Duration {
	if r.started.After(since) {
		since = r.started
	}
	return cmp.Or(r.MaxHold, DefaultMaxResultHold) - r.now().Sub(since)
}

// namespaceHold holds a pod of a namespace being deleted for NamespaceGrace after the
// latest of since (its finish, or the end of its grace period), the namespace's deletion
// and the releaser's start, then releases it unrecorded.
func (r *PodReleaser) namespaceHold(missing []string, since, nsDeleted time.Time) verdict {
	from := since
	for _, t := range []time.Time{nsDeleted, r.started} {
		if t.After(from) {
			from = t
		}
	}
	if left := cmp.Or(r.NamespaceGrace, DefaultNamespaceGrace) - r.now().Sub(from); left > 0 {
		return verdict{hold: true, after: left}
	}
	return verdict{why: causeNamespaceDeleted, missing: missing}
}

// unrecorded returns the accounts of capturing (the names CapturedBy returned) that have
// not recorded the pod's result: chunks are per account (labelled and controlled by its
// UID), and a pod dropped past the per-shard bound counts as recorded. The chunks holding
// the pod are found by the IndexResultPod index and read without a copy; the accounts'
// UIDs are read from the cache only when there is a chunk to compare them with.
func (r *PodReleaser) unrecorded(ctx context.Context, pod *corev1.Pod, capturing []string) ([]string, error) {
	var chunks v1alpha1.ShardResultsList
	if err := r.List(ctx, &chunks, client.InNamespace(pod.Namespace),
		client.MatchingFields{relations.IndexResultPod: string(pod.UID)}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	if len(chunks.Items) == 0 {
		return capturing, nil
	}
	accounts, err := relations.LiveAccountsNaming(ctx, r.Client, pod.Namespace, relations.PodKeys(pod)...)
	if err != nil {
		return nil, err
	}
	// The spec each account judges by (its rule and result container): a result judged
	// under another is no record. Nor is any result of an account whose status counts
	// none yet: until it does, its rule and result container may still change (the CRD
	// and the webhook freeze them once status.results.recorded > 0), and a result judged
	// under the old ones would be lost with its pod. The status write that counts the
	// first result wakes the pods (accountReleasesPods).
	judging := make(map[types.UID]v1alpha1.Judging, len(accounts))
	for _, ba := range accounts {
		if ba.Status.Results.Recorded > 0 {
			judging[ba.UID] = ba.Spec.Judging()
		}
	}
	recordedBy := make(map[types.UID]bool, len(chunks.Items))
	for i := range chunks.Items {
		c := &chunks.Items[i]
		owner := metav1.GetControllerOf(c)
		if owner == nil || c.Labels[v1alpha1.LabelAccountUID] != string(owner.UID) {
			continue
		}
		if j, ok := judging[owner.UID]; !ok || !c.Records(pod.UID, j) {
			continue
		}
		if r.Ledger != nil {
			// A chunk that cannot be verified (no key) records nothing: the pod waits,
			// within the bounds on a hold.
			if trusted, err := r.Ledger.ChunkTrusted(ctx, c); err != nil || !trusted {
				continue
			}
		}
		recordedBy[owner.UID] = true
	}
	var missing []string
	for _, name := range capturing {
		i := slices.IndexFunc(accounts, func(ba *v1alpha1.BatchAccount) bool { return ba.Name == name })
		if i < 0 || !recordedBy[accounts[i].UID] {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// namespaceDeleted is when the deletion of the namespace began, nil while it is not
// being deleted (NamespaceDeleted).
func (r *PodReleaser) namespaceDeleted(ctx context.Context, name string) (*metav1.Time, error) {
	return NamespaceDeleted(ctx, r.Client, name)
}

// NamespaceDeleted is when the deletion of the namespace name began, nil while it is not
// being deleted. It is read through r from the cache of Namespaces' metadata (the
// deletion timestamp is all a terminating namespace is told by; WatchNamespaceDeletions
// watches the same); a namespace the cache does not hold counts as not being deleted.
func NamespaceDeleted(ctx context.Context, r client.Reader, name string) (*metav1.Time, error) {
	ns := namespaceMetadata()
	if err := r.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return ns.DeletionTimestamp, nil
}

// namespaceMetadata is an empty Namespace in the form the releaser caches and watches
// Namespaces: their metadata only.
func namespaceMetadata() *metav1.PartialObjectMetadata {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return ns
}

// releasedUnrecorded tells of a pod released before every account recorded its result:
// a Warning event on the pod, a metric, and, for a namespace being deleted (where the
// API server refuses new events), a log line and a Warning on the Namespace, whose events
// are kept in the default namespace.
func (r *PodReleaser) releasedUnrecorded(ctx context.Context, pod *corev1.Pod, v verdict) {
	maxHold := cmp.Or(r.MaxHold, DefaultMaxResultHold)
	var note string
	switch v.why {
	case causeNone:
		return
	case causeHoldExpired:
		r.Metrics.holdExpired()
		note = fmt.Sprintf("released after holding it %s for its result, which was never recorded (see the account's status and the controller's log)", maxHold)
	case causeNeverFinished:
		r.Metrics.holdExpired()
		note = fmt.Sprintf("released %s after its deletion: it never finished (its node may not be answering), so it has no result to record", maxHold)
	case causeNamespaceDeleted:
		r.Metrics.namespaceReleased()
		note = fmt.Sprintf("released unrecorded by %s: the namespace is being deleted, and no result can be recorded in it any more", strings.Join(v.missing, ", "))
		ctrl.LoggerFrom(ctx).Info("released a held pod unrecorded: its namespace is being deleted",
			"pod", klog.KObj(pod), "accounts", v.missing, "phase", pod.Status.Phase)
		if r.Recorder != nil {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pod.Namespace}}
			r.Recorder.Eventf(ns, nil, corev1.EventTypeWarning, v1alpha1.EventReasonResultNotRecorded, "Release",
				"released pods held for their results unrecorded while the namespace was being deleted (see batchledger's log)")
		}
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, v1alpha1.EventReasonResultNotRecorded, "Release", "%s", note)
	}
}

// removeHold removes the result-capture finalizer from pod, judged as the cache shows it,
// and returns the pod released: nil when it was gone or no longer held. The patch tests
// the finalizer's index (release.FinalizerRemovalPatch), and the list often moves just
// after the cache's copy (the Job controller drops its tracking finalizer as the pod
// ends): the API server then refuses the patch with 422 Invalid. The pod is read from
// the API server and the patch built once more from that copy, so that a stale cache
// costs one read rather than an error and the queue's backoff. A pod of the same name
// but another UID is not the one judged, and is left to its own reconcile.
func (r *PodReleaser) removeHold(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	patch, ok := release.FinalizerRemovalPatch(pod)
	if !ok {
		return nil, nil
	}
	err := r.Patch(ctx, pod, patch)
	switch {
	case err == nil:
		return pod, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	case r.APIReader == nil || !apierrors.IsInvalid(err) && !apierrors.IsConflict(err):
		return nil, err
	}
	ctrl.LoggerFrom(ctx).V(2).Info("the pod's finalizers moved since the cached copy; releasing it from the API server's", "reason", err.Error())
	live, err := r.livePod(ctx, client.ObjectKeyFromObject(pod))
	if err != nil || live == nil || live.UID != pod.UID {
		return nil, err
	}
	if patch, ok = release.FinalizerRemovalPatch(live); !ok {
		return nil, nil
	}
	if err := r.Patch(ctx, live, patch); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return live, nil
}

// ReleaseOutOfScope releases a pod that left the results scope while held. It is woken
// when a held pod leaves the manager's pod cache (LeftResultsScope): the API server sends
// a label-selected watch a DELETED event when the object stops matching, as it does when
// the pod is deleted for real. The event shows the pod as it last matched, so the pod is
// read live: if it still exists, carries the finalizer and not LabelScope=ScopeResults,
// the finalizer is removed (Reconcile's patch) with a Warning event, since the controller
// can no longer see the pod to record its result or to release it later. A pod gone is
// left alone, and a pod back in scope to Reconcile, which sees it in the cache again.
func (r *PodReleaser) ReleaseOutOfScope(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.APIReader == nil {
		return ctrl.Result{}, nil
	}
	pod, err := r.livePod(ctx, req.NamespacedName)
	if err != nil || pod == nil {
		return ctrl.Result{}, err
	}
	if pod.Labels[v1alpha1.LabelScope] == v1alpha1.ScopeResults {
		return ctrl.Result{}, nil
	}
	patch, ok := release.FinalizerRemovalPatch(pod)
	if !ok {
		return ctrl.Result{}, nil // released meanwhile
	}
	// A rejected patch (the finalizers changed since the read) returns the error: the
	// retry reads the pod again.
	if err := r.Patch(ctx, pod, patch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Metrics.podReleased(r.now().Sub(holdStart(pod)))
	if r.Recorder != nil {
		scope, labelled := pod.Labels[v1alpha1.LabelScope]
		was := "removed"
		if labelled {
			was = "changed to " + strconv.Quote(scope)
		}
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, v1alpha1.EventReasonLeftResultsScope, "Release",
			"released: its label %s=%s was %s while batchledger held it, which took it out of batchledger's sight, so its result may not be recorded",
			v1alpha1.LabelScope, v1alpha1.ScopeResults, was)
	}
	return ctrl.Result{}, nil
}

// livePod reads a pod from the API server, nil when it is gone. A list by name rather
// than a get, so that the manager needs no get permission on pods (list, watch and patch
// are all it has).
func (r *PodReleaser) livePod(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(key.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(release.NameField, key.Name)}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if pods.Items[i].Name == key.Name {
			return &pods.Items[i], nil
		}
	}
	return nil, nil
}

func (r *PodReleaser) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// FinishedAt is when the pod finished: its containers' latest termination, else its
// latest condition change (a pod whose statuses were never written).
func FinishedAt(pod *corev1.Pod) time.Time {
	var t time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && term.FinishedAt.After(t) {
			t = term.FinishedAt.Time
		}
	}
	if t.IsZero() {
		for _, c := range pod.Status.Conditions {
			if c.LastTransitionTime.After(t) {
				t = c.LastTransitionTime.Time
			}
		}
	}
	if t.IsZero() {
		t = pod.CreationTimestamp.Time
	}
	return t
}

// holdStart is when a pod's hold for its result began to count, for the hold-time
// histogram: its end, or its creation when it never finished.
func holdStart(pod *corev1.Pod) time.Time {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return FinishedAt(pod)
	}
	return pod.CreationTimestamp.Time
}

// deletionRequested is when the pod's deletion was asked for: its deletion timestamp
// less its grace period.
func deletionRequested(pod *corev1.Pod) time.Time {
	t := pod.DeletionTimestamp.Time
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		t = t.Add(-time.Duration(*g) * time.Second)
	}
	return t
}

// SetupWithManager watches held pods, the result chunks that record them, account
// deletions and spec changes that may leave pods held for nothing (accountReleasesPods),
// and the start of a namespace's deletion (WatchNamespaceDeletions), which bounds the
// hold of its pods;
// and, in a second controller (pod-release-out-of-scope, ReleaseOutOfScope), held pods
// leaving the results scope.
func (r *PodReleaser) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Pod{}, builder.WithPredicates(heldPodMayGo)).
		Watches(&v1alpha1.ShardResults{}, r.chunkRecords()).
		Watches(&v1alpha1.BatchAccount{}, handler.EnqueueRequestsFromMapFunc(r.heldPodsOfAccount),
			builder.WithPredicates(accountReleasesPods))
	if err := r.WatchNamespaceDeletions(b).Named(PodReleaseControllerName).Complete(r); err != nil {
		return err
	}
	return r.SetupOutOfScope(mgr, "pod-release-out-of-scope")
}

// WatchNamespaceDeletions adds to b, a controller reconciling held pods by their key
// (the releaser, or the worker role's capture, which hands them to it), the watch that
// wakes the held pods of a namespace whose deletion starts: NamespaceGrace bounds their
// hold from then. The namespace controller's deletion of a pod wakes it too, but not a
// pod deleted before (one that never finished, its kubelet silent): without this watch
// it would keep the namespace until MaxHold after its deletion.
func (r *PodReleaser) WatchNamespaceDeletions(b *builder.Builder) *builder.Builder {
	return WatchNamespaceDeletions(b, r.heldPodsOfNamespace)
}

// WatchNamespaceDeletions adds to b the watch of Namespaces (their metadata: the cache
// NamespaceDeleted reads) whose deletion starts (namespaceDeletionStarted), each mapped by
// heldOf to the objects a finalizer of batchledger holds in it, so that their hold is
// judged again under the namespace's rules at once rather than at its next requeue.
func WatchNamespaceDeletions(b *builder.Builder, heldOf handler.MapFunc) *builder.Builder {
	return b.Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(heldOf),
		builder.OnlyMetadata, builder.WithPredicates(namespaceDeletionStarted))
}

// SetupOutOfScope registers the controller name that releases held pods leaving the
// results scope (ReleaseOutOfScope): those the pod cache sees go (LeftResultsScope), and,
// once as the manager starts to lead, those that left it while no releaser ran
// (sweepOutOfScope), given an APIReader.
func (r *PodReleaser) SetupOutOfScope(mgr ctrl.Manager, name string) error {
	outOfScope := make(chan event.GenericEvent)
	if r.APIReader != nil {
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return r.sweepOutOfScope(ctx, outOfScope) })); err != nil {
			return err
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Pod{}, builder.WithPredicates(LeftResultsScope)).
		WatchesRawSource(source.Channel(outOfScope, &handler.EnqueueRequestForObject{})).
		Named(name).
		Complete(reconcile.Func(r.ReleaseOutOfScope))
}

// sweepOutOfScope sends to out, once as the manager starts to lead, every pod the
// result-capture finalizer holds outside the results scope (HeldOutOfScope). The pod
// cache holds only the results scope, so a pod whose scope label was taken off or
// changed while no releaser ran (the held-pod-scope policy missing, as on a worker
// cluster) never shows in it: without the sweep nothing would bring it to
// ReleaseOutOfScope, and deleted it would stay Terminating for good.
func (r *PodReleaser) sweepOutOfScope(ctx context.Context, out chan<- event.GenericEvent) error {
	return sweepHeld(ctx, "listing held pods outside the results scope", r.HeldOutOfScope, func() client.Object { return &corev1.Pod{} }, out)
}

// HeldOutOfScope are the pods the API server holds with the result-capture finalizer
// that do not carry LabelScope=ScopeResults, read in pages of their metadata alone,
// selected by the label's absence or another value.
func (r *PodReleaser) HeldOutOfScope(ctx context.Context) ([]client.ObjectKey, error) {
	return heldOutOfScope(ctx, r.APIReader, corev1.SchemeGroupVersion.WithKind("Pod"), v1alpha1.ResultFinalizer,
		v1alpha1.LabelScope, selection.NotIn, v1alpha1.ScopeResults)
}

// PodReleaseControllerName names the pod releaser's controller, its workqueue and
// their metrics (controller-runtime's labels controller and name).
const PodReleaseControllerName = "pod-release"

// held reports whether a pod carries batchledger's finalizer.
func held(o client.Object) bool {
	return slices.Contains(o.GetFinalizers(), v1alpha1.ResultFinalizer)
}

// heldPodMayGo passes the events of a held pod after which judge may let it go: its
// creation (no account may capture it), and the updates that hold it, finish it, begin
// its deletion, or change the metadata that say whose index pod it is (its labels,
// annotations and owners, which relations.CapturedBy reads). The other updates of a pod
// still running (it was scheduled, it started) change nothing judge reads, and were two
// of the five updates of a pod's life. Its deletion passes not: a pod gone needs no
// release, and one leaving the results scope is LeftResultsScope's.
var heldPodMayGo = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return held(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		pod, ok := e.ObjectNew.(*corev1.Pod)
		if !ok || !held(pod) {
			return false
		}
		return !held(e.ObjectOld) ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil ||
			!maps.Equal(e.ObjectOld.GetLabels(), pod.Labels) || !maps.Equal(e.ObjectOld.GetAnnotations(), pod.Annotations) ||
			!equality.Semantic.DeepEqual(e.ObjectOld.GetOwnerReferences(), pod.OwnerReferences)
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(e event.GenericEvent) bool { return held(e.Object) },
}

// LeftResultsScope passes the pod cache's delete events of held pods: each may be a held
// pod leaving the results scope. A label-selected watch reports a pod whose label stops
// matching as DELETED, with the last state that matched (scope=results), so such an
// event cannot be told from a held pod deleted for real (whose last finalizer was ours,
// removed by Reconcile or kubectl batchledger release): ReleaseOutOfScope reads the pod
// live to tell. That costs one read by name per held pod whose deletion ends with our
// finalizer, and none for other pods.
var LeftResultsScope = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(e event.DeleteEvent) bool { return held(e.Object) },
}

// chunkRecords wakes the held pods a chunk's change may let go: those it records (results
// and dropped pods) when it is created or resynced, and on an update only those the old
// chunk did not record, unless the old chunk was not trusted (one the manager signs only
// now): then all of them. Waking every pod of a chunk on each of its updates made the
// releaser's work grow with the square of an account's shards (a chunk records up to
// v1alpha1.ResultsPerChunk shards and is updated as their results come in). A chunk's
// deletion lets no pod go.
func (r *PodReleaser) chunkRecords() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	enqueue := func(q queue, reqs []reconcile.Request) {
		for _, req := range reqs {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) {
			enqueue(q, r.podsNewlyRecorded(ctx, nil, e.Object.(*v1alpha1.ShardResults)))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			enqueue(q, r.podsNewlyRecorded(ctx, e.ObjectOld.(*v1alpha1.ShardResults), e.ObjectNew.(*v1alpha1.ShardResults)))
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q queue) {
			enqueue(q, r.podsNewlyRecorded(ctx, nil, e.Object.(*v1alpha1.ShardResults)))
		},
	}
}

// podsNewlyRecorded are the pods chunk records that old (nil: none) did not, or all it records
// when old was not trusted. A result is new under each rule it was judged under: a pod
// judged again after the rule changed is recorded only by its new result
// (ShardResults.Records), which must wake it. Dropped pods are named by UID and found
// through relations.IndexPodUID; one no longer in the cache is gone and needs no waking.
func (r *PodReleaser) podsNewlyRecorded(ctx context.Context, old, chunk *v1alpha1.ShardResults) []reconcile.Request {
	type judged struct {
		pod  types.UID
		rule string
	}
	hadResult, hadDropped := map[judged]bool{}, map[types.UID]bool{}
	if old != nil && r.trusted(ctx, old) {
		for _, res := range old.Results {
			hadResult[judged{res.PodUID, res.RuleDigest}] = true
		}
		for _, uid := range old.DroppedPods {
			hadDropped[uid] = true
		}
	}
	var reqs []reconcile.Request
	for _, res := range chunk.Results {
		if !hadResult[judged{res.PodUID, res.RuleDigest}] && !hadDropped[res.PodUID] {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: chunk.Namespace, Name: res.Pod}})
		}
	}
	for _, uid := range chunk.DroppedPods {
		if hadDropped[uid] {
			continue
		}
		var pods corev1.PodList
		if err := r.List(ctx, &pods, client.InNamespace(chunk.Namespace), client.MatchingFields{relations.IndexPodUID: string(uid)},
			client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "finding a pod whose result was dropped", "uid", uid)
			continue
		}
		for i := range pods.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
		}
	}
	return reqs
}

// trusted is Ledger.ChunkTrusted, false when it cannot tell (the caller then does the
// safe thing), true without a Ledger.
func (r *PodReleaser) trusted(ctx context.Context, c *v1alpha1.ShardResults) bool {
	if r.Ledger == nil {
		return true
	}
	ok, err := r.Ledger.ChunkTrusted(ctx, c)
	return err == nil && ok
}

// accountReleasesPods passes the account changes that may leave pods held for nothing: its
// deletion (starting or done), a spec change (requireResults turned off, a target no
// longer named) and the status write that counts its first recorded result (before it,
// no result of the account lets a pod go: PodReleaser.unrecorded). The mapper runs for
// the old and the new spec of an update, so the pods of a target the account no longer
// names are woken too; each is then judged by judge, under every account as it is now.
// Other status writes and creations pass not.
var accountReleasesPods = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.BatchAccount)
		n, ok2 := e.ObjectNew.(*v1alpha1.BatchAccount)
		firstRecorded := ok1 && ok2 && o.Status.Results.Recorded == 0 && n.Status.Results.Recorded > 0
		return e.ObjectNew.GetDeletionTimestamp() != nil || e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() || firstRecorded
	},
}

// heldPodsOfAccount wakes the held pods of an account's targets, found through the pod
// cache's index of targets (relations.TargetPods): every account that starts counting
// its results comes here once, and a scan of the cache by labels cost each a pass over
// every pod.
func (r *PodReleaser) heldPodsOfAccount(ctx context.Context, obj client.Object) []reconcile.Request {
	ba := obj.(*v1alpha1.BatchAccount)
	var reqs []reconcile.Request
	for _, a := range ba.Spec.AllAssignments() {
		pods, err := relations.TargetPods(ctx, r.Client, ba.Namespace, a.Target)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing held pods of an account's targets")
			continue
		}
		for i := range pods {
			if held(&pods[i]) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods[i])})
			}
		}
	}
	return reqs
}

// namespaceDeletionStarted passes the update of a Namespace whose deletion began. The
// namespace controller deletes the pods first, which wakes each held pod too; but this
// cache may see the pod's update before the Namespace's.
var namespaceDeletionStarted = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// heldPodsOfNamespace wakes the held pods of a namespace.
func (r *PodReleaser) heldPodsOfNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	return HeldInNamespace(r.Client, func() client.ObjectList { return &corev1.PodList{} }, held)(ctx, ns)
}

// HeldInNamespace maps a Namespace to the objects of newList's kind in it, read through
// r, that holds says a finalizer of batchledger holds (a WatchNamespaceDeletions mapping).
func HeldInNamespace(r client.Reader, newList func() client.ObjectList, holds func(client.Object) bool) handler.MapFunc {
	return func(ctx context.Context, ns client.Object) []reconcile.Request {
		list := newList()
		if err := r.List(ctx, list, client.InNamespace(ns.GetName()), client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing the held objects of a namespace being deleted")
			return nil
		}
		var reqs []reconcile.Request
		_ = apimeta.EachListItem(list, func(o runtime.Object) error {
			if obj, ok := o.(client.Object); ok && holds(obj) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
			}
			return nil
		})
		return reqs
	}
}
