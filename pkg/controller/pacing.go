package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// Pacing: what a reader must learn at once is written at once; what only shows progress
// waits a little, so that the next change goes in the same write. Each write costs the
// API server a decode, a validation and a store of the whole object, and a watch event to
// every watcher of it (our own informer, Kueue's for a Workload, the garbage collector's),
// so two writes where one would do cost twice that for nothing a reader needed.

// waitingOnly reports whether next differs from prev only in which wait the account is in:
// no shard newly covered or accepted, no condition newly True (a milestone), no longer
// True or new, no problem (a False condition whose reason is no expected wait), no
// superseded identity and no result verdict. Such a status waits WaitingStatusDelay, so
// that the steps of a batch's way to its verdict share writes: its Workloads appearing
// after it, Kueue admitting them, its Jobs starting, and their first shards being
// covered. Admission counts as a wait although Admitted turns True: it is a step towards
// the verdict that Kueue shows on the Workload at once, and the first covered shard,
// written at once, carries it when it follows within the delay. (The BatchAccount webhook
// does not wait for the status to freeze the mapping: it also asks the cache whether a
// target's Job runs.) The first status is no wait: a new account shows where it stands at
// once, unless Kueue has yet to create its Workloads (aheadOfKueue). Nor is the first
// status of a new generation: until it is written, the account's Workloads count its
// verdict as still to come (VerdictPending).
func waitingOnly(prev, next *v1alpha1.BatchAccountStatus, changed []metav1.Condition) bool {
	if len(prev.Conditions) == 0 || next.ObservedGeneration != prev.ObservedGeneration ||
		next.Shards.Covered != prev.Shards.Covered || next.Shards.Accepted != prev.Shards.Accepted ||
		!equality.Semantic.DeepEqual(next.History, prev.History) || !equality.Semantic.DeepEqual(next.Results, prev.Results) {
		return false
	}
	for _, c := range changed {
		old := apimeta.FindStatusCondition(prev.Conditions, c.Type)
		switch {
		case old == nil, old.Status == metav1.ConditionTrue:
			// New, no longer True, or True for another reason.
			return false
		case c.Status == metav1.ConditionTrue && c.Type != v1alpha1.ConditionAdmitted:
			return false
		case c.Status == metav1.ConditionFalse && !v1alpha1.ExpectedWait(c.Reason):
			return false
		}
	}
	return true
}

// aheadOfKueue reports whether a target's Job is queued in Kueue (it carries Kueue's
// queue label) but Kueue has not created its Workload yet. A new account's first status
// then waits for the Workload (its creation wakes the account), at most
// WaitingStatusDelay: written at once, it would say only that no Workload was found, and
// the Workload appearing a moment later would cost a second write. Under a burst of
// submissions Kueue creates Workloads seconds to tens of seconds after their Jobs.
func aheadOfKueue(seen map[string]observed) bool {
	for _, o := range seen {
		if o.job != nil && o.workload == nil && o.job.Labels[kueueconstants.QueueLabel] != "" {
			return true
		}
	}
	return false
}

// progressClock remembers, per object, since when progress has waited unwritten. In
// memory: after a restart or a leader change pending progress waits one interval again.
type progressClock struct {
	mu      sync.Mutex
	pending map[types.UID]time.Time
	swept   time.Time
}

// wait is how long progress on object uid must still wait (0: write now). Progress waits
// interval from when it was first seen unwritten, not from the last write: an object whose
// progress keeps changing is still written once per interval.
func (w *progressClock) wait(uid types.UID, now time.Time, interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending == nil {
		w.pending = map[types.UID]time.Time{}
	}
	// Forget what waited so long that its object must be gone (a live one is written when
	// due): the map follows the objects with progress pending, not all.
	if now.Sub(w.swept) >= interval {
		for id, since := range w.pending {
			if now.Sub(since) >= 10*interval {
				delete(w.pending, id)
			}
		}
		w.swept = now
	}
	since, ok := w.pending[uid]
	if !ok {
		w.pending[uid] = now
		return interval
	}
	return max(0, interval-now.Sub(since))
}

// wrote records that object uid's stored state carries everything up to now.
func (w *progressClock) wrote(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pending, uid)
}
