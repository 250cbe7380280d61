package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
)

// Bounds of an aggregated Workload condition message: each account's verdict is named,
// up to maxAccountsNamed of them, each clipped, so the message stays far under the
// 32,768 bytes a Workload condition allows however many accounts name the Workload.
const (
	maxAccountsNamed  = 8
	maxAccountMessage = 1024
)

// desiredWorkloadConditions are the conditions the Workload should carry for the accounts
// that name its Jobs: one per published type, True only when every account's is, so
// that the Workload speaks for all of them and never for the last writer alone. With one
// account the condition is that account's (reason and message); with several, the
// reason is that of the first account (by name) that is not True (or of the first, when
// all are), and the message names each account's verdict. An account that has not judged
// its current spec (judged) counts as Unknown, VerdictPending. Transition times are kept
// from the Workload while the status is unchanged; observedGeneration follows the
// Workload's generation.
func desiredWorkloadConditions(wl *kueue.Workload, accounts []*v1alpha1.BatchAccount, now metav1.Time) []metav1.Condition {
	slices.SortFunc(accounts, func(a, b *v1alpha1.BatchAccount) int { return strings.Compare(a.Name, b.Name) })
	var out []metav1.Condition
	for _, from := range v1alpha1.PublishedConditions {
		typ, _ := v1alpha1.WorkloadConditionFor(from)
		var want *metav1.Condition
		var parts []string
		allTrue, named := true, 0
		for _, ba := range accounts {
			c := apimeta.FindStatusCondition(ba.Status.Conditions, from)
			if c == nil || !judged(ba) {
				c = verdictPending(ba, from, now)
			}
			named++
			if want == nil {
				want = &metav1.Condition{Type: typ, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime}
			}
			if c.Status != metav1.ConditionTrue && allTrue {
				allTrue = false
				want.Status, want.Reason = c.Status, c.Reason
			}
			if len(parts) < maxAccountsNamed {
				parts = append(parts, fmt.Sprintf("BatchAccount %s: %s", ba.Name, clip(c.Message, maxAccountMessage)))
			}
		}
		if want == nil {
			continue
		}
		switch named {
		case 1:
			want.Message = parts[0]
		default:
			want.Message = fmt.Sprintf("%d accounts; %s", named, strings.Join(parts, "; "))
			if named > len(parts) {
				want.Message += fmt.Sprintf("; and %d more", named-len(parts))
			}
			want.LastTransitionTime = now
		}
		want.ObservedGeneration = wl.Generation
		if have := apimeta.FindStatusCondition(wl.Status.Conditions, want.Type); have != nil && have.Status == want.Status {
			want.LastTransitionTime = have.LastTransitionTime
		}
		out = append(out, *want)
	}
	return out
}

// judged reports whether ba's status judges its current spec: written for its
// generation. Between a spec change and the account's next status write, its verdict
// speaks of a spec that no longer is.
func judged(ba *v1alpha1.BatchAccount) bool {
	return len(ba.Status.Conditions) > 0 && ba.Status.ObservedGeneration == ba.Generation
}

