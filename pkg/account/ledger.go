package account

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/identity"
	"batchledger.dev/batchledger/pkg/indexset"
)

// The ledger outlives its Jobs: what was observed of an identity is its record, and a
// deleted Job changes neither coverage, nor results, nor the verdict.

// Bounds of the durable parts of a target's record.
const (
	// MaxAdmissions bounds the admissions kept per identity (the first and the newest
	// are kept, those between them counted); fewer when the account has many targets
	// (limitsFor).
	MaxAdmissions = 16
	// MaxConditionMessage bounds every condition message the account writes, far under
	// the API's 32,768 bytes, so that a Workload-facing copy with its prefix fits too.
	MaxConditionMessage = 4096
	// messageNamesLimit bounds the names listed in one sentence of a message.
	messageNamesLimit = 5
)

// keepsRecord says whether a target that is not found now keeps its previous identity
// as a record. A Job observed once is kept, whether or not it terminated: its deletion
// is an event about the record, not a new identity. A JobSet child that is gone before
// it terminated is a restart in progress (the JobSet deletes and recreates its
// children): it is superseded into history as before — unless its JobSet ended
// (Observation.OwnerEnded), which recreates nothing. So is the child a Job target names
// by its Job name, while its owner is known to run (Observation.ChildOwner; restarting
// reports its end). A child that terminated keeps its record (a JobSet deleted by its
// TTL, or a cascade), but for one a MultiKueue re-dispatch superseded
// (Observation.Redispatched).
func keepsRecord(t Target, prev *v1alpha1.TargetStatus, obs Observation) bool {
	if prev == nil || prev.UID == "" || obs.Redispatched {
		return false
	}
	if prev.Deleted || !restarting(t, obs) {
		return true
	}
	return prev.Terminal != ""
}

// restarting reports whether the owner of the target's Job may still create it again
// under its name: for a child target, while its owner has not ended
// (Observation.OwnerEnded); for a Job target, while the Job was a child (of a JobSet, of
// the TrainJob above one) whose owner is known to run (Observation.ChildOwner). A Job
// target whose owner is not known (the Job is forgotten) is taken as no child: its
// deletion stands, as before any owner was known.
func restarting(t Target, obs Observation) bool {
	if t.Ref.IsChild() {
		return obs.OwnerEnded == ""
	}
	return obs.ChildOwner == OwnerRunning
}

// endedRecord is the record a target stands for once its owner ended without recreating
// its Job (restarting no longer holds): the identity a restart in progress had
// superseded into history (the last one of the target, if it never terminated), as a
// target status, and that entry's position in history. nil when there is none.
func endedRecord(t Target, obs Observation, history []v1alpha1.SupersededIdentity) (*v1alpha1.TargetStatus, int) {
	if restarting(t, obs) {
		return nil, -1
	}
	for i := len(history) - 1; i >= 0; i-- {
		h := history[i]
		if h.Target != t.Key {
			continue
		}
		if h.Terminal != "" {
			return nil, -1
		}
		// Its shape too, which the mapping onto it is checked against (fromRecord): an
		// entry that does not keep its required indexes (left out for size, or written
		// before they were kept) has them unchecked, as before, but for RequiredUnmapped,
		// which fromRecord reads as it does a target's.
		return &v1alpha1.TargetStatus{
			Name: h.Target, Job: h.Job, UID: h.UID, RestartAttempt: h.RestartAttempt, Completions: historyCompletions(&h, t.Indexes),
			CompletedIndexes: h.CompletedIndexes, CompletedIndexesOmitted: h.CompletedIndexesOmitted,
			NotIndexed: h.NotIndexed, Required: h.Required, RequiredUnmapped: h.RequiredUnmapped,
			Deleted: true, DeletedAt: h.SupersededAt.DeepCopy(),
		}, i
	}
	return nil, -1
}

// historyCompletions is the completions a superseded identity's indexes are read
// against once it is a record again (endedRecord), given the indexes mapped onto its
// target.
func historyCompletions(h *v1alpha1.SupersededIdentity, mapped indexset.Set) int32 {
	if h.Completions == 0 {
		// Recorded before history kept completions: read the indexes against the
		// mapping's, which is all coverage reads of them.
		if max, ok := mapped.Max(); ok {
			return int32(max + 1)
		}
	}
	return h.Completions
}

