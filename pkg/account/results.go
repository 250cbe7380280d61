package account

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
)

// Result is one shard result a worker reported, already decoded and evaluated against
// the acceptance rule by pkg/acceptance. The account decides whether it stands.
type Result struct {
	// Target key and Job UID of the reporting pod: with Index, its completion identity.
	Target string
	JobUID types.UID
	Index  int
	// Pod that reported the result.
	Pod    string
	PodUID types.UID
	// Claim: what the result says it is.
	Shard         string
	InputRevision string
	ModelRevision string
	Digest        string
	// Output, Records and Valid are what the result reports of the shard's output; kept
	// with the result, not judged by the account.
	Output         string
	Records, Valid int64
	// RecordedAt is when the result was captured, for results read back from records.
	RecordedAt metav1.Time
	// Sequence is the result's recording sequence in its account (0 for results
	// recorded before sequences existed), for results read back from records.
	Sequence int64
	// RejectReason and RejectMessage are set when the result could not be decoded or
	// did not meet the acceptance rule.
	RejectReason  string
	RejectMessage string
	// RuleDigest is v1alpha1.ResultDigest of the acceptance rule the result was judged
	// under and the result container it was read from (v1alpha1.RuleDigest of the rule
	// alone, or "", for results recorded before: see
	// v1alpha1.Judging.Judged).
	RuleDigest string
	// Cluster is the MultiKueue worker cluster the result was recorded from ("": this
	// cluster). Provenance only: it plays no part in the verdict.
	Cluster string
}

// rejection is a rejected result of a shard (its ordinal), in words.
type rejection struct {
	ordinal int
	text    string
}

type resultsState struct {
	accepted indexset.Set
	// standing maps a shard ordinal to the position in the input of its standing result.
	standing map[int]int
	summary  v1alpha1.ResultSummary
	// unaccepted are the rejections of shards that have no accepted result, in
	// recording order.
	unaccepted []rejection
	// pendingRejections explain the rejections of the shards in rejected.
	pendingRejections []string
	// awaitingRejections explain the rejections of the shards in awaiting.
	awaitingRejections []string
	// uncompleted are the results, accepted or rejected, of indexes their identity has
	// not completed, of shards that have no accepted result: they decide nothing yet.
	uncompleted []string
	// reported are the ordinals with any result of their current identity.
	reported indexset.Set
	// rejected are the ordinals with a rejected result and no accepted one that no
	// further identity may still report for (undecided): they block the batch.
	rejected indexset.Set
	// awaiting are the ordinals with a rejected result and no accepted one that an
	// identity which reported nothing for them may still report for (a repair).
	awaiting indexset.Set
	// missing are covered ordinals whose result can no longer arrive.
	missing indexset.Set
	// ruleError is Input.RuleError: results were not judged.
	ruleError string
	// unreadable is Input.ResultsUnreadable: the previous results stand (summary), and
	// previous is the ResultsAccepted condition they were judged to; judgedOn is whether
	// every target still has the identity they were judged on (sameIdentities), and
	// sameSpec whether the spec judges as the one they were judged under did (the
	// previous status's JudgedSpec: only ttlSecondsAfterFinished changed).
	unreadable string
	previous   *metav1.Condition
	generation int64
	judgedOn   bool
	sameSpec   bool
}

