package explanation

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
	"batchledger.dev/batchledger/pkg/indexset"
)

// conditionOrder is the order in which the conditions build the verdict.
var conditionOrder = []string{
	v1alpha1.ConditionAssignmentValid, v1alpha1.ConditionAdmitted, v1alpha1.ConditionShardsCovered,
	v1alpha1.ConditionTerminated, v1alpha1.ConditionResultsAccepted, v1alpha1.ConditionAccepted,
}

// DefaultMaxRows bounds the rows of each table, so that explaining a batch of 100,000
// shards prints a page, not a book.
const DefaultMaxRows = 20

// timestamp renders a time deterministically: RFC3339 in UTC.
func timestamp(t metav1.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func indexSet(s string) IndexSet {
	set, err := indexset.Parse(s)
	if err != nil {
		return IndexSet{Indexes: s}
	}
	return IndexSet{Indexes: set.String(), Count: set.Count()}
}

// BuildExplanation explains an account from its spec, its status and the recorded
// results of its ShardResults chunks. It reads nothing else: the status is the record.
// maxRows bounds each list that grows with the batch (<= 0 means DefaultMaxRows).
func BuildExplanation(ba *v1alpha1.BatchAccount, chunks []v1alpha1.ShardResults, maxRows int) Explanation {
	if maxRows <= 0 {
		maxRows = DefaultMaxRows
	}
	st := &ba.Status
	m := account.Compile(ba.Namespace, &ba.Spec)
	ex := Explanation{
		TypeMeta: metav1.TypeMeta{APIVersion: ExplanationGroupVersion.String(), Kind: KindExplanation},
		Account:  ba.Name, Namespace: ba.Namespace,
		Generation: ba.Generation, ObservedGeneration: st.ObservedGeneration,
		Revisions: Revisions{InputRevision: ba.Spec.InputRevision, ModelRevision: ba.Spec.ModelRevision},
		Release:   &Revisions{InputRevision: ba.Spec.InputRevision, ModelRevision: ba.Spec.ModelRevision},
		Verdict:   Verdict{Reason: "Unknown", Message: "the controller has not written a verdict yet"},
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAccepted); c != nil {
		ex.Verdict = Verdict{Accepted: c.Status == metav1.ConditionTrue, Reason: c.Reason, Message: c.Message}
		if st.ObservedGeneration < ba.Generation {
			// The condition judges a spec that no longer is: no verdict on this one yet,
			// as the controller tells the Workload.
			ex.Verdict = Verdict{Reason: v1alpha1.ReasonVerdictPending, Message: fmt.Sprintf(
				"the status judges spec generation %d, the spec is at generation %d: not judged yet", st.ObservedGeneration, ba.Generation)}
		}
	}
	targets := NewObservedTargets(st)
	for _, t := range m.Targets {
		ex.Jobs = append(ex.Jobs, explainTarget(m, t, targets.byKey[t.Key]))
	}
	ex.Shards = explainShards(m, st, targets, maxRows)
	ex.Results = explainResults(ba, m, targets, chunks, maxRows)
	for _, h := range st.History {
		done := h.CompletedIndexes
		if h.CompletedIndexesOmitted {
			done = "(omitted from the account status to keep it under the object size limit)"
		}
		ex.History = append(ex.History, HistoryEntry{
			Target: h.Target, Job: h.Job, UID: string(h.UID), RestartAttempt: h.RestartAttempt,
			CompletedIndexes: done, Terminal: h.Terminal, SupersededAt: timestamp(h.SupersededAt),
		})
	}
	for _, typ := range conditionOrder {
		if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
			ex.Conditions = append(ex.Conditions, ConditionEntry{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message, Since: timestamp(c.LastTransitionTime)})
		}
	}
	ex.StillNeeded = stillNeeded(ba, m, &ex)
	return ex
}

// ObservedTargets are the account's observed targets by key, with their failedIndexes
// parsed once: judging 100,000 missing shards must not parse them once per shard.
type ObservedTargets struct {
	byKey  map[string]*v1alpha1.TargetStatus
	failed map[string]indexset.Set
	// states caches, by key, the state of the indexes that did not fail: it is the same
	// for all of them, and saying it for each of 100,000 missing shards is not free.
	states map[string]identityState
}

// identityState is a state and whether it is final.
type identityState struct {
	state string
	final bool
}

