package account

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
)

// One completion identity is one shard, however its Job is spelled. A Job can be named
// by more than one target: by its name ({job: tw-w-0}) and, when a JobSet controls it,
// as that JobSet's child ({jobSet: tw, replicatedJob: w, jobIndex: 0}). Compile sees two
// targets there, and checks each on its own; only the observed Job UIDs show that they
// are one Job. So the check is a verdict of the status, not of admission (the Job may
// not exist when the account is admitted).
//
// Two targets reach the same Job when the UID of one's current identity, its record or a
// superseded identity in history is also one of the other's. Every index both map on
// it is a completion identity two assignments claim (ReasonDuplicateIndex), whether the
// assignments are original or repair ones and whichever shards they name: a repair gives
// a shard a further identity, never the same identity again. While that holds:
//
//   - AssignmentValid is False (DuplicateIndex), so ShardsCovered and Accepted are False
//     (AssignmentInvalid) and the Workload conditions say so;
//   - the shared identity's completed indexes cover no shard of either target
//     (status.shards.covered does not count them);
//   - a result reported by the shared identity stands for no shard: it is rejected with
//     RejectionDuplicateIndex.
//
// History keeps the UIDs a target followed, so the verdict does not lapse while a JobSet
// restart leaves one spelling with a record and the other with nothing yet.

// sharedIdentities are the completion identities two targets of the mapping reach, by
// Job UID, and the problems that name them.
type sharedIdentities struct {
	byUID    map[types.UID]indexset.Set
	problems []Problem
	// ofTarget are the problem messages by target position, for the targets' status.
	ofTarget map[int][]string
}

// findSharedIdentities compares the Job UIDs each target reaches (its current identity or
// record, and its superseded identities in history) across targets. It costs O(targets +
// history) when no two targets share a Job.
func findSharedIdentities(m *Mapping, states []*targetState, history []v1alpha1.SupersededIdentity) sharedIdentities {
	current := make(map[string]types.UID, len(states))
	for _, ts := range states {
		current[ts.key] = ts.uid()
	}
	return sharedOfRecorded(m, current, history)
}

// sharedOfRecorded finds the completion identities two targets of the mapping reach:
// through each target's current Job UID or record (current, by target key) and the
// superseded identities in history. Compute and the readers of an account's status (the
// CLI) alike.
func sharedOfRecorded(m *Mapping, current map[string]types.UID, history []v1alpha1.SupersededIdentity) sharedIdentities {
	reachedBy := map[types.UID][]int{}
	position := make(map[string]int, len(m.Targets))
	for i, t := range m.Targets {
		position[t.Key] = i
		reach(reachedBy, current[t.Key], i)
	}
	for _, h := range history {
		if i, ok := position[h.Target]; ok {
			reach(reachedBy, h.UID, i)
		}
	}
	return sharedAmong(m, reachedBy)
}

// reach notes that the target at position i reaches the Job uid.
func reach(reachedBy map[types.UID][]int, uid types.UID, i int) {
	if uid != "" && !slices.Contains(reachedBy[uid], i) {
		reachedBy[uid] = append(reachedBy[uid], i)
	}
}