// judgeResults verifies each result against its identity's assignment and the account's
// revisions. The first accepted result of a shard stands; a later one with another
// digest is a conflict, recorded, never silently dropped.
//
// A deleted identity's record is still its target's identity: its results stand. Covered
// shards of identities that can report nothing more (terminated with their pods listed,
// or deleted), with no result of theirs and no pod of the index left, are missing: a
// result can no longer arrive, so they are counted as MissingResult, not pending.
func judgeResults(m *Mapping, states []*targetState, mayCover indexset.Set, in Input) resultsState {
	prev := in.Previous
	if prev == nil {
		prev = &v1alpha1.BatchAccountStatus{}
	}
	unreadable := in.ResultsUnreadable
	if unreadable == "" && in.RuleError != "" && finalUnder(prev, in.Generation, m.JudgingDigest) {
		// The rule judged every result of an Accepted batch when it still compiled (an
		// upgrade since broke it): nothing new needs judging, and those verdicts stand.
		unreadable = "the acceptance rule does not compile in this controller: " + in.RuleError
	}
	if in.Spec.RequiresResults() && unreadable != "" {
		return resultsState{unreadable: unreadable, summary: *prev.Results.DeepCopy(), generation: in.Generation,
			previous: meta.FindStatusCondition(prev.Conditions, v1alpha1.ConditionResultsAccepted),
			judgedOn: sameIdentities(states, prev), sameSpec: prev.JudgedSpec != "" && prev.JudgedSpec == m.JudgingDigest()}
	}
	if in.Spec.RequiresResults() && in.RuleError != "" {
		// Nothing is judged, but the results stay on record: the count keeps the rule
		// they were judged under immutable (the CRD's transition rule).
		rs := resultsState{ruleError: in.RuleError}
		rs.summary.Recorded = int32(len(in.Results))
		return rs
	}
	current := map[string]types.UID{}
	for _, ts := range states {
		if uid := ts.uid(); uid != "" {
			current[ts.key] = uid
		}
	}
	// A result stands for its shard only once its identity completed the index: a pod
	// may succeed without the Job controller ever counting it (its Job deleted or ended
	// first), and its shard is then not covered by that identity.
	// A record whose completed indexes the status had to omit says nothing of them: its
	// results are judged as before the index check.
	completed := map[string]indexset.Set{}
	for _, ts := range states {
		if ts.uid() != "" && !ts.coverageLost {
			completed[ts.key] = ts.covered
		}
	}
	judging := in.Spec.Judging()
	rs := judge(m, in.Spec, judging, current, completed, in.Results)
	if !in.Spec.RequiresResults() {
		return rs
	}
	var final, held []indexset.Interval
	// A further identity of a shard (a repair's, the next attempt of a child) that may
	// still run its index (mayCover, coverageState) may still report the shard's result.
	open := mayCover.Intervals()
	for _, ts := range states {
		if ts.covered.IsEmpty() {
			continue
		}
		ivs := m.ShardsOfAny(ts.key, ts.covered).Intervals()
		if ts.final() {
			final = append(final, ivs...)
		} else {
			open = append(open, ivs...)
		}
		held = append(held, m.ShardsOfAny(ts.key, ts.reportingIndexes()).Intervals()...)
	}
	rs.missing = indexset.FromIntervals(final...).Difference(indexset.FromIntervals(open...)).
		Difference(rs.accepted).Difference(rs.reported).Difference(indexset.FromIntervals(held...))
	// A rejected result decides its shard only once no further identity may still report
	// one, as a missing result does: a repair that may still run may still be accepted.
	rs.awaiting = rs.rejected.Intersect(undecided(m, states, current, completed, in.Results, judging))
	rs.rejected = rs.rejected.Difference(rs.awaiting)
	for _, rj := range rs.unaccepted {
		list := &rs.pendingRejections
		if rs.awaiting.Contains(rj.ordinal) {
			list = &rs.awaitingRejections
		}
		if len(*list) < messageRunsLimit {
			*list = append(*list, rj.text)
		}
	}
	rs.summary.Missing = int32(rs.missing.Count())
	rs.summary.MissingOrdinals = rs.missing.String()
	rs.summary.RejectedOrdinals = rs.rejected.String()
	return rs
}

// sameIdentities reports whether every target has the identity it had in prev (its Job
// UID, or none): the identities prev's results were judged on. A result is its
// identity's, so a verdict on them says nothing of a next identity (a JobSet restart's,
// a Job created again under its name), nor of a target whose identity is gone.
func sameIdentities(states []*targetState, prev *v1alpha1.BatchAccountStatus) bool {
	was := make(map[string]types.UID, len(prev.Targets))
	for i := range prev.Targets {
		was[prev.Targets[i].Name] = prev.Targets[i].UID
	}
	for _, ts := range states {
		if ts.uid() != was[ts.key] {
			return false
		}
	}
	return true
}

// mayRun are the mapped indexes that an identity of the target may still run, and so
// report a result for: those of its current Job that neither failed nor can run any more
// (it ended, or is ending: SuccessCriteriaMet, FailureTarget), and every mapped index of
// a target whose next identity may still come (not created yet, a JobSet restart in
// progress, a failed child its owner may restart).
func (ts *targetState) mayRun() indexset.Set {
	switch {
	case ts.awaitsOwner():
		return ts.mapped
	case ts.found:
		if f := &ts.facts; f.terminal == "" && !f.criteriaMet && !f.failureTarget {
			return ts.mapped.Difference(f.failed)
		}
		return indexset.Set{}
	case ts.deleted || ts.neverCreated():
		return indexset.Set{}
	}
	return ts.mapped
}