// Status is the observed status of the target of key, nil before the controller observed it.
func (o ObservedTargets) Status(key string) *v1alpha1.TargetStatus { return o.byKey[key] }

// NewObservedTargets indexes the observed targets of st.
func NewObservedTargets(st *v1alpha1.BatchAccountStatus) ObservedTargets {
	o := ObservedTargets{byKey: make(map[string]*v1alpha1.TargetStatus, len(st.Targets)), failed: map[string]indexset.Set{}, states: map[string]identityState{}}
	for i := range st.Targets {
		ts := &st.Targets[i]
		o.byKey[ts.Name] = ts
		o.failed[ts.Name], _ = indexset.Parse(ts.FailedIndexes)
	}
	return o
}

// maxAssignedRuns bounds the "indexes → shards" lines of one target.
const maxAssignedRuns = 8

func explainTarget(m *account.Mapping, t account.Target, ts *v1alpha1.TargetStatus) JobExplanation {
	je := JobExplanation{Target: t.Key, Description: v1alpha1.TargetKey(t.Key).Describe(), Repair: true}
	var runs int
	for _, r := range m.Runs {
		if r.Target != t.Key {
			continue
		}
		je.Repair = je.Repair && r.Repair
		if runs++; runs > maxAssignedRuns {
			continue
		}
		line := fmt.Sprintf("%s %s → %s %s", output.Plural(r.Length, "index", "indexes"), indexset.Range(r.FirstIndex, r.FirstIndex+r.Length-1),
			output.Plural(r.Length, "shard", "shards"), m.Shards.Describe(indexset.Range(r.FirstShard, r.FirstShard+r.Length-1), 1))
		if r.Repair {
			line += " (repair)"
		}
		je.Assigned = append(je.Assigned, line)
	}
	if runs > maxAssignedRuns {
		je.Assigned = append(je.Assigned, fmt.Sprintf("… (+%d more runs)", runs-maxAssignedRuns))
	}
	if ts == nil {
		je.Terminal.Summary = "not observed by the controller yet"
		je.Attempts.Summary = je.Terminal.Summary
		return je
	}
	je.Found, je.Deleted = ts.Found, ts.Deleted
	je.Problems = ts.Problems
	if !ts.Found && !ts.Deleted {
		je.Terminal.Summary = "the Job does not exist (yet, or any more)"
		je.Attempts.Summary = "none: the Job does not exist"
		return je
	}
	je.Job, je.UID, je.RestartAttempt = ts.Job, string(ts.UID), ts.RestartAttempt
	je.Completions = ts.Completions
	je.Required, je.Completed, je.Failed = indexSet(ts.Required), indexSet(ts.CompletedIndexes), indexSet(ts.FailedIndexes)
	je.PodScope = podScope(ts.PodScope)
	je.SuccessPolicy = ts.SuccessPolicy
	if je.SuccessPolicy == "" {
		je.SuccessPolicy = fmt.Sprintf("none: every index %s must succeed", je.Required.Indexes)
	}
	req, _ := indexset.Parse(ts.Required)
	if ts.CompletedIndexesOmitted {
		// The controller left the list out to keep the status writable; the count and
		// the Job's own status still say it.
		je.Completed = IndexSet{Indexes: omittedIndexes, Count: int(ts.Succeeded)}
		je.NotCompleted = IndexSet{Indexes: omittedIndexes, Count: max(0, req.Count()-int(ts.Succeeded))}
		je.Attempts = Attempts{Successful: ts.SuccessfulAttempts, Indexes: int(ts.Succeeded), Repeated: ts.RepeatedIndexes,
			Summary: fmt.Sprintf("%d successful %s over %d %s (list omitted)", ts.SuccessfulAttempts,
				output.Plural(int(ts.SuccessfulAttempts), "attempt", "attempts"), ts.Succeeded, output.Plural(int(ts.Succeeded), "index", "indexes"))}
	} else {
		done, _ := indexset.Parse(ts.CompletedIndexes)
		je.NotCompleted = indexSet(req.Difference(done).String())
		je.Attempts = attemptsOf(ts, done)
	}
	je.Membership = ObservationPoint{ResourceVersion: ts.ObservedResourceVersion}
	je.Terminal = terminalOf(ts)
	if ts.Deleted {
		if ts.DeletedAt != nil {
			je.DeletedAt = timestamp(*ts.DeletedAt)
		}
		if ts.Terminal == "" {
			je.Terminal.Summary = "deleted before it terminated at " + je.DeletedAt + ": it can no longer complete; its record (what was observed) stands"
		} else {
			je.Terminal.Summary += "; the Job was deleted at " + je.DeletedAt + ", its record stands"
		}
	}
	je.Admissions, je.AdmissionsDropped = explainAdmissions(m, t.Key, ts), ts.AdmissionsDropped
	if w := ts.Workload; w != nil {
		je.Workload = &WorkloadExplanation{
			Name: w.Name, UID: string(w.UID), Admitted: w.Admitted, ClusterQueue: w.ClusterQueue,
			Cluster: w.Cluster, NominatedClusters: w.NominatedClusters,
			Flavors: w.Flavors, Evicted: w.Evicted, Finished: w.Finished, ResourceVersion: w.ObservedResourceVersion,
			Summary: workloadSummary(w),
		}
	}
	return je
}