// sharedAmong finds, among the Job UIDs the targets reach (reachedBy: target positions
// in m.Targets by UID), those that two targets reach with indexes both assign.
func sharedAmong(m *Mapping, reachedBy map[types.UID][]int) sharedIdentities {
	var out sharedIdentities
	var uids []types.UID
	for uid, targets := range reachedBy {
		if len(targets) > 1 {
			uids = append(uids, uid)
		}
	}
	if len(uids) == 0 {
		return out
	}
	// In the order of the targets, so that the messages are stable.
	slices.SortFunc(uids, func(a, b types.UID) int {
		return slices.Min(reachedBy[a]) - slices.Min(reachedBy[b])
	})
	out.byUID = map[types.UID]indexset.Set{}
	out.ofTarget = map[int][]string{}
	unreported := 0
	for _, uid := range uids {
		targets := reachedBy[uid]
		slices.Sort(targets)
		// Each target against the indexes the targets before it map: O(targets) set
		// operations per Job, however many targets reach it.
		var seen indexset.Set
		for x, b := range targets {
			tb := m.Targets[b]
			both := tb.Indexes.Intersect(seen)
			seen = seen.Union(tb.Indexes)
			if both.IsEmpty() {
				continue
			}
			out.byUID[uid] = out.byUID[uid].Union(both)
			if len(out.problems) == maxProblems {
				unreported++
				continue
			}
			// The first target before b that maps these indexes too.
			a := targets[0]
			for _, c := range targets[:x] {
				if !m.Targets[c].Indexes.Intersect(both).IsEmpty() {
					a = c
					break
				}
			}
			ta := m.Targets[a]
			both = both.Intersect(ta.Indexes)
			p := problemf(v1alpha1.ReasonDuplicateIndex,
				"%s (%s) and %s (%s) are the same Job (UID %s): %s assigned twice; one completion identity can stand for one shard, so %s for neither: name each Job by one target",
				v1alpha1.TargetKey(ta.Key).Describe(), m.describeEntries(ta.Key, both), v1alpha1.TargetKey(tb.Key).Describe(), m.describeEntries(tb.Key, both),
				uid, describeIndexes(both), plural(both.Count(), "it counts", "they count"))
			out.problems = append(out.problems, p)
			out.ofTarget[a] = append(out.ofTarget[a], p.Message)
			out.ofTarget[b] = append(out.ofTarget[b], p.Message)
		}
	}
	if unreported > 0 {
		out.problems = append(out.problems, problemf(v1alpha1.ReasonDuplicateIndex,
			"%d more targets reach a Job another target reaches, with indexes both assign", unreported))
	}
	return out
}

// contains reports whether (uid, index) is a shared identity.
func (s sharedIdentities) contains(uid types.UID, index int) bool {
	set, ok := s.byUID[uid]
	return ok && set.Contains(index)
}

// exclude takes the shared identities out of the targets' coverage: their completions
// cover no shard.
func (s sharedIdentities) exclude(states []*targetState) {
	for _, ts := range states {
		if set, ok := s.byUID[ts.uid()]; ok {
			ts.covered = ts.covered.Difference(set)
		}
	}
}

// rejectResults returns results with every result of a shared identity rejected
// (RejectionDuplicateIndex), so that it stands for no shard. results itself is not
// modified; without shared identities it is returned as it is.
func (s sharedIdentities) rejectResults(results []Result) []Result {
	if len(s.byUID) == 0 {
		return results
	}
	out := results
	copied := false
	for i, r := range results {
		if r.RejectReason != "" || !s.contains(r.JobUID, r.Index) {
			continue
		}
		if !copied {
			out, copied = slices.Clone(results), true
		}
		out[i].RejectReason = v1alpha1.RejectionDuplicateIndex
		out[i].RejectMessage = fmt.Sprintf("its completion identity (Job UID %s, index %d) is assigned by two targets (AssignmentValid %s): it stands for no shard",
			r.JobUID, r.Index, v1alpha1.ReasonDuplicateIndex)
	}
	return out
}

// describeEntries names the assignments that map a target's indexes idx: "assignments[1]",
// "assignments[0], assignments[3]".
func (m *Mapping) describeEntries(target string, idx indexset.Set) string {
	var entries []string
	for _, r := range m.Runs {
		if r.Target != target || indexset.FromIntervals(r.indexes()).Intersect(idx).IsEmpty() {
			continue
		}
		e := m.entryName(r.Entry)
		if r.Repair && r.Entry < m.assignments {
			e = "repair " + e
		}
		if !slices.Contains(entries, e) {
			entries = append(entries, e)
		}
	}
	return listNames(entries)
}

// describeIndexes renders a set of indexes for a message: "index 0", "indexes 0-3".
func describeIndexes(s indexset.Set) string {
	return plural(s.Count(), "index ", "indexes ") + s.String()
}