// undecided are the shards an identity that has reported no result for them (current
// maps target keys to their identity's Job UID) may still report one for:
// targetState.mayReport. A result judged under another rule than the spec's, or read
// from another container (v1alpha1.Judging.Judged), is no record of its
// pod, which is judged again while it is held: it reports nothing here. Nor does a
// result of an index its identity has not completed (completed, as in judge; decides):
// the index may still run again and report one that stands.
func undecided(m *Mapping, states []*targetState, current map[string]types.UID, completed map[string]indexset.Set, results []Result, judging v1alpha1.Judging) indexset.Set {
	reported := map[string][]int{}
	for _, r := range results {
		if !judging.Judged(r.RuleDigest) || !decides(completed, r) {
			continue
		}
		if uid, ok := current[r.Target]; ok && uid == r.JobUID {
			reported[r.Target] = append(reported[r.Target], r.Index)
		}
	}
	var ivs []indexset.Interval
	for _, ts := range states {
		if may := ts.mayReport(indexset.Of(reported[ts.key]...)); !may.IsEmpty() {
			ivs = append(ivs, m.ShardsOfAny(ts.key, may).Intervals()...)
		}
	}
	return indexset.FromIntervals(ivs...)
}

// mayReport are the mapped indexes of the target for which an identity that has not
// reported a result for them (reported are the indexes its current identity reported)
// may still report one: every index a next identity may run (mayRun: the target's Job
// not created yet, a restart in progress, a child its owner may restart); of the
// current identity, the indexes it may still run and has not completed, and those it
// completed without a result while a pod of theirs may still report one (its pods were
// not listed, or one is listed).
func (ts *targetState) mayReport(reported indexset.Set) indexset.Set {
	if ts.awaitsOwner() || !ts.found && !ts.deleted {
		return ts.mayRun()
	}
	may := ts.mayRun().Difference(ts.facts.completed)
	if ts.found && !ts.obs.PodsListed {
		may = may.Union(ts.covered)
	}
	return may.Union(ts.reportingIndexes()).Difference(reported)
}

// reportingIndexes are the mapped indexes of the target that a listed successful pod
// with a result stands for: the pod is held until its result is recorded, so the result
// may still come. So may the result of a listed unfinished pod of an index the identity
// completed (Observation.Unfinished): the Job controller counted it succeeded.
func (ts *targetState) reportingIndexes() indexset.Set {
	var out []int
	for _, p := range ts.obs.SuccessfulPods {
		if !p.NoResult && ts.mapped.Contains(p.Index) {
			out = append(out, p.Index)
		}
	}
	return indexset.Of(out...).Union(indexset.Of(ts.obs.Unfinished...).Intersect(ts.covered))
}

// StandingResults returns, per shard ordinal, the result that stands for the shard: the
// first result, in recording order, of the shard's current identity (current maps target
// keys to Job UIDs) that claims the assigned shard on the account's revisions and passed
// decoding and the rule, that no other target reaches, currently or through its
// superseded identities in history (DuplicateIndex), and whose index its identity
// completed (completed, by target key: CompletedIndexes). It is the rule Compute
// applies, for readers of recorded results.
func StandingResults(m *Mapping, spec *v1alpha1.BatchAccountSpec, current map[string]types.UID, history []v1alpha1.SupersededIdentity, completed map[string]indexset.Set, results []Result) map[int]Result {
	// A completion identity two targets reach stands for no shard, as in Compute.
	results = sharedOfRecorded(m, current, history).rejectResults(results)
	rs := judge(m, spec, spec.Judging(), current, completed, results)
	out := make(map[int]Result, len(rs.standing))
	for o, i := range rs.standing {
		out[o] = results[i]
	}
	return out
}

// CompletedIndexes are, by target key, the indexes each target's identity in st
// completed, as the status recorded them (a target whose list the status omitted has
// none: StandingResults then checks none of its results' indexes).
func CompletedIndexes(st *v1alpha1.BatchAccountStatus) map[string]indexset.Set {
	out := make(map[string]indexset.Set, len(st.Targets))
	for _, ts := range st.Targets {
		if ts.UID != "" && !ts.CompletedIndexesOmitted {
			out[ts.Name], _ = indexset.ParseJobStatus(ts.CompletedIndexes, int(ts.Completions))
		}
	}
	return out
}

