package mapview

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
)

// shardState is what the map shows of a shard. The order is from best to worst: a cell
// standing for a run of shards shows the worst state among them.
type shardState uint8

const (
	stateAccepted shardState = iota
	stateCovered
	// stateUnknown: the status left the shard's coverage out (a bounded status of a
	// huge, fragmented batch) and nothing else tells it.
	stateUnknown
	stateMissing
	// stateNoResult: covered, but its result can no longer arrive (MissingResult).
	stateNoResult
	stateConflict
	stateRejected
	numStates
)

// shardMap is an account's shards by state, grouped by the Job each is assigned to.
type shardMap struct {
	Namespace, Name string
	Total           int
	// States holds one state per shard ordinal.
	States []shardState
	Groups []shardGroup
	// RequireResults says whether covered is a final state.
	RequireResults bool
	// Counts per state over all shards.
	Counts [numStates]int
	// Covered counts the shards the status counts covered: not those it lists missing
	// (a missing shard may be drawn rejected, for a rejected result) nor unknown ones.
	Covered int
	// shardName names a shard by ordinal.
	shardName func(int) string
	// Stale says, when the status judges an older spec generation, that the states are
	// those it judged: the current spec (a new mapping, a shard population changed) is
	// not judged yet. Empty when the status is current.
	Stale string
	// NotJudged says, when the controller has written no status yet, that no shard's
	// state is known (all are drawn unknown). Empty once judged.
	NotJudged string
	// Invalid says, when the status finds the mapping no partition, why: the cells
	// follow the mapping as it stands (a Job's row may draw a shard twice and leave
	// others out). Empty for a valid mapping, and for a stale status.
	Invalid string
}

// shardGroup is one Job's shards, in the order of its completion indexes.
type shardGroup struct {
	Name string
	// Runs are the shard ordinal intervals of the Job's original assignment, in index order.
	Runs    []indexset.Interval
	Counts  [numStates]int
	Covered int
}

func (g *shardGroup) size() int {
	n := 0
	for _, r := range g.Runs {
		n += r.Count()
	}
	return n
}

// buildShardMap derives every shard's state from the account status and its recorded
// results: missing from the status's missing ordinals (or, when the status bounded them,
// from the targets' completed indexes through the mapping); accepted from the results
// that stand, by account.StandingResults; rejected where a shard has only results that do
// not stand (a result, acceptable or not, of an index its Job has not completed is no
// rejection: its shard waits); conflict where a later result disagrees with the one that
// stands.
func buildShardMap(ba *v1alpha1.BatchAccount, chunks []v1alpha1.ShardResults) *shardMap {
	m := account.Compile(ba.Namespace, &ba.Spec)
	st := &ba.Status
	sm := &shardMap{Namespace: ba.Namespace, Name: ba.Name, Total: m.Shards.Count(),
		RequireResults: ba.Spec.Acceptance != nil && ba.Spec.Acceptance.RequireResults, shardName: m.Shards.Name}
	if len(st.Conditions) > 0 && st.ObservedGeneration < ba.Generation {
		sm.Stale = fmt.Sprintf("the status judges spec generation %d, the spec is at generation %d: the states below are as last judged, not a verdict on the current spec",
			st.ObservedGeneration, ba.Generation)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAssignmentValid); c != nil && c.Status == metav1.ConditionFalse && sm.Stale == "" {
		// Of the spec as it is: a stale status's verdict on the mapping is not (STALE says so).
		sm.Invalid = fmt.Sprintf("AssignmentValid is False (%s): %s", c.Reason, c.Message)
	}
	sm.States = make([]shardState, sm.Total)
	for i := range sm.States {
		sm.States[i] = stateCovered
	}
	paint := func(set indexset.Set, s shardState) {
		for _, iv := range set.Intervals() {
			for o := iv.First; o <= min(iv.Last, sm.Total-1); o++ {
				sm.States[o] = s
			}
		}
	}
	var missing indexset.Set
	if len(st.Conditions) == 0 {
		// Not judged yet: the status says nothing of any shard (its Jobs may have
		// completed already), so none is called missing.
		sm.NotJudged = "the controller has written no status for this account yet: no shard's state is known"
		paint(indexset.Range(0, sm.Total-1), stateUnknown)
	} else {
		missing, _ = indexset.Parse(st.Shards.MissingOrdinals)
		if st.Shards.MissingOrdinalsTruncated {
			if covered, ok := coveredFromTargets(m, st); ok {
				missing = indexset.Range(0, sm.Total-1).Difference(covered)
			} else if last, ok := missing.Max(); ok {
				paint(indexset.Range(last+1, sm.Total-1), stateUnknown)
			}
		}
		paint(missing, stateMissing)
		missing = missing.Intersect(indexset.Range(0, sm.Total-1))
		// The status names the covered shards whose result was rejected or can no longer
		// arrive; the recorded results add conflicts (and rejections a bounded list left out).
		lost, _ := indexset.Parse(st.Results.MissingOrdinals)
		paint(lost, stateNoResult)
		rejected, _ := indexset.Parse(st.Results.RejectedOrdinals)
		paint(rejected, stateRejected)
		judgeShardResults(ba, m, chunks, sm.States)
	}

	for _, t := range m.Targets {
		g := shardGroup{Name: v1alpha1.TargetKey(t.Key).Describe()}
		var runs []account.Run
		for _, r := range m.Runs {
			if r.Target == t.Key && !r.Repair {
				runs = append(runs, r)
			}
		}
		if len(runs) == 0 {
			continue // a repair Job: its shards are drawn with the Job they were assigned first
		}
		slices.SortFunc(runs, func(a, b account.Run) int { return cmp.Compare(a.FirstIndex, b.FirstIndex) })
		for _, r := range runs {
			g.Runs = append(g.Runs, indexset.Interval{First: r.FirstShard, Last: r.FirstShard + r.Length - 1})
			for o := r.FirstShard; o < r.FirstShard+r.Length && o < sm.Total; o++ {
				g.Counts[sm.States[o]]++
			}
		}
		g.Covered = g.size() - indexset.FromIntervals(g.Runs...).Intersect(missing).Count() - g.Counts[stateUnknown]
		sm.Groups = append(sm.Groups, g)
	}
	for _, s := range sm.States {
		sm.Counts[s]++
	}
	sm.Covered = sm.Total - missing.Count() - sm.Counts[stateUnknown]
	return sm
}