// historyRequiredNeeded marks, by position in st.History, the superseded identities a
// target still needs (pendingHistory) whose required indexes the mapping onto the target
// does not all assign. The record endedRecord makes of one reads no required indexes
// back once they are left out (history keeps no successPolicy): nothing but the list,
// or RequiredUnmapped in its place, says the mapping leaves one unassigned
// (UnmappedIndexes) if the JobSet ends.
func historyRequiredNeeded(st *v1alpha1.BatchAccountStatus, states []*targetState) []bool {
	mapped := make(map[string]indexset.Set, len(states))
	for _, ts := range states {
		mapped[ts.key] = ts.mapped
	}
	pending := pendingHistory(st)
	out := make([]bool, len(st.History))
	for i := range st.History {
		h := &st.History[i]
		m, ok := mapped[h.Target]
		if !pending[i] || !ok || h.NotIndexed {
			continue
		}
		required, _ := indexset.ParseJobStatus(h.Required, int(historyCompletions(h, m)))
		out[i] = !required.Difference(m).IsEmpty()
	}
	return out
}

// requiredKept marks, by position, the targets (requiredNeeded) and the superseded
// identities (historyRequiredNeeded) whose required indexes a record could not read back
// once left out: those left out are flagged RequiredUnmapped.
type requiredKept struct {
	targets, history []bool
}

func (k requiredKept) target(i int) bool { return i < len(k.targets) && k.targets[i] }
func (k requiredKept) entry(i int) bool  { return i < len(k.history) && k.history[i] }

// revivedIdentity is the position in history of job's identity when it is the one target
// t had superseded last and the previous status holds none: a child whose Job or worker
// record was missing for a while, taken for a restart in progress, found again (or
// given as deleted at its owner's end, unseenRecord). -1 when job is of another identity.
func revivedIdentity(t Target, prev *v1alpha1.TargetStatus, job *identity.Job, history []v1alpha1.SupersededIdentity) int {
	if job == nil || prev != nil && prev.UID != "" {
		return -1
	}
	for i := len(history) - 1; i >= 0; i-- {
		if h := history[i]; h.Target == t.Key {
			if h.UID == job.UID {
				return i
			}
			return -1
		}
	}
	return -1
}

// finalRecord is the record of a target whose Job is gone: its previous status, brought up
// to the Job's last state when the controller saw the deletion (Observation.DeletedJob)
// of that same identity before the status recorded its end. A child a MultiKueue worker
// recorded is given as deleted for as long as the record lives (its owner ended), and
// the worker role may still record what the Job did while it was deleted: a record that
// has not terminated keeps following that last state, and keeps when it was deleted.
func finalRecord(t Target, prev *v1alpha1.TargetStatus, obs Observation, now metav1.Time, lim limits) *v1alpha1.TargetStatus {
	job := obs.DeletedJob
	if job == nil || job.UID != prev.UID || prev.Terminal != "" || prev.Deleted && !t.Ref.IsChild() {
		return prev
	}
	last := targetStateOf(t, Observation{Job: job, RestartAttempt: prev.RestartAttempt, Workload: prev.Workload})
	s, _, _ := targetStatus(last, prev, now, lim)
	s.Problems, s.ProblemsDropped = prev.Problems, prev.ProblemsDropped
	s.DeletedAt = prev.DeletedAt.DeepCopy()
	return &s
}

// unseenRecord is, for a child target whose owner ended (Observation.OwnerEnded) and
// whose Job is given as deleted (Observation.DeletedJob) under an identity the previous
// status does not hold, that Job's record, and the previous identity it supersedes (nil
// when there was none): the child ran, under another identity than the one observed
// before (a MultiKueue worker's copy of its JobSet) or unobserved, and was deleted when its
// owner ended. nil when the target is no such child.
func unseenRecord(t Target, prev *v1alpha1.TargetStatus, obs Observation, now metav1.Time, lim limits) (*v1alpha1.TargetStatus, *v1alpha1.SupersededIdentity) {
	job := obs.DeletedJob
	if !t.Ref.IsChild() || obs.OwnerEnded == "" || job == nil || prev != nil && prev.UID == job.UID {
		return nil, nil
	}
	last := targetStateOf(t, Observation{Job: job, RestartAttempt: obs.RestartAttempt, Workload: obs.Workload})
	s, superseded, _ := targetStatus(last, prev, now, lim)
	return &s, superseded
}