// verdictPending stands for the condition from of an account that has not judged its
// current spec (judged): Unknown, so that the Workload vouches for no verdict it has not
// reached.
func verdictPending(ba *v1alpha1.BatchAccount, from string, now metav1.Time) *metav1.Condition {
	msg := "not judged yet"
	if len(ba.Status.Conditions) > 0 {
		msg = fmt.Sprintf("spec changed (generation %d), not judged yet", ba.Generation)
	}
	return &metav1.Condition{Type: from, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonVerdictPending, Message: msg, LastTransitionTime: now}
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// workloadAccounts are the live accounts naming the Workload's owner Job or JobSet, with
// ba (just computed, fresher than the cache) in place of its cached copy. An account
// being deleted is not live: ba is left out then, as the cleanup and the other accounts
// leave it out (LiveAccountsNaming).
func (r *Reconciler) workloadAccounts(ctx context.Context, wl *kueue.Workload, ba *v1alpha1.BatchAccount) ([]*v1alpha1.BatchAccount, error) {
	cached, err := relations.LiveAccountsNaming(ctx, r.Client, wl.Namespace, relations.WorkloadKeys(wl)...)
	if err != nil {
		return nil, err
	}
	var out []*v1alpha1.BatchAccount
	if ba.DeletionTimestamp == nil {
		out = append(out, ba)
	}
	for _, other := range cached {
		if other.Name != ba.Name && speaksFor(other, wl) {
			out = append(out, other)
		}
	}
	return out, nil
}

// speaksFor reports whether the verdict of ba, an account the index finds for the
// Workload, is about wl: its spec still names a target running under wl (namesWorkload)
// and it follows wl (account.Follows). An Accepted account follows none but the
// identities on its record: the Workload of a Job re-run under a target's name, which its
// record does not name, is another batch's, and the account publishes nothing there
// (followedWorkloads). Nor may another account's publish, or a cleanup waiting for it to
// republish, count it there.
func speaksFor(ba *v1alpha1.BatchAccount, wl *kueue.Workload) bool {
	return namesWorkload(ba, wl) && account.Follows(ba, account.RunRef{WorkloadUID: wl.UID, WorkloadName: wl.Name})
}

// namesWorkload reports whether ba's spec names a target that runs under wl: wl's owner
// (one of its WorkloadKeys), or a target its status observed under wl (a JobSet's child
// named by its Job name). The index also finds an account by a Workload its status names
// for a target its spec no longer has (its spec changed, its status not rewritten yet):
// such an account publishes nothing more there, and waiting for it would leave its last
// verdict on the Workload for good.
func namesWorkload(ba *v1alpha1.BatchAccount, wl *kueue.Workload) bool {
	owners := relations.WorkloadKeys(wl)
	if slices.ContainsFunc(relations.AccountKeys(ba), func(k relations.IndexKey) bool { return slices.Contains(owners, k) }) {
		return true
	}
	named := map[string]bool{}
	for _, a := range ba.Spec.AllAssignments() {
		named[string(a.Target.Key())] = true
	}
	return slices.ContainsFunc(ba.Status.Targets, func(t v1alpha1.TargetStatus) bool {
		return named[t.Name] && t.Workload != nil && t.Workload.Name == wl.Name
	})
}

// VerdictPendingRecheck is how soon an account publishing on a Workload looks again when
// another account naming the Workload had not judged its current spec; the longer the
// Workload has waited for that verdict, the longer it looks again after (verdictRecheck),
// up to maxVerdictPendingRecheck: an account that never judges (its reconciles fail)
// costs the others a reconcile every few minutes, not every few seconds.
const (
	VerdictPendingRecheck    = 2 * time.Second
	maxVerdictPendingRecheck = 5 * time.Minute
)

// pendingVerdicts remembers, per Workload, since when a publisher has seen an account
// naming it that has not judged its spec. In memory: after a restart the wait starts
// over, at VerdictPendingRecheck.
type pendingVerdicts struct {
	mu    sync.Mutex
	since map[types.UID]time.Time
}

// recheck is how soon to look again at Workload uid (0: never, nothing is pending):
// VerdictPendingRecheck, or as long as the verdict has been awaited already, at most
// maxVerdictPendingRecheck.
func (p *pendingVerdicts) recheck(uid types.UID, pending bool, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !pending {
		delete(p.since, uid)
		return 0
	}
	if p.since == nil {
		p.since = map[types.UID]time.Time{}
	}
	if len(p.since) > maxPendingVerdicts {
		// Workloads deleted while they waited: forget the long-waiting ones.
		for id, t := range p.since {
			if now.Sub(t) > 12*maxVerdictPendingRecheck {
				delete(p.since, id)
			}
		}
	}
	since, ok := p.since[uid]
	if !ok {
		since = now
		p.since[uid] = now
	}
	return min(max(VerdictPendingRecheck, now.Sub(since)), maxVerdictPendingRecheck)
}

// maxPendingVerdicts is how many Workloads pendingVerdicts remembers before it forgets
// those waiting longest.
const maxPendingVerdicts = 10000

// maxConcurrentPublishes bounds the Workload applies one reconcile has in flight.
const maxConcurrentPublishes = 8

// publishAll publishes the account's verdict on each of its Workloads: it decides what
// each Workload needs (planPublish) one after another, then sends the applies side by
// side: they write distinct objects, and one after another they were the longest wait of
// a reconcile whose account follows several Jobs, a wait that holds a worker every other
// account queues for. Only the applies get a goroutine of their own; most reconciles
// write no Workload, and a goroutine per Workload per reconcile was a tenth of the
// scheduler's work in the load profile. It returns the soonest deferred write (0: none)
// and the first error.
func (r *Reconciler) publishAll(ctx context.Context, workloads map[types.UID]*kueue.Workload, ba *v1alpha1.BatchAccount) (time.Duration, error) {
	var due time.Duration
	var applies []*kueueac.WorkloadApplyConfiguration
	for _, wl := range workloads {
		ac, wait, err := r.planPublish(ctx, wl, ba)
		if err != nil {
			return 0, err
		}
		due = soonest(due, wait)
		if ac != nil {
			applies = append(applies, ac)
		}
	}
	if len(applies) == 1 {
		return due, r.applyWorkloadConditions(ctx, applies[0])
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(maxConcurrentPublishes)
	for _, ac := range applies {
		g.Go(func() error { return r.applyWorkloadConditions(gctx, ac) })
	}
	return due, g.Wait()
}

// planPublish decides what publishing the account's verdict on a Workload takes: the
// apply of batchledger's conditions under its own field manager (nil: none now), so
// Kueue's conditions are never touched, and when to come back (0: no need). It applies
// only what differs, and pins the Workload UID so that a Workload Kueue deleted and
// recreated under the same name is never written through a stale read.
//
// Our conditions appear with the accounts' first news (v1alpha1.HasWorkloadNews): while
// every account only waits with nothing covered, the Workload carries none of them.
// What a Workload reader must see at once is written at once (urgent). Progress (a count
// that moved, shards covered while the batch still waits, one expected wait giving way to
// another) waits WorkloadMessageInterval from when it was first seen unpublished: each
// apply costs a round trip, its echo through our watch and Kueue's, and a wake-up of
// Kueue's Workload controller (its status passes Kueue's webhook too), while the live
// count is on the account's status. The returned duration is when the deferred write is
// due, or when to look again at another account's verdict still to come.
func (r *Reconciler) planPublish(ctx context.Context, wl *kueue.Workload, ba *v1alpha1.BatchAccount) (*kueueac.WorkloadApplyConfiguration, time.Duration, error) {
	accounts, err := r.workloadAccounts(ctx, wl, ba)
	if err != nil {
		return nil, 0, err
	}
	if len(accounts) == 0 {
		// ba is being deleted and no live account names the Workload: take our conditions
		// off, as the cleanup does. The cleanup runs once, on the deletion's event, and a
		// publish of ba that read it before its deletion may land after that; ba's own
		// reconciles go on while a finalizer keeps it, and put it right.
		if !carriesOurConditions(wl) {
			return nil, 0, nil
		}
		return kueueac.Workload(wl.Name, wl.Namespace).WithUID(wl.UID).WithStatus(kueueac.WorkloadStatus()), 0, nil
	}
	if !v1alpha1.CarriesWorkloadConditions(wl.Status.Conditions) && !slices.ContainsFunc(accounts, func(a *v1alpha1.BatchAccount) bool {
		return v1alpha1.HasWorkloadNews(&a.Status)
	}) {
		return nil, 0, nil
	}
	now := r.now()
	want := desiredWorkloadConditions(wl, accounts, metav1.NewTime(now))
	// Another account's verdict is still to come: its own publish may have gone before
	// this one, which read it unjudged, so look again once it had time to judge.
	recheck := r.pendingVerdicts.recheck(wl.UID, slices.ContainsFunc(accounts, func(a *v1alpha1.BatchAccount) bool { return !judged(a) }), now)
	if len(want) == 0 || upToDate(wl.Status.Conditions, want) {
		return nil, recheck, nil
	}
	if !urgent(wl.Status.Conditions, want) {
		if wait := r.workloadWrites.wait(wl.UID, now, r.WorkloadMessageInterval); wait > 0 {
			return nil, soonest(wait, recheck), nil
		}
	}
	st := kueueac.WorkloadStatus()
	for _, c := range want {
		st.WithConditions(metav1ac.Condition().
			WithType(c.Type).WithStatus(c.Status).WithReason(c.Reason).WithMessage(c.Message).
			WithObservedGeneration(c.ObservedGeneration).WithLastTransitionTime(c.LastTransitionTime))
	}
	return kueueac.Workload(wl.Name, wl.Namespace).WithUID(wl.UID).WithStatus(st), recheck, nil
}

// applyWorkloadConditions sends an apply planPublish made. A Workload gone or replaced
// (its UID no longer the one pinned) is no error: its successor wakes the account again.
func (r *Reconciler) applyWorkloadConditions(ctx context.Context, ac *kueueac.WorkloadApplyConfiguration) error {
	err := r.writer().ApplyWorkloadStatus(ctx, ac)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil
	case err != nil:
		return fmt.Errorf("publishing conditions on Workload %s: %w", *ac.GetName(), err)
	}
	r.workloadWrites.wrote(*ac.UID)
	r.Metrics.workloadWritten()
	return nil
}

// urgent reports whether want changes what a reader of the Workload must learn at once:
// our conditions follow a new Workload generation, turn False for a problem (a reason that
// is no expected wait), fall from True, or the batch is Accepted. Everything else is
// progress, our conditions appearing included: a message alone, ShardsCovered turning
// True while the batch still waits (for termination, for results), one expected wait
// giving way to another. So a batch that goes well within WorkloadMessageInterval of its
// first covered shard costs its Workload one write, the verdict; a longer one a write per
// interval of progress, and the verdict.
func urgent(have, want []metav1.Condition) bool {
	for _, w := range want {
		h := apimeta.FindStatusCondition(have, w.Type)
		switch {
		case h != nil && h.ObservedGeneration != w.ObservedGeneration:
			return true
		case h != nil && h.Status == w.Status && h.Reason == w.Reason:
			continue
		case h != nil && h.Status == metav1.ConditionTrue,
			w.Status == metav1.ConditionFalse && !v1alpha1.ExpectedWait(w.Reason),
			w.Status == metav1.ConditionTrue && w.Type == v1alpha1.WorkloadConditionAccepted:
			return true
		}
	}
	return false
}

// upToDate reports whether have carries every condition of want as it is (transition
// times aside).
func upToDate(have, want []metav1.Condition) bool {
	for _, w := range want {
		if !sameCondition(apimeta.FindStatusCondition(have, w.Type), &w) {
			return false
		}
	}
	return true
}

// sameCondition reports whether h (nil: absent) says what w says: status, reason,
// message and observedGeneration; the transition time only follows from those.
func sameCondition(h, w *metav1.Condition) bool {
	return h != nil && h.Status == w.Status && h.Reason == w.Reason && h.Message == w.Message &&
		h.ObservedGeneration == w.ObservedGeneration
}
