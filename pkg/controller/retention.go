package controller

import (
	"context"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/all"
)

// DefaultShortFormTTL is how long a short-form account is kept after its batch
// finished when its spec sets no TTL: a short form creates one account per Job and
// deliberately does not own it, so without a default they would pile up for good.
const DefaultShortFormTTL = 7 * 24 * time.Hour

// blockedReasons are the reasons Accepted is False for that no observation can change
// once every target ended: only a repair (a spec change) can. Every other reason is a
// wait (ResultsPending: results of ended Jobs are still being captured) or needs an
// operator's fix that keeps the results (RuleInvalid), so it is never final.
var blockedReasons = map[string]bool{
	v1alpha1.ReasonAssignmentInvalid: true,
	v1alpha1.ReasonTargetDeleted:     true,
	v1alpha1.ReasonShardsMissing:     true,
	v1alpha1.ReasonResultRejected:    true,
	v1alpha1.ReasonMissingResult:     true,
}

// batchFinished reports whether the account's batch reached a final verdict, and when.
// Final means the status judges the current spec (observedGeneration), every target's
// Job recorded its terminal condition or was deleted, or its owner ended without creating
// it (TargetStatus.OwnerEndedSeen), and the batch awaits no termination
// (account.AwaitsTermination), and Accepted is True or False for
// a reason of blockedReasons: the verdict can no longer change without a repair. It was
// reached at the latest of Accepted's last transition and the targets' ends, so that a
// verdict that stood False since the batch began counts from when its last Job ended.
func batchFinished(ba *v1alpha1.BatchAccount) (time.Time, bool) {
	st := &ba.Status
	accepted := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAccepted)
	if accepted == nil || st.ObservedGeneration != ba.Generation || len(st.Targets) == 0 {
		return time.Time{}, false
	}
	if accepted.Status != metav1.ConditionTrue && !(accepted.Status == metav1.ConditionFalse && blockedReasons[accepted.Reason]) {
		return time.Time{}, false
	}
	// A target may have recorded its end while the batch has not (a JobSet child that
	// Failed, which its JobSet may restart), also beside a target deleted before it
	// terminated, which Terminated names first.
	if account.AwaitsTermination(st) {
		return time.Time{}, false
	}
	// Accepted says the first thing wrong: a shard missing, or a target deleted, hides
	// results of the covered shards still being captured, or kept for a fixed rule.
	if resultsAwaited(st) {
		return time.Time{}, false
	}
	at := accepted.LastTransitionTime.Time
	for i := range st.Targets {
		t := &st.Targets[i]
		var ended *metav1.Time
		switch {
		case t.Terminal != "":
			ended = t.TerminalObservedAt
		case t.Deleted:
			ended = t.DeletedAt
		case t.OwnerEndedSeen:
			// A child its JobSet (or TrainJob) ended without creating: it never will, so
			// it ended with its owner, which the verdict followed.
		default:
			return time.Time{}, false
		}
		if ended != nil && ended.After(at) {
			at = ended.Time
		}
	}
	return at, true
}

// resultsAwaited reports whether ResultsAccepted waits for results of covered shards
// (covered shards with no result recorded yet, none of them missing or rejected; the
// signing key did not load) or keeps them for a fixed rule (RuleInvalid). ResultsAccepted
// too names the first thing wrong: a result rejected (ResultRejected) or missing
// (MissingResult) hides the results of other covered shards still to be recorded.
func resultsAwaited(st *v1alpha1.BatchAccountStatus) bool {
	c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted)
	if c == nil || c.Status != metav1.ConditionFalse {
		return false
	}
	switch c.Reason {
	case v1alpha1.ReasonRuleInvalid:
		return true
	case v1alpha1.ReasonResultsPending, v1alpha1.ReasonResultRejected, v1alpha1.ReasonMissingResult:
		listed, _ := indexset.Parse(st.Results.RejectedOrdinals)
		rejected := listed.Count()
		if st.Results.OrdinalsTruncated {
			// The list names only the lowest rejected shards: count them by the rejected
			// results, at least one each, so that a batch with nothing left to record is
			// still finished.
			rejected = max(rejected, int(st.Results.Rejected))
		}
		return int(st.Shards.Covered) > int(st.Shards.Accepted)+int(st.Results.Missing)+rejected
	}
	return false
}