// fromRecord makes ts stand for its previous identity's record, with the problems of
// the mapping onto it that the Job had (shapeProblems).
func (ts *targetState) fromRecord(rec *v1alpha1.TargetStatus) {
	ts.deleted, ts.record = true, rec
	f := &ts.facts
	f.indexed = !rec.NotIndexed
	f.completions = int(rec.Completions)
	f.successPolicy = rec.SuccessPolicy
	f.terminal, f.reason = rec.Terminal, rec.TerminalReason
	f.terminalAt = rec.TerminalObservedAt
	f.criteriaMet = rec.SuccessCriteriaMet
	switch {
	case !rec.CompletedIndexesOmitted:
		f.completed, _ = indexset.ParseJobStatus(rec.CompletedIndexes, f.completions)
	case rec.Terminal == TerminalComplete && rec.SuccessPolicy == "" && f.completions > 0:
		// Complete without a successPolicy means every index 0..completions-1 succeeded.
		f.completed = indexset.Range(0, f.completions-1)
	default:
		ts.coverageLost = true
	}
	f.failed, _ = indexset.ParseJobStatus(rec.FailedIndexes, f.completions)
	switch {
	case !slices.Contains(rec.IndexesOmitted, "required"):
		f.required, _ = indexset.ParseJobStatus(rec.Required, f.completions)
	default:
		f.required = requiredReadBack(rec.SuccessPolicy, f.completions)
	}
	// A record of a status that omitted a successPolicy's required indexes leaves them
	// unchecked: the policy's population is not kept anywhere else. The status omits
	// them early only when the mapping assigned them all (fitIndexLists); when it had to
	// omit them while the mapping left some unassigned, it says so (RequiredUnmapped),
	// and that stands until the mapping assigns every index the Job has.
	ts.problems = shapeProblems(ts.key, ts.mapped, f)
	if rec.RequiredUnmapped && f.indexed && f.required.Difference(ts.mapped).IsEmpty() &&
		(f.completions <= 0 || !indexset.Range(0, f.completions-1).Difference(ts.mapped).IsEmpty()) {
		ts.problems = append(ts.problems, problemf(v1alpha1.ReasonUnmappedIndexes,
			"%s requires indexes the mapping assigned no shard to when the Job was last observed "+
				"(its required indexes were left out of the status for size): their work would be unaccounted",
			v1alpha1.TargetKey(ts.key).Describe()))
	}
	if f.indexed {
		ts.covered = f.completed.Intersect(ts.mapped)
	}
}

// admissions updates the identity's admission history with the Workload seen now and
// attributes the indexes completed since the previous observation to the latest
// admission: the one they ran under. prev is the identity's previous status (nil when it
// is new); succeeded is the Job's status.succeeded.
func admissions(prev *v1alpha1.TargetStatus, w *v1alpha1.WorkloadObservation, completed indexset.Set, succeeded int32, now metav1.Time, lim limits) ([]v1alpha1.Admission, int32) {
	var adm []v1alpha1.Admission
	var dropped int32
	if prev != nil {
		adm = slices.Clone(prev.Admissions)
		dropped = prev.AdmissionsDropped
	}
	if w != nil {
		var last *v1alpha1.Admission
		if len(adm) > 0 {
			last = &adm[len(adm)-1]
		}
		switch {
		case w.Evicted:
			if last != nil && last.EvictedAt == nil {
				last.EvictedAt = now.DeepCopy()
				last.EvictionReason = w.EvictionReason
			}
		case w.Admitted:
			if last == nil && dropped > 0 && sameAdmission(prev.Workload, w) {
				// Admissions are not kept for this account's size (limitsFor): the Workload
				// as last observed says the admission counted then still holds.
				break
			}
			if last == nil || last.EvictedAt != nil || last.Workload != w.Name || last.ClusterQueue != w.ClusterQueue || !sameFlavors(last, w) ||
				last.Cluster != "" && last.Cluster != w.Cluster {
				if last != nil && last.EvictedAt == nil {
					// Replaced between two observations (evicted and admitted again, or
					// dispatched to another worker): the eviction went unseen, but the
					// admission has ended, and a reader must not take it for a live one.
					last.EvictedAt = now.DeepCopy()
				}
				adm = append(adm, v1alpha1.Admission{Workload: w.Name, ClusterQueue: w.ClusterQueue, Cluster: w.Cluster,
					Flavors: slices.Clone(w.Flavors), FlavorsDropped: w.FlavorsDropped, AdmittedAt: now})
			} else if last.Cluster == "" {
				// The worker MultiKueue dispatched this admission to, seen after the
				// admission itself (or recorded before batchledger read clusters).
				last.Cluster = w.Cluster
			}
		}
	}
	if len(adm) == 0 {
		return nil, dropped
	}
	last := &adm[len(adm)-1]
	var fresh indexset.Set
	switch {
	case last.CompletedIndexesOmitted:
		// Once a set was left out it stays out: a partial set would read as complete.
	case prev == nil:
		fresh = completed
	case prev.CompletedIndexesOmitted:
		// The previous completed indexes were left out for size: what is new since then
		// is unknown unless nothing completed meanwhile.
		if prev.Succeeded != succeeded {
			last.CompletedIndexes, last.CompletedIndexesOmitted = "", true
		}
	default:
		before, _ := indexset.Parse(prev.CompletedIndexes)
		fresh = completed.Difference(before)
	}
	if !fresh.IsEmpty() {
		have, _ := indexset.Parse(last.CompletedIndexes)
		last.CompletedIndexes = have.Union(fresh).String()
	}
	return boundAdmissions(adm, dropped, lim.admissions)
}

