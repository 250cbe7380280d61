package account

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
)

// The ledger outlives its Jobs: what was observed of an identity is its record, and a
// deleted Job changes neither coverage, nor results, nor the verdict.

// Bounds of the durable parts of a target's record.
const (
	// MaxAdmissions bounds the admissions kept per identity (the oldest are dropped
	// and counted).
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
// (Observation.JobSetEnded), which recreates nothing. A child that terminated keeps its
// record (a JobSet deleted by its TTL, or a cascade).
func keepsRecord(t Target, prev *v1alpha1.TargetStatus, obs Observation) bool {
	if prev == nil || prev.UID == "" {
		return false
	}
	if prev.Deleted || t.Ref.Job != "" || obs.JobSetEnded != "" {
		return true
	}
	return prev.Terminal != ""
}

// endedRecord is the record a JobSet child target stands for once its JobSet ended
// without recreating it: the identity a restart in progress had superseded into
// history (the last one of the target, if it never terminated), as a target status, and
// that entry's position in history. nil when there is none.
func endedRecord(t Target, obs Observation, history []v1alpha1.SupersededIdentity) (*v1alpha1.TargetStatus, int) {
	if t.Ref.JobSet == "" || obs.JobSetEnded == "" {
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
		completions := h.Completions
		if completions == 0 {
			// Recorded before history kept completions: read the indexes against the
			// mapping's, which is all coverage reads of them.
			if max, ok := t.Indexes.Max(); ok {
				completions = int32(max + 1)
			}
		}
		return &v1alpha1.TargetStatus{
			Name: h.Target, Job: h.Job, UID: h.UID, RestartAttempt: h.RestartAttempt, Completions: completions,
			CompletedIndexes: h.CompletedIndexes, CompletedIndexesOmitted: h.CompletedIndexesOmitted,
			Deleted: true, DeletedAt: h.SupersededAt.DeepCopy(),
		}, i
	}
	return nil, -1
}

// finalRecord is the record of a target whose Job is gone: its previous status, brought up
// to the Job's last state when the controller saw the deletion (Observation.DeletedJob)
// of that same identity before the status recorded its end.
func finalRecord(t Target, prev *v1alpha1.TargetStatus, obs Observation, now metav1.Time) *v1alpha1.TargetStatus {
	job := obs.DeletedJob
	if job == nil || job.UID != prev.UID || prev.Terminal != "" || prev.Deleted {
		return prev
	}
	last := observeTarget(t, Observation{Job: job, RestartAttempt: prev.RestartAttempt, Workload: prev.Workload})
	s, _, _ := targetStatus(last, prev, now)
	s.Problems = prev.Problems
	return &s
}

// fromRecord makes ts stand for its previous identity's record.
func (ts *targetState) fromRecord(rec *v1alpha1.TargetStatus) {
	ts.deleted, ts.record = true, rec
	f := &ts.facts
	f.indexed = true
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
	ts.covered = f.completed.Intersect(ts.mapped)
}

// admissions updates the identity's admission history with the Workload seen now and
// attributes the indexes completed since the previous observation to the latest
// admission: the one they ran under. prev is the identity's previous status (nil when it
// is new); succeeded is the Job's status.succeeded.
func admissions(prev *v1alpha1.TargetStatus, w *v1alpha1.WorkloadObservation, completed indexset.Set, succeeded int32, now metav1.Time) ([]v1alpha1.Admission, int32) {
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
			if last == nil || last.EvictedAt != nil || last.Workload != w.Name || last.ClusterQueue != w.ClusterQueue || !slices.Equal(last.Flavors, w.Flavors) {
				adm = append(adm, v1alpha1.Admission{Workload: w.Name, ClusterQueue: w.ClusterQueue, Flavors: slices.Clone(w.Flavors), AdmittedAt: now})
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
	if n := len(adm); n > MaxAdmissions {
		dropped += int32(n - MaxAdmissions)
		adm = adm[n-MaxAdmissions:]
	}
	return adm, dropped
}

// IndexListBudget bounds the bytes of index lists one account status carries: every
// index string it writes (the targets' completed, failed, repeated and required indexes,
// the per-admission completed indexes, the history's completed indexes, the missing
// shards' ordinals and the missing and rejected results' ordinals). Everything else in
// a status is bounded by count; these lists grow with the gaps in coverage, and an
// account of a million shards with scattered gaps would otherwise exceed the API
// server's object size limit (etcd's 1.5 MiB by default) and never be written.
const IndexListBudget = 768 << 10

// fitIndexLists keeps st's index lists within IndexListBudget. It leaves out, while the
// lists are too long and in this order: history's completed indexes (oldest first), the
// admissions' completed indexes, the found targets' completed indexes (copies of the
// Jobs' own status), then truncates the missing shard and result ordinals to their
// lowest intervals, then leaves out the targets' failed, repeated and required indexes
// and last the deleted records' completed indexes. Everything left out is flagged.
//
// The order makes the result a fixed point of Compute: what is left out of a list
// carried over from the previous status (history, admissions, records) stays out, and
// it goes first, so recomputing from the written status makes the same choices.
func fitIndexLists(st *v1alpha1.BatchAccountStatus) {
	size := indexListBytes(st)
	over := func() bool { return size > IndexListBudget }
	if !over() {
		return
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
			if t := &st.Targets[i]; !t.Deleted && t.CompletedIndexes != "" {
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
		truncate(&st.Shards.MissingOrdinals, IndexListBudget/2, &st.Shards.MissingOrdinalsTruncated)
		truncate(&st.Results.MissingOrdinals, IndexListBudget/16, &st.Results.OrdinalsTruncated)
		truncate(&st.Results.RejectedOrdinals, IndexListBudget/16, &st.Results.OrdinalsTruncated)
	}
	if over() {
		for i := range st.Targets {
			t := &st.Targets[i]
			for _, l := range []struct {
				name string
				s    *string
			}{{"failedIndexes", &t.FailedIndexes}, {"repeatedIndexes", &t.RepeatedIndexes}, {"required", &t.Required}} {
				if *l.s != "" {
					size -= len(*l.s)
					*l.s = ""
					if !slices.Contains(t.IndexesOmitted, l.name) {
						t.IndexesOmitted = append(t.IndexesOmitted, l.name)
					}
				}
			}
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
}

// indexListBytes is the length of every index string of st.
func indexListBytes(st *v1alpha1.BatchAccountStatus) int {
	n := len(st.Shards.MissingOrdinals) + len(st.Results.MissingOrdinals) + len(st.Results.RejectedOrdinals)
	for i := range st.History {
		n += len(st.History[i].CompletedIndexes)
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