// judge decides which results stand. completed maps target keys to the mapped indexes
// their current identity completed; a result whose index is not among them stands for
// no shard, and if rejected does not reject it either (it counts as a rejected result,
// but its shard waits: the index may run again), but for a DuplicateIndex rejection,
// which decides its shard whatever the count (decides). The results of a target
// completed has no key for are not checked so.
func judge(m *Mapping, spec *v1alpha1.BatchAccountSpec, judging v1alpha1.Judging, current map[string]types.UID, completed map[string]indexset.Set, results []Result) resultsState {
	rs := resultsState{standing: map[int]int{}}
	digests := map[int]string{}
	var rejected, uncompleted []rejection
	var acceptedOrdinals, reported []int
	rs.summary.Recorded = int32(len(results))
	reject := func(r Result, ordinal int, reason, msg string) {
		rs.summary.Rejected++
		if reason == v1alpha1.RejectionConflict {
			rs.summary.Rejected--
			rs.summary.Conflicts++
		}
		rec := v1alpha1.ResultRejection{Pod: r.Pod, Target: r.Target, Index: int32(r.Index), Shard: r.Shard, Reason: reason, Message: msg}
		rs.summary.Rejections = append(rs.summary.Rejections, rec)
		if n := len(rs.summary.Rejections); n > maxRejections {
			rs.summary.Rejections = rs.summary.Rejections[n-maxRejections:]
		}
		if ordinal < 0 {
			return
		}
		rj := rejection{ordinal, fmt.Sprintf("%s (%s): %s", m.Shards.Name(ordinal), reason, msg)}
		if !decides(completed, r) {
			// Like an accepted result, a rejected one decides its shard only once its
			// identity completed the index: until then the index may run again (a pod
			// deleted while terminating) and report a result that stands.
			uncompleted = append(uncompleted, rj)
			return
		}
		rejected = append(rejected, rj)
	}
	for i, r := range results {
		who := fmt.Sprintf("pod %s (%s index %d)", r.Pod, v1alpha1.TargetKey(r.Target).Describe(), r.Index)
		ordinal, assigned := m.ShardOf(r.Target, r.Index)
		if !assigned {
			reject(r, -1, v1alpha1.RejectionUnassignedIdentity, who+" is assigned no shard")
			continue
		}
		assignedName := m.Shards.Name(ordinal)
		if r.JobUID == "" {
			// No Job UID, no completion identity: it would otherwise pass for the
			// identity of a target whose Job is not observed (no UID either).
			reject(r, -1, v1alpha1.RejectionStaleIdentity, who+" names no Job UID, so it is no completion identity the account follows")
			continue
		}
		if current[r.Target] != r.JobUID {
			// Checked first: a superseded identity's result, accepted or rejected, stands
			// for no shard, which the current identity may still run.
			reject(r, -1, v1alpha1.RejectionStaleIdentity, fmt.Sprintf("%s belongs to Job UID %s, not the target's current identity", who, r.JobUID))
			continue
		}
		if decides(completed, r) {
			// A result of an index its identity did not complete reports nothing that
			// decides the shard, accepted or rejected: its result may still be missing.
			reported = append(reported, ordinal)
		}
		switch {
		case !judging.Judged(r.RuleDigest):
			// Its verdict, accepted or rejected, was the other rule's, or another
			// container's message: neither stands.
			reject(r, ordinal, v1alpha1.RejectionRuleChanged, fmt.Sprintf("%s was judged under another acceptance rule or read from another result container (digest %s), not the spec's (digest %s)", who, r.RuleDigest, judging.Digest()))
		case r.RejectReason != "":
			reject(r, ordinal, r.RejectReason, who+": "+r.RejectMessage)
		case r.Shard != assignedName:
			reject(r, ordinal, v1alpha1.RejectionForgedClaim, fmt.Sprintf("%s claims shard %q but its identity is assigned shard %s", who, r.Shard, assignedName))
		case r.InputRevision != spec.InputRevision:
			reject(r, ordinal, v1alpha1.RejectionRevisionMismatch, fmt.Sprintf("shard %s result of %s has inputRevision %q, the account requires %q", assignedName, who, r.InputRevision, spec.InputRevision))
		case r.ModelRevision != spec.ModelRevision:
			reject(r, ordinal, v1alpha1.RejectionRevisionMismatch, fmt.Sprintf("shard %s result of %s has modelRevision %q, the account requires %q", assignedName, who, r.ModelRevision, spec.ModelRevision))
		case !CompletedIndex(completed, r.Target, r.Index):
			// Not a result of its identity's completion: the Job controller did not count
			// the index (yet), so the shard is not covered by it. It reported nothing
			// that stands, so the shard's result may still be missing.
			uncompleted = append(uncompleted, rejection{ordinal, fmt.Sprintf("%s (%s)", assignedName, who)})
		default:
			if first, ok := digests[ordinal]; ok {
				if first != r.Digest {
					reject(r, -1, v1alpha1.RejectionConflict, fmt.Sprintf("shard %s already has an accepted result with digest %q; %s reports digest %q", assignedName, first, who, r.Digest))
				}
				continue
			}
			digests[ordinal] = r.Digest
			rs.standing[ordinal] = i
			acceptedOrdinals = append(acceptedOrdinals, ordinal)
		}
	}
	rs.accepted = indexset.Of(acceptedOrdinals...)
	rs.reported = indexset.Of(reported...)
	var rejectedOrdinals []int
	for _, rj := range rejected {
		if _, ok := digests[rj.ordinal]; !ok {
			rejectedOrdinals = append(rejectedOrdinals, rj.ordinal)
			rs.unaccepted = append(rs.unaccepted, rj)
		}
	}
	rs.rejected = indexset.Of(rejectedOrdinals...)
	for _, u := range uncompleted {
		if _, ok := digests[u.ordinal]; !ok && len(rs.uncompleted) < messageRunsLimit {
			rs.uncompleted = append(rs.uncompleted, u.text)
		}
	}
	return rs
}

