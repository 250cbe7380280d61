package watch

import (
	"fmt"
	"slices"
	"strings"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/explanation"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
	"batchledger.dev/batchledger/pkg/indexset"
)

// watchOutcome is where a batch stands for `watch`.
type watchOutcome int

const (
	outcomePending watchOutcome = iota
	outcomeAccepted
	outcomeBlocked
)

// jobProgress is one target's progress: its mapped indexes that completed.
type jobProgress struct {
	Name     string
	Done     int
	Total    int
	Terminal string
	Found    bool
	// Deleted: the Job was deleted after it was observed; its record stands.
	Deleted bool
	// Observed is false until the controller wrote the target's status.
	Observed bool
}

// batchProgress is what a frame shows of one account; it depends only on the account.
type batchProgress struct {
	Namespace, Name string
	Total, Covered  int
	Accepted        int
	RequireResults  bool
	Rejected        int
	Conflicts       int
	// Jobs are the targets, slowest (least done) first.
	Jobs []jobProgress
	// Reason and Message are the Accepted condition's.
	Reason, Message string
	Needed          []string
	Outcome         watchOutcome
	// Blocked says why the batch can no longer be accepted without repair.
	Blocked string
	// Stale is true while the status describes an older spec generation.
	Stale bool
}

// progressOf derives a frame's view of an account from its spec and status.
func progressOf(ba *v1alpha1.BatchAccount) batchProgress {
	st := &ba.Status
	ex := explanation.BuildExplanation(ba, nil, explanation.DefaultMaxRows)
	p := batchProgress{
		Namespace: ba.Namespace, Name: ba.Name,
		Total: int(st.Shards.Total), Covered: int(st.Shards.Covered), Accepted: int(st.Shards.Accepted),
		RequireResults: ba.Spec.Acceptance != nil && ba.Spec.Acceptance.RequireResults,
		Rejected:       int(st.Results.Rejected), Conflicts: int(st.Results.Conflicts),
		Reason: ex.Verdict.Reason, Message: ex.Verdict.Message, Needed: ex.StillNeeded,
		Stale: len(st.Conditions) > 0 && st.ObservedGeneration < ba.Generation,
	}
	m := account.Compile(ba.Namespace, &ba.Spec)
	if p.Total == 0 {
		p.Total = m.Shards.Count()
	}
	byKey := map[string]*v1alpha1.TargetStatus{}
	for i := range st.Targets {
		byKey[st.Targets[i].Name] = &st.Targets[i]
	}
	for _, t := range m.Targets {
		jp := jobProgress{Name: v1alpha1.TargetKey(t.Key).Describe(), Total: t.Indexes.Count()}
		if ts := byKey[t.Key]; ts != nil {
			jp.Observed, jp.Found, jp.Deleted, jp.Terminal = true, ts.Found, ts.Deleted, ts.Terminal
			if ts.CompletedIndexesOmitted {
				jp.Done = min(int(ts.Succeeded), jp.Total)
			} else if done, err := indexset.Parse(ts.CompletedIndexes); err == nil {
				jp.Done = done.Intersect(t.Indexes).Count()
			}
		}
		p.Jobs = append(p.Jobs, jp)
	}
	slices.SortStableFunc(p.Jobs, func(a, b jobProgress) int {
		// Least done first; a larger remainder first among equals, then by name.
		if c := compareFraction(a, b); c != 0 {
			return c
		}
		if c := (b.Total - b.Done) - (a.Total - a.Done); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	p.Outcome, p.Blocked = outcomeOf(ba, &ex)
	return p
}

// compareFraction orders jobs by done/total without floating point.
func compareFraction(a, b jobProgress) int {
	l, r := int64(a.Done)*int64(max(b.Total, 1)), int64(b.Done)*int64(max(a.Total, 1))
	switch {
	case l < r:
		return -1
	case l > r:
		return 1
	}
	return 0
}

// outcomeOf decides when `watch` ends. Accepted ends it with success. It is blocked —
// no longer acceptable without a repair or a spec change — when the mapping is invalid,
// when a missing shard has no identity left that can complete (its Job failed, lost the
// index, terminated without it or was deleted; not a JobSet or TrainJob child while its
// owner may still restart it), when a target was deleted before it
// terminated, when a result was rejected, or when a covered shard's result can no longer
// arrive (MissingResult). A status that
// describes an older spec generation decides nothing: the controller has yet to judge
// the new spec (after a repair was appended, for one).
func outcomeOf(ba *v1alpha1.BatchAccount, ex *explanation.Explanation) (watchOutcome, string) {
	st := &ba.Status
	if len(st.Conditions) == 0 || st.ObservedGeneration < ba.Generation {
		return outcomePending, ""
	}
	if ex.Verdict.Accepted {
		return outcomeAccepted, ""
	}
	blocker := account.Blocker(st)
	if blocker != nil && blocker.Type == v1alpha1.ConditionAssignmentValid {
		return outcomeBlocked, "the assignment mapping is invalid (" + blocker.Reason + ")"
	}
	// Every missing shard the status lists, not only the rows an explanation shows: a
	// lost shard behind many pending ones blocks the batch as much.
	m := account.Compile(ba.Namespace, &ba.Spec)
	targets := explanation.NewObservedTargets(st)
	missing, _ := indexset.Parse(st.Shards.MissingOrdinals)
	// While the controller awaits the termination of a JobSet or TrainJob child that
	// ended, its owner runs and may restart it under a new identity: no repair is needed
	// for its shards yet. (The status says which targets are awaited only in words, so
	// children count as restartable while any target is awaited.)
	childrenMayRestart := account.AwaitsTermination(st)
	var lost []explanation.MissingShard
	missing.Each(func(o int) bool {
		if o >= m.Shards.Count() {
			return false
		}
		if key, idx, ok := m.IdentityOf(o); ok && !targets.Final(key, idx) {
			return true // its original identity may still complete
		}
		ids := explanation.WaitsFor(m, targets, o)
		final := len(ids) > 0
		for _, id := range ids {
			final = final && id.Final
		}
		if final && childrenMayRestart && v1alpha1.TargetKey(ids[0].Target).IsChild() {
			return true
		}
		if final {
			lost = append(lost, explanation.MissingShard{Shard: m.Shards.Name(o), Ordinal: o, WaitsFor: ids})
		}
		return true
	})
	if len(lost) > 0 {
		first := lost[0].WaitsFor[len(lost[0].WaitsFor)-1]
		return outcomeBlocked, fmt.Sprintf("%s can no longer be covered (%s index %d: %s)",
			explanation.ShardNames(lost), v1alpha1.TargetKey(first.Target).Describe(), first.Index, first.State)
	}
	switch {
	case blocker == nil:
		return outcomePending, ""
	case blocker.Reason == v1alpha1.ReasonTargetDeleted:
		return outcomeBlocked, "a target was deleted before it terminated (TargetDeleted)"
	case blocker.Reason == v1alpha1.ReasonResultRejected:
		// The identities that reported them completed: they cannot report again.
		return outcomeBlocked, fmt.Sprintf("a shard result was rejected (%s)", blocker.Reason)
	default: // MissingResult
		return outcomeBlocked, fmt.Sprintf("no result can arrive for %d covered %s (%s)", st.Results.Missing, output.Plural(int(st.Results.Missing), "shard", "shards"), blocker.Reason)
	}
}