// sameFlavors says whether an admission recorded the flavors w shows. w's flavors are
// bounded already; a's may have been recorded under a larger bound (an account that
// gained targets since), so it is compared as bounded the same way.
func sameFlavors(a *v1alpha1.Admission, w *v1alpha1.WorkloadObservation) bool {
	return len(a.Flavors)+int(a.FlavorsDropped) == len(w.Flavors)+int(w.FlavorsDropped) &&
		slices.Equal(a.Flavors[:min(len(a.Flavors), len(w.Flavors))], w.Flavors)
}

// sameAdmission says whether w is the admission was (a previous observation of the same
// Workload) showed: admitted to the same queue on the same flavors, not evicted since.
func sameAdmission(was, w *v1alpha1.WorkloadObservation) bool {
	return was != nil && was.Admitted && !was.Evicted && was.Name == w.Name && was.ClusterQueue == w.ClusterQueue && was.Cluster == w.Cluster &&
		was.FlavorsDropped == w.FlavorsDropped && slices.Equal(was.Flavors, w.Flavors)
}

// boundAdmissions keeps the first admission and the newest, limit in all (only the
// newest when limit is 1, none when 0): where the identity first ran and where it runs
// now are what a reader asks. The admissions left out are added to dropped.
func boundAdmissions(adm []v1alpha1.Admission, dropped int32, limit int) ([]v1alpha1.Admission, int32) {
	n := len(adm)
	if n <= limit {
		return adm, dropped
	}
	dropped += int32(n - limit)
	switch limit {
	case 0:
		return nil, dropped
	case 1:
		return adm[n-1:], dropped
	}
	return append(adm[:1:1], adm[n-limit+1:]...), dropped
}

// IndexListBudget bounds the bytes of index lists one account status carries: every
// index string it writes (the targets' completed, failed, repeated and required indexes,
// the per-admission completed indexes, the history's completed indexes, the missing
// shards' ordinals and the missing and rejected results' ordinals). Everything else in
// a status is bounded by count; these lists grow with the gaps in coverage, and an
// account of a million shards with scattered gaps would otherwise exceed the API
// server's object size limit (etcd's 1.5 MiB by default) and never be written.
const IndexListBudget = 768 << 10

// requiredReadBack is the required population a record reads back when its status left
// the list out: every index below completions for a Job without a successPolicy, none
// for one with a policy (its population is kept nowhere else).
func requiredReadBack(successPolicy string, completions int) indexset.Set {
	if successPolicy != "" {
		return indexset.Set{}
	}
	return indexset.Range(0, completions-1)
}