// explainAdmissions lists an identity's admissions with the shards that ran under each.
func explainAdmissions(m *account.Mapping, key string, ts *v1alpha1.TargetStatus) []AdmissionExplanation {
	var out []AdmissionExplanation
	for _, a := range ts.Admissions {
		ae := AdmissionExplanation{
			Workload: a.Workload, ClusterQueue: a.ClusterQueue, Cluster: a.Cluster, Flavors: a.Flavors, AdmittedAt: timestamp(a.AdmittedAt),
			EvictionReason: a.EvictionReason, Completed: indexSet(a.CompletedIndexes),
		}
		if a.EvictedAt != nil {
			ae.EvictedAt = timestamp(*a.EvictedAt)
		}
		ae.Summary = "ClusterQueue " + admissionWhere(a) + ", admission first observed at " + ae.AdmittedAt
		if ae.EvictedAt != "" {
			ae.Summary += ", evicted at " + ae.EvictedAt
			if a.EvictionReason != "" {
				ae.Summary += " (" + a.EvictionReason + ")"
			}
		}
		switch {
		case a.CompletedIndexesOmitted:
			ae.Completed.Indexes = "(omitted from the account status to keep it under the object size limit)"
			ae.Summary += "; the indexes completed under it were left out for size"
		case ae.Completed.Count == 0:
			ae.Summary += "; no index completed under it"
		default:
			set, _ := indexset.Parse(a.CompletedIndexes)
			shards := m.ShardsOf(key, set, false).Union(m.ShardsOf(key, set, true))
			ae.Shards = m.Shards.Describe(shards, 8)
			ae.Summary += fmt.Sprintf("; %s %s completed under it (%s %s)", output.Plural(ae.Completed.Count, "index", "indexes"), ae.Completed.Indexes,
				output.Plural(shards.Count(), "shard", "shards"), ae.Shards)
		}
		out = append(out, ae)
	}
	return out
}

// admissionWhere says where an admission ran: "ml-team on main=nvidia.com/gpu:h100",
// then ", in worker cluster worker-a" for one MultiKueue dispatched.
func admissionWhere(a v1alpha1.Admission) string {
	s := a.ClusterQueue
	if len(a.Flavors) > 0 {
		s += " on " + strings.Join(a.Flavors, ", ")
	}
	if a.Cluster != "" {
		s += ", in worker cluster " + a.Cluster
	}
	return s
}

// ranOn names the admission under which index of ts completed, if the account knows it.
func ranOn(ts *v1alpha1.TargetStatus, index int) string {
	if ts == nil {
		return ""
	}
	for _, a := range ts.Admissions {
		if set, err := indexset.Parse(a.CompletedIndexes); err == nil && set.Contains(index) {
			return admissionWhere(a)
		}
	}
	return ""
}

// omittedIndexes stands for an index list the status leaves out (too large to keep).
const omittedIndexes = "(omitted from the account status to keep it under the object size limit; see the Job's status.completedIndexes)"

// braceLimit is the size up to which an index set is spelled out ("{0,1,2}") rather
// than written in interval form.
const braceLimit = 16