// FromRecorded is the Result a recorded (captured) result stands for.
func FromRecorded(r v1alpha1.RecordedResult) Result {
	return Result{
		Target: r.Target, JobUID: r.JobUID, Index: int(r.Index), Pod: r.Pod, PodUID: r.PodUID,
		Shard: r.Shard, InputRevision: r.InputRevision, ModelRevision: r.ModelRevision, Digest: r.Digest,
		Output: r.Output, Records: r.Records, Valid: r.Valid,
		RejectReason: r.RejectReason, RejectMessage: r.RejectMessage, RecordedAt: r.RecordedAt, Sequence: r.Sequence,
		RuleDigest: r.RuleDigest, Cluster: r.Cluster,
	}
}

// Recorded is the record of a result captured at at for shard ordinal (-1: unassigned).
func (r Result) Recorded(ordinal int, at metav1.Time) v1alpha1.RecordedResult {
	return v1alpha1.RecordedResult{
		Ordinal: int32(ordinal), Shard: r.Shard, Target: r.Target, JobUID: r.JobUID, Index: int32(r.Index),
		Pod: r.Pod, PodUID: r.PodUID, InputRevision: r.InputRevision, ModelRevision: r.ModelRevision,
		Output: r.Output, Digest: r.Digest, Records: r.Records, Valid: r.Valid,
		RejectReason: r.RejectReason, RejectMessage: r.RejectMessage, RecordedAt: at, Sequence: r.Sequence,
		RuleDigest: r.RuleDigest, Cluster: r.Cluster,
	}
}

// RecordedInOrder flattens recorded results in recording order, the order in which they
// are judged (the first accepted result of a shard stands). The order is the results'
// Sequence, which the controller assigns monotonically per account; results recorded
// before sequences existed (Sequence 0) come first, among themselves by RecordedAt (one
// second resolution) and then Pod, as they always were.
func RecordedInOrder(chunks []v1alpha1.ShardResults) []Result {
	var all []v1alpha1.RecordedResult
	for _, c := range chunks {
		all = append(all, c.Results...)
	}
	slices.SortStableFunc(all, func(a, b v1alpha1.RecordedResult) int {
		return cmp.Or(cmp.Compare(a.Sequence, b.Sequence), a.RecordedAt.Compare(b.RecordedAt.Time), cmp.Compare(a.Pod, b.Pod))
	})
	out := make([]Result, len(all))
	for i, r := range all {
		out[i] = FromRecorded(r)
	}
	return out
}

// decides reports whether r, a result of its target's current identity, may decide its
// shard, accepted or rejected: its identity completed the index (CompletedIndex), or it
// is of an identity two targets share (DuplicateIndex), which the mapping decided: the
// account took that identity's coverage out of completed though the Job counted it.
func decides(completed map[string]indexset.Set, r Result) bool {
	return r.RejectReason == v1alpha1.RejectionDuplicateIndex || CompletedIndex(completed, r.Target, r.Index)
}

// CompletedIndex reports whether target's identity completed index, as far as completed
// (CompletedIndexes, or judge's own) says: a target it has no key for (one whose list a
// status omitted) is not checked.
func CompletedIndex(completed map[string]indexset.Set, target string, index int) bool {
	set, known := completed[target]
	return !known || set.Contains(index)
}