// fitIndexLists keeps st's index lists within budget (indexBudget, at most
// IndexListBudget). It leaves out, while the lists are too long and in this order:
// history's completed and required indexes (oldest first) of the identities no target
// needs any more, the admissions' completed indexes, the completed indexes of found
// targets that have not terminated (copies of the Jobs' own status, read again from the
// Jobs), then truncates the missing shard and result ordinals to their lowest intervals,
// then leaves out the targets' failed, repeated and required indexes and last the
// completed indexes of the records coverage still reads: the deleted records', the
// terminated targets' (each is its record once its Job is deleted, and a verdict reached
// on it must stand then) and the identities a restart in progress superseded
// (pendingHistory); after them, the required indexes of the targets keep marks
// (keep.targets), and those of the superseded identities still needed. Everything left
// out is flagged; a marked target or superseded identity (keep.history) whose required
// indexes are left out is also flagged RequiredUnmapped, which its record reads back in
// their place.
//
// keep.targets marks the targets whose record, once their Job is deleted, would judge
// the mapping otherwise without its list of required indexes (requiredNeeded): a
// successPolicy's indexes the mapping does not all assign (UnmappedIndexes), which the
// record would read as none, so that the deletion alone would turn the account valid,
// and Accepted. The required indexes of the superseded identities a target still needs
// (pendingHistory) are left out with them, for the same reason (endedRecord).
//
// The order makes the result a fixed point of Compute: what is left out of a list
// carried over from the previous status (history, admissions, records) stays out, and
// it goes first, so recomputing from the written status makes the same choices.
func fitIndexLists(st *v1alpha1.BatchAccountStatus, budget int, keep requiredKept) {
	size := indexListBytes(st)
	over := func() bool { return size > budget }
	if !over() {
		return
	}
	pending := pendingHistory(st)
	// omitRequired leaves out a superseded identity's required indexes.
	omitRequired := func(h *v1alpha1.SupersededIdentity) {
		if h.Required != "" {
			size -= len(h.Required)
			h.Required, h.RequiredOmitted = "", true
		}
	}
	for i := range st.History {
		if !over() {
			break
		}
		if h := &st.History[i]; !pending[i] {
			if h.CompletedIndexes != "" {
				size -= len(h.CompletedIndexes)
				h.CompletedIndexes, h.CompletedIndexesOmitted = "", true
			}
			omitRequired(h)
		}
	}
	if over() {
		for i := range st.Targets {
			for j := range st.Targets[i].Admissions {
				if a := &st.Targets[i].Admissions[j]; a.CompletedIndexes != "" {
					size -= len(a.CompletedIndexes)
					a.CompletedIndexes, a.CompletedIndexesOmitted = "", true
				}
			}
		}
	}
	if over() {
		for i := range st.Targets {
			// A terminated target's list is its record-to-be: fromRecord cannot tell what
			// it covered without it (but for a Complete Job without a successPolicy).
			if t := &st.Targets[i]; !t.Deleted && t.Terminal == "" && t.CompletedIndexes != "" {
				size -= len(t.CompletedIndexes)
				t.CompletedIndexes, t.CompletedIndexesOmitted = "", true
			}
		}
	}
	if over() {
		truncate := func(s *string, limit int, flag *bool) {
			if len(*s) > limit {
				size -= len(*s)
				*s = truncateIntervals(*s, limit)
				size += len(*s)
				*flag = true
			}
		}
		truncate(&st.Shards.MissingOrdinals, budget/2, &st.Shards.MissingOrdinalsTruncated)
		truncate(&st.Results.MissingOrdinals, budget/16, &st.Results.OrdinalsTruncated)
		truncate(&st.Results.RejectedOrdinals, budget/16, &st.Results.OrdinalsTruncated)
	}
	// omit leaves out the index list s of target t, called name.
	omit := func(t *v1alpha1.TargetStatus, name string, s *string) {
		if *s == "" {
			return
		}
		size -= len(*s)
		*s = ""
		if !slices.Contains(t.IndexesOmitted, name) {
			t.IndexesOmitted = append(t.IndexesOmitted, name)
		}
	}
	if over() {
		for i := range st.Targets {
			t := &st.Targets[i]
			omit(t, "failedIndexes", &t.FailedIndexes)
			omit(t, "repeatedIndexes", &t.RepeatedIndexes)
			if !keep.target(i) {
				omit(t, "required", &t.Required)
			}
		}
	}
	for i := range st.History {
		if !over() {
			break
		}
		if h := &st.History[i]; h.CompletedIndexes != "" {
			size -= len(h.CompletedIndexes)
			h.CompletedIndexes, h.CompletedIndexesOmitted = "", true
		}
	}
	if over() {
		for i := range st.Targets {
			if t := &st.Targets[i]; t.CompletedIndexes != "" {
				size -= len(t.CompletedIndexes)
				t.CompletedIndexes, t.CompletedIndexesOmitted = "", true
			}
		}
	}
	for i := range st.Targets {
		if !over() {
			break
		}
		t := &st.Targets[i]
		if t.Required != "" && keep.target(i) {
			t.RequiredUnmapped = true
		}
		omit(t, "required", &t.Required)
	}
	for i := range st.History {
		if !over() {
			break
		}
		h := &st.History[i]
		if h.Required != "" && keep.entry(i) {
			h.RequiredUnmapped = true
		}
		omitRequired(h)
	}
}

// indexListBytes is the length of every index string of st.
func indexListBytes(st *v1alpha1.BatchAccountStatus) int {
	n := len(st.Shards.MissingOrdinals) + len(st.Results.MissingOrdinals) + len(st.Results.RejectedOrdinals)
	for i := range st.History {
		n += len(st.History[i].CompletedIndexes) + len(st.History[i].Required)
	}
	for i := range st.Targets {
		t := &st.Targets[i]
		n += len(t.CompletedIndexes) + len(t.FailedIndexes) + len(t.RepeatedIndexes) + len(t.Required)
		for j := range t.Admissions {
			n += len(t.Admissions[j].CompletedIndexes)
		}
	}
	return n
}

// truncateIntervals cuts an interval list after its last whole interval within limit bytes.
func truncateIntervals(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	if i := strings.LastIndexByte(s[:limit+1], ','); i > 0 {
		return s[:i]
	}
	return ""
}

// progress is the percentage of shards accepted (or covered, when results are not
// required), rounded down so that 100 means all.
func progress(s v1alpha1.ShardSummary, results bool) int32 {
	if s.Total == 0 {
		return 0
	}
	done := s.Covered
	if results {
		done = s.Accepted
	}
	return int32(int64(done) * 100 / int64(s.Total))
}