func attemptsOf(ts *v1alpha1.TargetStatus, done indexset.Set) Attempts {
	a := Attempts{Successful: ts.SuccessfulAttempts, Indexes: done.Count(), Repeated: ts.RepeatedIndexes}
	if a.Successful == 0 && a.Indexes == 0 {
		a.Summary = "no successful attempts yet"
		return a
	}
	set := done.String()
	if done.Count() <= braceLimit {
		var each []string
		for i := range done.All() {
			each = append(each, strconv.Itoa(i))
		}
		set = strings.Join(each, ",")
	}
	a.Summary = fmt.Sprintf("%d successful %s over %d %s {%s}", a.Successful, output.Plural(int(a.Successful), "attempt", "attempts"),
		a.Indexes, output.Plural(a.Indexes, "index", "indexes"), set)
	if a.Repeated != "" {
		a.Summary += "; repeated: " + a.Repeated
	} else {
		a.Summary += "; no index repeated"
	}
	return a
}

func terminalOf(ts *v1alpha1.TargetStatus) Terminal {
	t := Terminal{Condition: ts.Terminal, Reason: ts.TerminalReason, SuccessCriteriaMet: ts.SuccessCriteriaMet}
	if ts.TerminalObservedAt != nil {
		t.RecordedAt = timestamp(*ts.TerminalObservedAt)
	}
	switch {
	case ts.Terminal != "":
		t.Summary = ts.Terminal
		if ts.TerminalReason != "" {
			t.Summary += " (" + ts.TerminalReason + ")"
		}
		if t.RecordedAt != "" {
			t.Summary += " recorded at " + t.RecordedAt
		}
	case ts.SuccessCriteriaMet:
		t.Summary = "not terminated: SuccessCriteriaMet recorded, Complete not yet (pods still terminating)"
	default:
		t.Summary = "not terminated: no Complete or Failed condition recorded"
	}
	return t
}

func workloadSummary(w *v1alpha1.WorkloadObservation) string {
	var s string
	switch {
	case w.Evicted:
		s = "evicted (completed indexes are kept; the Job resumes when re-admitted)"
	case w.Admitted:
		s = "admitted"
	case w.Finished:
		s = "was admitted"
	default:
		s = "not admitted yet"
	}
	if w.ClusterQueue != "" {
		s += " to ClusterQueue " + w.ClusterQueue
	}
	if len(w.Flavors) > 0 {
		s += " on " + strings.Join(w.Flavors, ", ")
	}
	switch {
	case w.Cluster != "":
		s += ", in MultiKueue worker cluster " + w.Cluster
	case len(w.NominatedClusters) > 0:
		s += ", being dispatched by MultiKueue to " + strings.Join(w.NominatedClusters, ", ")
	}
	if w.Finished {
		s += "; Finished"
	}
	return s
}

// stateNotFound is the state of an identity whose Job does not exist.
const stateNotFound = "Job not found"

// state says where a (target, index) identity stands and whether it can still
// complete. An identity that cannot is final: only a further (repair) identity can cover
// its shard.
func (o ObservedTargets) state(key string, index int) (string, bool) {
	if o.failed[key].Contains(index) || o.states == nil {
		return o.stateOf(key, index)
	}
	if s, ok := o.states[key]; ok {
		return s.state, s.final
	}
	state, final := o.stateOf(key, index)
	o.states[key] = identityState{state, final}
	return state, final
}

// stateOf is state, not cached.
func (o ObservedTargets) stateOf(key string, index int) (string, bool) {
	ts := o.byKey[key]
	switch {
	case ts == nil:
		// The status predates the assignment: the controller will observe it.
		return "not observed by the controller yet", false
	case !ts.Found && !ts.Deleted:
		// Not final: the Job may be created yet (an account is best created before its
		// Jobs, and a repair names its Job before creating it).
		return stateNotFound, false
	}
	name := "job " + ts.Job
	deleted := ""
	if ts.Deleted {
		deleted = "; the Job was deleted"
	}
	switch {
	case o.failed[key].Contains(index):
		if ts.Terminal != "" {
			return fmt.Sprintf("index failed; %s %s (%s)%s", name, ts.Terminal, ts.TerminalReason, deleted), true
		}
		return "index failed" + deleted, true
	case ts.Terminal == account.TerminalFailed:
		return fmt.Sprintf("%s Failed (%s) without completing it%s", name, ts.TerminalReason, deleted), true
	case ts.Terminal == account.TerminalComplete:
		return fmt.Sprintf("%s Complete (%s) without completing it%s", name, ts.TerminalReason, deleted), true
	case ts.Deleted:
		return name + " deleted before completing it", true
	case ts.Workload != nil && ts.Workload.Evicted:
		return "not completed; evicted by Kueue, resumes when re-admitted", false
	case ts.Workload != nil && !ts.Workload.Admitted && !ts.Workload.Finished:
		return "not completed; waiting for Kueue admission", false
	}
	return "not completed yet; the Job is running", false
}