// retention is how long the account is kept after its batch finished: its spec's
// ttlSecondsAfterFinished, else ShortFormTTL for a short-form account. false: kept.
func (r *Reconciler) retention(ba *v1alpha1.BatchAccount) (time.Duration, bool) {
	if ttl := ba.Spec.TTLSecondsAfterFinished; ttl != nil {
		return time.Duration(*ttl) * time.Second, true
	}
	if ba.Labels[v1alpha1.LabelShortFormOf] != "" && r.ShortFormTTL > 0 {
		return r.ShortFormTTL, true
	}
	return 0, false
}

// expiresIn is how long the account has left before retention deletes it; false while
// it is kept (no TTL, or its batch has not finished).
func (r *Reconciler) expiresIn(ba *v1alpha1.BatchAccount, now time.Time) (time.Duration, bool) {
	ttl, ok := r.retention(ba)
	if !ok || ba.DeletionTimestamp != nil {
		return 0, false
	}
	finished, ok := batchFinished(ba)
	if !ok {
		return 0, false
	}
	return finished.Add(ttl).Sub(now), true
}

// +kubebuilder:rbac:groups=batchledger.dev,resources=batchaccounts,verbs=delete

// collect deletes an account whose TTL after its batch finished has passed, or a
// short-form account left with nothing to keep (orphanedShortForm); why says which, for
// the log. The delete is conditional on the UID and resourceVersion read, so an account
// changed since (a repair appended, which may reopen its verdict) is judged again
// instead. Its ShardResults are owned by it: the garbage collector deletes them (the
// ledger policy lets the garbage collector, and only it, delete chunks). A Job still held
// for the account's record is released by the job-record controller, which holds Jobs
// only for live accounts.
func (r *Reconciler) collect(ctx context.Context, ba *v1alpha1.BatchAccount, why string) error {
	err := r.Delete(ctx, ba, client.Preconditions{UID: &ba.UID, ResourceVersion: &ba.ResourceVersion},
		client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	r.Metrics.accountCollected()
	ctrl.LoggerFrom(ctx).V(1).Info("account deleted: " + why)
	return nil
}

// orphanedShortForm reports whether ba is a short-form account (v1alpha1.LabelShortFormOf)
// with nothing to keep: neither its status as written nor st, the one just computed,
// holds anything of its batch (recordsNothing), and no object of its kind and name exists
// any more (read from the cache, then, for a Job the cache does not hold, from the API
// server).
// Such an account was made for an object deleted before the account observed any target
// of it (a JobSet or TrainJob deleted while Kueue kept it queued, a Job deleted at once):
// it can only ever wait for targets that will not come, and its TTL, counted from its
// batch's end, would never start. An account written by hand (no label) is kept: it may
// be written ahead of its Jobs. So is a short-form account whose object stands (a Job
// applied again under the name is followed by it), or whose kind's API is not served.
func (r *Reconciler) orphanedShortForm(ctx context.Context, ba *v1alpha1.BatchAccount, st *v1alpha1.BatchAccountStatus) (bool, error) {
	of := ba.Labels[v1alpha1.LabelShortFormOf]
	if of == "" || ba.DeletionTimestamp != nil || !recordsNothing(&ba.Status) || !recordsNothing(st) {
		return false, nil
	}
	i := slices.IndexFunc(all.Kinds, func(k kinds.Kind) bool { return k.Object().Kind == of })
	if i < 0 || !r.APIs.ServedKind(all.Kinds[i].Object()) {
		return false, nil
	}
	key := client.ObjectKeyFromObject(ba)
	readers := []client.Reader{r.Client}
	if _, job := all.Kinds[i].NewObject().(*batchv1.Job); job && r.APIReader != nil {
		// The cache holds only the Jobs labelled with a scope. It holds every JobSet and
		// TrainJob, and saw the object before its account was made from it (the
		// manager may not get them from the API server).
		readers = append(readers, r.APIReader)
	}
	for _, rd := range readers {
		switch err := rd.Get(ctx, key, all.Kinds[i].NewObject()); {
		case err == nil:
			return false, nil
		case apimeta.IsNoMatchError(err):
			return false, nil
		case !apierrors.IsNotFound(err):
			return false, err
		}
	}
	return true, nil
}

// recordsNothing reports whether st holds nothing of a batch: no target was ever
// observed (no identity, no record of a deletion, no owner seen ended), no superseded
// identity, no coverage and no result.
func recordsNothing(st *v1alpha1.BatchAccountStatus) bool {
	for i := range st.Targets {
		if t := &st.Targets[i]; t.UID != "" || t.Job != "" || t.Deleted || t.Terminal != "" || t.OwnerEndedSeen {
			return false
		}
	}
	return len(st.History) == 0 && st.HistoryDropped == 0 && st.Shards.Covered == 0 && st.Results.Recorded == 0
}