// listNames joins names, listing at most messageNamesLimit of them: "a, b and 3 more".
func listNames(names []string) string {
	if len(names) <= messageNamesLimit {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:messageNamesLimit], ", "), len(names)-messageNamesLimit)
}

// boundList keeps at most messageNamesLimit notes, counting the rest.
func boundList(notes []string) []string {
	if len(notes) <= messageNamesLimit {
		return notes
	}
	return append(slices.Clone(notes[:messageNamesLimit]), fmt.Sprintf("%d more notes", len(notes)-messageNamesLimit))
}

// maxProblemMessage bounds each of a target's problems: a status of 1,024 targets with
// 16 problems each stays far under the object size limit.
const maxProblemMessage = 512

// boundMessage cuts a message to MaxConditionMessage bytes on a rune boundary, saying so.
func boundMessage(msg string) string { return clipMessage(msg, MaxConditionMessage) }

// clipMessage cuts msg to limit bytes on a rune boundary, saying so.
func clipMessage(msg string, limit int) string {
	if len(msg) <= limit {
		return msg
	}
	const tail = " … (message truncated)"
	cut := limit - len(tail)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + tail
}

// plural picks the singular or plural word for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// StatusBudget bounds the JSON of one account status: a third under etcd's default
// request limit (1.5 MiB), which the whole object (spec, metadata and its managed
// fields, status) must fit, and far under the API server's 3 MiB request limit. What a
// status holds is bounded by counts that shrink with the number of targets (limitsFor)
// and by clipped strings; the index lists then get what is left of the budget
// (indexBudget), at most IndexListBudget.
const StatusBudget = 1 << 20

// MaxTargets is the most targets an account names: one per assignment at most
// (spec.assignments' MaxItems); entries of spec.repairs naming further targets are
// refused (Compile), since status.targets holds no more.
const MaxTargets = 1024

// Bounds of the lists and strings a status holds, whatever the number of targets.
const (
	// maxLedgerPods bounds the pods of one index in the attempt ledger (the API's
	// MaxItems of IndexAttempts.Pods).
	maxLedgerPods = 32
	// maxFlavors bounds the flavor assignments of a Workload observation and of an
	// admission: Kueue's 8 pod sets of two resources each.
	maxFlavors = 16
	// maxReason bounds a terminal or eviction reason (the API bounds a condition's
	// reason to 1,024 bytes, a Job's not at all).
	maxReason = 256
	// maxSuccessPolicy bounds a Job's success policy in words: its 20 rules of up to
	// 64 KiB of indexes each would otherwise be copied into every target.
	maxSuccessPolicy = 512
	// maxRejectionMessage bounds the message of each rejection kept in the sample, and
	// maxClaim the shard a rejected result claimed.
	maxRejectionMessage = 512
	maxClaim            = 253
)

// limits are the bounds of an account's lists, from its number of targets: a per-target
// share of a budget for the whole account, between a floor (what a reader of one target
// needs) and the per-target maximum.
type limits struct {
	// admissions per identity: the first and the newest.
	admissions int
	// ledgerPods are the pod UIDs a target's attempt ledger lists.
	ledgerPods int
	// problems per target, each clipped to problemBytes.
	problems, problemBytes int
	// flavors per Workload observation and per admission.
	flavors int
	// history is how many superseded identities are kept beside those a target without
	// an identity still needs (the latest of each such target, always kept).
	history int
	// status and indexLists are StatusBudget and IndexListBudget.
	status, indexLists int
}

// limitsFor gives the bounds of an account of the given number of targets. Their
// worst case at MaxTargets (1,024 identities with one admission each, a ledger of one
// repeated index, one problem of 128 bytes, four flavors) leaves the index lists about a
// third of StatusBudget.
func limitsFor(targets int) limits {
	n := max(1, targets)
	share := func(total, lo, hi int) int { return min(hi, max(lo, total/n)) }
	return limits{
		admissions:   share(512, 0, MaxAdmissions),
		ledgerPods:   share(2048, 2, 2048),
		problems:     share(256, 1, maxProblems),
		problemBytes: share(128<<10, 128, maxProblemMessage),
		flavors:      share(512, 0, maxFlavors),
		// Others' superseded identities are few and small beside the targets: 64 of them
		// take ~20 KB.
		history: maxHistory,
		status:  StatusBudget, indexLists: IndexListBudget,
	}
}

// statusLimits is limitsFor; a test replaces it to compute the unbounded account.
var statusLimits = limitsFor