// Final reports whether the (target, index) identity can no longer complete.
func (o ObservedTargets) Final(key string, index int) bool {
	_, final := o.state(key, index)
	return final
}

// repairRuns are the runs of m's repair assignments, in spec order.
func repairRuns(m *account.Mapping) []account.Run {
	var out []account.Run
	for _, r := range m.Runs {
		if r.Repair {
			out = append(out, r)
		}
	}
	return out
}

// repairIdentities are the repair identities of runs (repairRuns) assigned shard
// ordinal o, in spec order.
func repairIdentities(m *account.Mapping, runs []account.Run, o int) []ShardIdentity {
	var out []ShardIdentity
	for _, r := range runs {
		if o >= r.FirstShard && o < r.FirstShard+r.Length {
			out = append(out, ShardIdentity{Shard: m.Shards.Name(o), Target: r.Target, Index: r.FirstIndex + o - r.FirstShard})
		}
	}
	return out
}

// WaitsFor lists the identities a missing shard waits for, with their states.
func WaitsFor(m *account.Mapping, targets ObservedTargets, o int) []Identity {
	return waitsFor(m, repairRuns(m), targets, o)
}

// waitsFor is WaitsFor with the repair runs of m found already.
func waitsFor(m *account.Mapping, repairs []account.Run, targets ObservedTargets, o int) []Identity {
	var out []Identity
	if key, idx, ok := m.IdentityOf(o); ok {
		state, final := targets.state(key, idx)
		out = append(out, Identity{Target: key, Index: idx, State: state, Final: final})
	}
	for _, r := range repairIdentities(m, repairs, o) {
		state, final := targets.state(r.Target, r.Index)
		out = append(out, Identity{Target: r.Target, Index: r.Index, Repair: true, State: state, Final: final})
	}
	return out
}

func explainShards(m *account.Mapping, st *v1alpha1.BatchAccountStatus, targets ObservedTargets, maxRows int) ShardsExplanation {
	se := ShardsExplanation{Total: st.Shards.Total, Covered: st.Shards.Covered, Accepted: st.Shards.Accepted, Missing: st.Shards.Missing}
	if len(st.Conditions) == 0 {
		// No status yet: the spec declares the shards; what is missing is not known.
		se.Total, se.NotJudged = int32(m.Shards.Count()), true
		return se
	}
	missing, _ := indexset.Parse(st.Shards.MissingOrdinals)
	repairs := repairRuns(m)
	missing.Each(func(o int) bool {
		if o >= m.Shards.Count() {
			return false
		}
		se.MissingShards = append(se.MissingShards, MissingShard{Shard: m.Shards.Name(o), Ordinal: o, WaitsFor: waitsFor(m, repairs, targets, o)})
		return len(se.MissingShards) < maxRows
	})
	se.MissingMore = missing.Count() - len(se.MissingShards)
	if st.Shards.MissingOrdinalsTruncated {
		// The status lists only the lowest missing ordinals; the counts are whole.
		se.MissingUnrecorded = max(0, int(st.Shards.Total-st.Shards.Covered)-missing.Count())
		se.MissingMore += se.MissingUnrecorded
	}
	for _, c := range st.Shards.CoveredBy {
		se.CoveredByRepair = append(se.CoveredByRepair, ShardIdentity{Shard: c.Shard, Target: c.Target, Index: int(c.Index)})
	}
	return se
}