// coveredFromTargets is the covered shard set computed from the targets' completed
// indexes, through the original and repair runs; false when a target's list was left
// out of the status.
func coveredFromTargets(m *account.Mapping, st *v1alpha1.BatchAccountStatus) (indexset.Set, bool) {
	var covered indexset.Set
	for _, ts := range st.Targets {
		if ts.CompletedIndexesOmitted {
			return indexset.Set{}, false
		}
		done, err := indexset.Parse(ts.CompletedIndexes)
		if err != nil {
			return indexset.Set{}, false
		}
		covered = covered.Union(m.ShardsOf(ts.Name, done, false)).Union(m.ShardsOf(ts.Name, done, true))
	}
	return covered, true
}

// judgeShardResults marks accepted, rejected and conflicting shards from the recorded
// results, judged by the account's own rule (account.StandingResults) so that the map
// and the controller agree on every shard.
func judgeShardResults(ba *v1alpha1.BatchAccount, m *account.Mapping, chunks []v1alpha1.ShardResults, states []shardState) {
	if len(chunks) == 0 || account.ResultsUnjudged(&ba.Status) {
		return
	}
	current := map[string]types.UID{}
	for _, ts := range ba.Status.Targets {
		current[ts.Name] = ts.UID
	}
	// A chunk labelled for the account but not owned by it is no record of the manager's.
	results := account.RecordedInOrder(v1alpha1.OwnedChunks(ba, chunks))
	completed := account.CompletedIndexes(&ba.Status)
	standing := account.StandingResults(m, &ba.Spec, current, ba.Status.History, completed, results)
	for o := range standing {
		if o < len(states) && states[o] != stateMissing {
			states[o] = stateAccepted
		}
	}
	for _, r := range results {
		o, assigned := m.ShardOf(r.Target, r.Index)
		if !assigned || o >= len(states) || current[r.Target] != r.JobUID {
			continue // results of no shard, or of a superseded identity, concern no cell
		}
		s, stands := standing[o]
		switch {
		case stands && s.PodUID == r.PodUID:
		case stands:
			// A further result for an accepted shard: a conflict when it would have been
			// accepted on its own and disagrees with the one that stands.
			alone := account.StandingResults(m, &ba.Spec, current, ba.Status.History, completed, []account.Result{r})
			if _, ok := alone[o]; ok && r.Digest != s.Digest {
				states[o] = stateConflict
			}
		case !account.CompletedIndex(completed, r.Target, r.Index):
			// Its Job has not completed the index (yet): accepted or rejected, the result
			// decides nothing, the controller says; its shard waits, as the status has it.
		default:
			if states[o] != stateConflict {
				states[o] = stateRejected
			}
		}
	}
}

// gridCell is one cell: a run of shards in one group and the worst state among them.
type gridCell struct {
	First, Last int // shard ordinals of the run (in index order: First is the first shard)
	Count       int
	State       shardState
}

// cellsOf folds a group's shards, in index order, into cells of per shards each.
func (sm *shardMap) cellsOf(g *shardGroup, per int) []gridCell {
	cells := make([]gridCell, 0, (g.size()+per-1)/per)
	var cur gridCell
	for _, r := range g.Runs {
		for o := r.First; o <= r.Last && o < sm.Total; o++ {
			s := sm.States[o]
			if cur.Count == 0 {
				cur = gridCell{First: o, Last: o, Count: 1, State: s}
			} else {
				cur.Last, cur.State = o, max(cur.State, s)
				cur.Count++
			}
			if cur.Count == per {
				cells = append(cells, cur)
				cur = gridCell{}
			}
		}
	}
	if cur.Count > 0 {
		cells = append(cells, cur)
	}
	return cells
}

// shardsPerCell is the smallest run length that keeps the map within budget cells.
func (sm *shardMap) shardsPerCell(budget int) int {
	n := 0
	for i := range sm.Groups {
		n += sm.Groups[i].size()
	}
	if budget <= 0 || n <= budget {
		return 1
	}
	return (n + budget - 1) / budget
}