// boundWorkload returns w with its flavors, nominated clusters and eviction reason within
// lim (a copy when it cuts anything: the observation belongs to the caller). Nominated
// clusters share the flavors' bound: both are lists a target carries once per Workload.
func boundWorkload(w *v1alpha1.WorkloadObservation, lim limits) *v1alpha1.WorkloadObservation {
	if w == nil || (len(w.Flavors) <= lim.flavors && len(w.NominatedClusters) <= lim.flavors && len(w.EvictionReason) <= maxReason) {
		return w
	}
	c := w.DeepCopy()
	if n := len(c.Flavors); n > lim.flavors {
		c.FlavorsDropped += int32(n - lim.flavors)
		c.Flavors = c.Flavors[:lim.flavors]
	}
	if len(c.NominatedClusters) > lim.flavors {
		c.NominatedClusters = slices.Clip(c.NominatedClusters[:lim.flavors])
		if lim.flavors == 0 {
			c.NominatedClusters = nil
		}
	}
	c.EvictionReason = clipMessage(c.EvictionReason, maxReason)
	return c
}

// addProblem appends msg to the target's problems within lim, or counts it.
func addProblem(s *v1alpha1.TargetStatus, msg string, lim limits) {
	if len(s.Problems) < lim.problems {
		s.Problems = append(s.Problems, clipMessage(msg, lim.problemBytes))
	} else {
		s.ProblemsDropped++
	}
}

// boundTarget brings a target's lists within lim. What a reconcile computes afresh is
// bounded as it is computed; this bounds what a status carries over from a previous one
// written under larger bounds (a deleted identity's record, an account that gained
// targets since) and folds the attempt ledger.
func boundTarget(s *v1alpha1.TargetStatus, lim limits) {
	s.Admissions, s.AdmissionsDropped = boundAdmissions(s.Admissions, s.AdmissionsDropped, lim.admissions)
	for i := range s.Admissions {
		if a := &s.Admissions[i]; len(a.Flavors) > lim.flavors {
			a.FlavorsDropped += int32(len(a.Flavors) - lim.flavors)
			a.Flavors = a.Flavors[:lim.flavors]
		}
	}
	s.Workload = boundWorkload(s.Workload, lim)
	if n := len(s.Problems); n > lim.problems {
		s.ProblemsDropped += int32(n - lim.problems)
		s.Problems = s.Problems[:lim.problems]
	}
	for i, p := range s.Problems {
		s.Problems[i] = clipMessage(p, lim.problemBytes)
	}
	foldLedger(s, lim.ledgerPods)
}

// foldLedger keeps the ledger's entries, lowest indexes first, that fit the pod budget
// (at most maxLedger entries of at most maxLedgerPods pods). An entry left out is folded
// into counts: its repeats stay counted in AttemptsUnledgered, and from then on the
// index's pods are not counted again (attempts), so SuccessfulAttempts never counts a
// pod twice. Only a later new pod of such an index goes uncounted.
func foldLedger(s *v1alpha1.TargetStatus, budget int) {
	var kept []v1alpha1.IndexAttempts
	pods := 0
	for _, e := range s.AttemptLedger {
		if len(kept) < maxLedger && len(e.Pods) <= maxLedgerPods && pods+len(e.Pods) <= budget {
			kept = append(kept, e)
			pods += len(e.Pods)
			continue
		}
		s.AttemptsUnledgered += int32(len(e.Pods) - 1)
		s.AttemptLedgerDropped++
	}
	s.AttemptLedger = kept
}

// pendingHistory marks the history entries a target still needs: the latest superseded
// identity of each target that has no identity now (a JobSet restart in progress). If
// its JobSet ends instead of recreating the child, that entry is the target's record
// again (endedRecord): its coverage counts, so it is never dropped.
func pendingHistory(st *v1alpha1.BatchAccountStatus) []bool {
	waiting := map[string]bool{}
	for i := range st.Targets {
		if t := &st.Targets[i]; !t.Found && !t.Deleted && t.UID == "" {
			waiting[t.Name] = true
		}
	}
	pending := make([]bool, len(st.History))
	for i := len(st.History) - 1; i >= 0; i-- {
		if k := st.History[i].Target; waiting[k] {
			pending[i] = true
			delete(waiting, k)
		}
	}
	return pending
}

// boundHistory keeps the entries targets still need (pendingHistory) and, beside them,
// the newest lim.history others, oldest first; the others are added to HistoryDropped.
func boundHistory(st *v1alpha1.BatchAccountStatus, lim limits) {
	pending := pendingHistory(st)
	others := 0
	for _, p := range pending {
		if !p {
			others++
		}
	}
	drop := others - lim.history
	if drop <= 0 {
		return
	}
	kept := st.History[:0:0]
	for i, h := range st.History {
		if !pending[i] && drop > 0 {
			drop--
			st.HistoryDropped++
			continue
		}
		kept = append(kept, h)
	}
	st.History = kept
}