func explainResults(ba *v1alpha1.BatchAccount, m *account.Mapping, targets ObservedTargets, chunks []v1alpha1.ShardResults, maxRows int) ResultsExplanation {
	sr := &ba.Status.Results
	re := ResultsExplanation{Rejected: sr.Rejected, Conflicts: sr.Conflicts, Missing: sr.Missing}
	// A status not yet judged against the spec may name ordinals the spec no longer
	// declares: they name no shard.
	declared := indexset.Range(0, m.Shards.Count()-1)
	// With OrdinalsTruncated the lists name only the lowest ordinals: results.missing
	// still counts them all; the rejected shards have no count, and their list was cut
	// unless the missing one is whole.
	missingWhole := true
	if set, err := indexset.Parse(sr.MissingOrdinals); err == nil {
		missingWhole = !sr.OrdinalsTruncated || set.Count() >= int(sr.Missing)
		if !set.Intersect(declared).IsEmpty() {
			re.MissingShards = describeCut(m, set.Intersect(declared), int(sr.Missing), "")
		}
	}
	if set, err := indexset.Parse(sr.RejectedOrdinals); err == nil && !set.Intersect(declared).IsEmpty() {
		cut := ""
		switch {
		case sr.OrdinalsTruncated && missingWhole:
			cut = "and more the status does not list"
		case sr.OrdinalsTruncated:
			cut = "and maybe more the status does not list"
		}
		re.RejectedShards = describeCut(m, set.Intersect(declared), -1, cut)
	}
	if a := ba.Spec.Acceptance; a != nil {
		re.Required, re.Rule = a.RequireResults, a.Rule
	}
	var accepted []v1alpha1.RecordedResult
	if !account.ResultsUnjudged(&ba.Status) {
		accepted = acceptedResults(ba, m, targets, chunks)
	}
	for i, r := range accepted {
		if i == maxRows {
			re.AcceptedMore = len(accepted) - maxRows
			break
		}
		re.Accepted = append(re.Accepted, AcceptedResult{
			Shard: m.Shards.Name(int(r.Ordinal)), Identity: fmt.Sprintf("%s index %d", v1alpha1.TargetKey(r.Target).Describe(), r.Index),
			Pod: r.Pod, Digest: r.Digest, Output: r.Output, Records: r.Records, Valid: r.Valid, RecordedAt: timestamp(r.RecordedAt),
			RanOn: ranOn(targets.byKey[r.Target], int(r.Index)), Cluster: r.Cluster,
		})
	}
	rej := ba.Status.Results.Rejections
	if n := len(rej); n > maxRows {
		re.RejectionsMore = n - maxRows
		rej = rej[n-maxRows:] // the newest, as the account keeps them
	}
	re.Rejections = rej
	return re
}

// acceptedResults picks, per shard, the result that stands among those of the chunks the
// account owns (as the manager counts only those): the first recorded result
// (in capture order) that decoded and met the rule, comes from the target's current
// identity, claims the shard its identity is assigned and carries the account's
// revisions. These are the rules account.Compute judges results by; the account status
// keeps only counts, so the plugin reads the chunks to name the results.
func acceptedResults(ba *v1alpha1.BatchAccount, m *account.Mapping, targets ObservedTargets, chunks []v1alpha1.ShardResults) []v1alpha1.RecordedResult {
	current := make(map[string]types.UID, len(targets.byKey))
	for key, ts := range targets.byKey {
		current[key] = ts.UID
	}
	// A chunk labelled for the account but not owned by it is no record of the manager's.
	standing := account.StandingResults(m, &ba.Spec, current, ba.Status.History, account.CompletedIndexes(&ba.Status), account.RecordedInOrder(v1alpha1.OwnedChunks(ba, chunks)))
	ordinals := slices.Sorted(maps.Keys(standing))
	out := make([]v1alpha1.RecordedResult, 0, len(ordinals))
	for _, o := range ordinals {
		out = append(out, standing[o].Recorded(o, standing[o].RecordedAt))
	}
	return out
}

// podScope says in words what the opt-in scope label of a Job's pod template means for its
// pods and their results.
func podScope(scope string) string {
	switch scope {
	case v1alpha1.ScopeResults:
		return "results: each succeeded pod is held until its result is recorded"
	case v1alpha1.ScopeCoverage:
		return "coverage: pods are counted, never held"
	}
	return "none: the Job started before an account named it, so its pods are not held; results are read only while its pods exist"
}

// describeCut names the shards of a status list compactly, as Shards.Describe does with
// 8 runs, but counts "+N more" from whole, the number the list stands for, when it is
// above the listed count (the list was cut to its lowest ordinals), and adds cut (what
// the list may leave out, "" for nothing) to it.
func describeCut(m *account.Mapping, listed indexset.Set, whole int, cut string) string {
	head := listed
	if ivs := listed.Intervals(); len(ivs) > 8 {
		head = indexset.FromIntervals(ivs[:8]...)
	}
	desc := m.Shards.Describe(head, 8)
	more := max(listed.Count(), whole) - head.Count()
	switch {
	case more > 0 && cut != "":
		desc += fmt.Sprintf(", … (+%d more, %s)", more, cut)
	case more > 0:
		desc += fmt.Sprintf(", … (+%d more)", more)
	case cut != "":
		desc += ", … (" + cut + ")"
	}
	return desc
}