// boundRejections clips the messages and claims of the rejection sample.
func boundRejections(r *v1alpha1.ResultSummary) {
	for i := range r.Rejections {
		rj := &r.Rejections[i]
		rj.Message = clipMessage(rj.Message, maxRejectionMessage)
		rj.Shard = clipMessage(rj.Shard, maxClaim)
	}
}

// conditionsReserve is what the conditions may take of StatusBudget: the account's six
// and two more (another writer's), each message within MaxConditionMessage.
const conditionsReserve = 8 * (MaxConditionMessage + 512)

// indexBudget is what st's index lists may take: StatusBudget less everything else the
// status holds, at most IndexListBudget. Everything else is measured with every index
// list and every flag saying one was left out cleared, and the keys and flags those
// lists may cost are reserved, so the budget does not depend on which lists are left
// out: recomputing from a written status makes the same choices. marked is
// fitIndexLists': a marked target's or superseded identity's required indexes may be
// left out flagged RequiredUnmapped.
func indexBudget(st *v1alpha1.BatchAccountStatus, lim limits, marked requiredKept) int {
	type saved struct {
		s    *string
		flag *bool
		was  string
		set  bool
	}
	var lists []saved
	var omitted [][]string
	var unmapped []*bool
	reserve := 0
	// keep clears a list and its flag, and reserves what either costs at most beside the
	// list's bytes: its key when kept, its flag (or its name in indexesOmitted) when left
	// out; both when truncated.
	keep := func(s *string, flag *bool, cost int) {
		if *s != "" || (flag != nil && *flag) {
			reserve += cost
		}
		v := saved{s: s, flag: flag, was: *s}
		if flag != nil {
			v.set = *flag
			*flag = false
		}
		*s = ""
		lists = append(lists, v)
	}
	const (
		completedCost = len(`,"completedIndexesOmitted":true`)
		requiredCost  = len(`,"requiredOmitted":true`)
		truncatedCost = len(`,"missingOrdinals":""`) + len(`,"missingOrdinalsTruncated":true`)
	)
	keep(&st.Shards.MissingOrdinals, &st.Shards.MissingOrdinalsTruncated, truncatedCost)
	keep(&st.Results.MissingOrdinals, &st.Results.OrdinalsTruncated, truncatedCost)
	keep(&st.Results.RejectedOrdinals, nil, truncatedCost)
	// unmappedFlag clears a RequiredUnmapped flag and reserves its bytes when it is set,
	// or may be (its required indexes kept now, marked): called before keep clears them.
	unmappedFlag := func(flag *bool, mayBeSet bool) {
		if *flag || mayBeSet {
			reserve += len(`,"requiredUnmapped":true`)
		}
		if *flag {
			unmapped = append(unmapped, flag)
			*flag = false
		}
	}
	for i := range st.History {
		h := &st.History[i]
		unmappedFlag(&h.RequiredUnmapped, h.Required != "" && marked.entry(i))
		keep(&h.CompletedIndexes, &h.CompletedIndexesOmitted, completedCost)
		keep(&h.Required, &h.RequiredOmitted, requiredCost)
	}
	for i := range st.Targets {
		t := &st.Targets[i]
		keep(&t.CompletedIndexes, &t.CompletedIndexesOmitted, completedCost)
		unmappedFlag(&t.RequiredUnmapped, t.Required != "" && marked.target(i))
		any := len(t.IndexesOmitted) > 0
		for _, l := range []struct {
			name string
			s    *string
		}{{"failedIndexes", &t.FailedIndexes}, {"repeatedIndexes", &t.RepeatedIndexes}, {"required", &t.Required}} {
			if slices.Contains(t.IndexesOmitted, l.name) || *l.s != "" {
				any = true
				reserve += max(len(`,"":""`)+len(l.name), len(`"",`)+len(l.name))
			}
			keep(l.s, nil, 0)
		}
		if any {
			reserve += len(`,"indexesOmitted":[]`)
		}
		omitted = append(omitted, t.IndexesOmitted)
		t.IndexesOmitted = nil
		for j := range t.Admissions {
			keep(&t.Admissions[j].CompletedIndexes, &t.Admissions[j].CompletedIndexesOmitted, completedCost)
		}
	}
	raw, err := json.Marshal(st)
	for _, v := range slices.Backward(lists) {
		*v.s = v.was
		if v.flag != nil {
			*v.flag = v.set
		}
	}
	for i := range st.Targets {
		st.Targets[i].IndexesOmitted = omitted[i]
	}
	for _, flag := range unmapped {
		*flag = true
	}
	if err != nil {
		return lim.indexLists
	}
	rest := len(raw) + reserve + conditionsReserve
	return max(0, min(lim.indexLists, lim.status-rest))
}
