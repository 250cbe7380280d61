package account

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
)

// The model-based test: random valid mappings (shards reordered, several assignment
// entries per target, several Jobs and JobSet children, repairs, repairs on an original
// Job) and random observations over two steps (indexes completing and failing, repeated
// pods, terminal conditions, Jobs deleted or recreated, results good and bad), with the
// account compared exactly against a naive model that looks at one (target, index)
// identity and one shard at a time. The model never uses runs, intervals or the
// mapping: only per-index tables (indexset renders its sets as strings, nothing more).

// mIdentity is one (target, index) identity of the model and the shard it stands for.
type mIdentity struct {
	target string
	index  int
	shard  int
	repair bool
}

// mTarget is one assignment target: indexes 0..n-1, each assigned one shard.
type mTarget struct {
	key string
	ref v1alpha1.TargetRef
	job string
	n   int
}

// mJob is the model's view of one identity of a target, as last observed.
type mJob struct {
	uid                        string
	completed, failed          []bool
	terminal                   string
	criteriaMet, failureTarget bool
	pods                       []PodAttempt
	podsListed                 bool
}

// mStep is what the controller sees at one step: Jobs by target key (absent: not
// found) and every result recorded so far.
type mStep struct {
	jobs    map[string]*mJob
	results []Result
}

type modelCase struct {
	spec    *v1alpha1.BatchAccountSpec
	names   []string
	targets []*mTarget
	// ids in spec order: original entries first, then repairs.
	ids   []mIdentity
	steps [2]mStep
}

func (c *modelCase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shards %v\n", c.names)
	for i, a := range c.spec.Assignments {
		fmt.Fprintf(&b, "assignments[%d] %s indexes %q shards %v ordinals %q repair %v\n", i, string(a.Target.Key()), a.Indexes, a.Shards, a.ShardOrdinals, a.Repair)
	}
	for s, st := range c.steps {
		for _, t := range c.targets {
			j := st.jobs[t.key]
			if j == nil {
				fmt.Fprintf(&b, "step %d %s: not found\n", s, t.key)
				continue
			}
			fmt.Fprintf(&b, "step %d %s: uid %s completed %s failed %s terminal %q pods %v listed %v\n", s, t.key, j.uid, setOf(j.completed), setOf(j.failed), j.terminal, j.pods, j.podsListed)
		}
		fmt.Fprintf(&b, "step %d results: %d\n", s, len(st.results))
	}
	return b.String()
}

func setOf(b []bool) string {
	var ints []int
	for i, ok := range b {
		if ok {
			ints = append(ints, i)
		}
	}
	return indexset.Of(ints...).String()
}

// genModelCase draws one account from r.
func genModelCase(r *rand.Rand) *modelCase {
	n := 1 + r.IntN(24)
	c := &modelCase{spec: &v1alpha1.BatchAccountSpec{InputRevision: "D", ModelRevision: "m-2026-11"}}
	compact := r.IntN(2) == 0
	c.names = make([]string, n)
	for o := range n {
		if compact {
			c.names[o] = fmt.Sprintf("s%d", o)
		} else {
			c.names[o] = fmt.Sprintf("%c%d", 'A'+r.IntN(26), o)
		}
	}
	if compact {
		c.spec.Shards = v1alpha1.ShardPopulation{Prefix: "s", Count: ptr.To(int32(n))}
	} else {
		c.spec.Shards = v1alpha1.ShardPopulation{Names: slices.Clone(c.names)}
	}
	if r.IntN(2) == 0 {
		c.spec.Acceptance = &v1alpha1.AcceptanceCriterion{RequireResults: true}
	}

	// A partition: the shards in random order, cut among the original targets.
	perm := r.Perm(n)
	nTargets := 1 + r.IntN(min(n, 5))
	cuts := r.Perm(n - 1)[:nTargets-1]
	for i := range cuts {
		cuts[i]++
	}
	slices.Sort(cuts)
	cuts = append(append([]int{0}, cuts...), n)
	children := 0
	var entries []v1alpha1.Assignment
	var entryIDs [][]mIdentity
	for ti := range nTargets {
		t := &mTarget{}
		if r.IntN(3) == 0 {
			t.ref = v1alpha1.TargetRef{JobSet: "train", ReplicatedJob: "workers", JobIndex: ptr.To(int32(children))}
			t.job = fmt.Sprintf("train-workers-%d", children)
			children++
		} else {
			t.job = fmt.Sprintf("j%d", ti)
			t.ref = v1alpha1.TargetRef{Job: t.job}
		}
		t.key = string(t.ref.Key())
		shards := perm[cuts[ti]:cuts[ti+1]]
		t.n = len(shards)
		c.targets = append(c.targets, t)
		// Index i gets shard shards[order[i]]: indexes and shards in independent orders.
		order := r.Perm(t.n)
		// The target's indexes split among up to three entries, each in index order.
		nEntries := 1 + r.IntN(min(t.n, 3))
		parts := make([][]int, nEntries)
		for i := range t.n {
			e := r.IntN(nEntries)
			parts[e] = append(parts[e], i)
		}
		for _, idx := range parts {
			if len(idx) == 0 {
				continue
			}
			a := v1alpha1.Assignment{Target: t.ref, Indexes: indexset.Of(idx...).String()}
			var ids []mIdentity
			var ords []int
			for _, i := range idx {
				o := shards[order[i]]
				ids = append(ids, mIdentity{target: t.key, index: i, shard: o})
				ords = append(ords, o)
				a.Shards = append(a.Shards, c.names[o])
			}
			if slices.IsSorted(ords) && r.IntN(2) == 0 {
				// Ascending shards may be given as ordinals as well.
				a.Shards, a.ShardOrdinals = nil, indexset.Of(ords...).String()
			}
			entries = append(entries, a)
			entryIDs = append(entryIDs, ids)
		}
	}
	// Original entries in random order: a partition does not depend on it.
	r.Shuffle(len(entries), func(i, j int) {
		entries[i], entries[j] = entries[j], entries[i]
		entryIDs[i], entryIDs[j] = entryIDs[j], entryIDs[i]
	})

	// Repairs: a further identity for assigned shards, on a new Job or on new indexes
	// of an original Job; two repairs may name the same shard.
	for ri := range r.IntN(3) {
		var t *mTarget
		if r.IntN(4) == 0 {
			for _, ot := range c.targets {
				if ot.ref.Job != "" {
					t = ot
					break
				}
			}
		}
		if t == nil {
			t = &mTarget{job: fmt.Sprintf("r%d", ri)}
			t.ref = v1alpha1.TargetRef{Job: t.job}
			t.key = string(t.ref.Key())
			c.targets = append(c.targets, t)
		}
		m := 1 + r.IntN(min(3, n))
		a := v1alpha1.Assignment{Target: t.ref, Indexes: indexset.Range(t.n, t.n+m-1).String(), Repair: true}
		var ids []mIdentity
		for k, o := range r.Perm(n)[:m] {
			ids = append(ids, mIdentity{target: t.key, index: t.n + k, shard: o, repair: true})
			a.Shards = append(a.Shards, c.names[o])
		}
		t.n += m
		entries = append(entries, a)
		entryIDs = append(entryIDs, ids)
	}
	c.spec.Assignments = entries
	for _, ids := range entryIDs {
		c.ids = append(c.ids, ids...)
	}

	// Step 0: each target found (a first identity) or not yet.
	c.steps[0].jobs = map[string]*mJob{}
	for _, t := range c.targets {
		if r.IntN(6) != 0 {
			c.steps[0].jobs[t.key] = genJob(r, t, t.key+"-uid1", nil)
		}
	}
	c.steps[0].results = c.genResults(r, 0, nil)
	// Step 1: Jobs progress, are deleted, recreated (a new UID), or appear.
	c.steps[1].jobs = map[string]*mJob{}
	for _, t := range c.targets {
		prev := c.steps[0].jobs[t.key]
		var j *mJob
		switch x := r.IntN(10); {
		case prev == nil && x < 5:
		case prev == nil:
			j = genJob(r, t, t.key+"-uid2", nil)
		case x < 2:
		case x == 2:
			j = genJob(r, t, t.key+"-uid2", nil)
		default:
			j = genJob(r, t, prev.uid, prev)
		}
		if j != nil {
			c.steps[1].jobs[t.key] = j
		}
	}
	c.steps[1].results = c.genResults(r, 1, c.steps[0].results)
	return c
}

// genJob draws an identity's observation; with prev, one that follows it (completed and
// failed indexes and pods stay, a terminal condition is final).
func genJob(r *rand.Rand, t *mTarget, uid string, prev *mJob) *mJob {
	j := &mJob{uid: uid, completed: make([]bool, t.n), failed: make([]bool, t.n), podsListed: r.IntN(2) == 0}
	if prev != nil {
		copy(j.completed, prev.completed)
		copy(j.failed, prev.failed)
		j.pods = slices.Clone(prev.pods)
		j.terminal, j.criteriaMet, j.failureTarget = prev.terminal, prev.criteriaMet, prev.failureTarget
		if j.terminal != "" {
			return j
		}
	}
	all, anyFailed := true, false
	for i := range t.n {
		switch {
		case j.completed[i] || j.failed[i]:
		case r.IntN(10) < 6:
			j.completed[i] = true
		case r.IntN(3) == 0:
			j.failed[i] = true
		}
		if j.completed[i] || r.IntN(10) == 0 {
			// Successful pods: none seen (deleted), one, or repeats; rarely one whose
			// index the Job has not recorded yet.
			for range r.IntN(3) {
				j.pods = append(j.pods, PodAttempt{UID: types.UID(fmt.Sprintf("%s-p%d", uid, len(j.pods))), Index: i})
			}
		}
		all = all && j.completed[i]
		anyFailed = anyFailed || j.failed[i]
	}
	switch {
	case all && r.IntN(2) == 0:
		j.criteriaMet, j.terminal = true, TerminalComplete
	case all && r.IntN(4) == 0:
		j.criteriaMet = true
	case anyFailed && r.IntN(2) == 0:
		j.failureTarget, j.terminal = true, TerminalFailed
	}
	return j
}

// genResults appends the results recorded at step s to before: good ones, forged
// claims, wrong revisions, criterion failures, stale identities, conflicts, repeats and
// results of unassigned identities, in random order.
func (c *modelCase) genResults(r *rand.Rand, s int, before []Result) []Result {
	shardOf := c.shardTable()
	var fresh []Result
	for _, t := range c.targets {
		j := c.steps[s].jobs[t.key]
		if j == nil {
			continue
		}
		for i, done := range j.completed {
			if !done || r.IntN(2) == 0 {
				continue
			}
			o := shardOf[t.key][i]
			res := Result{
				Target: t.key, JobUID: types.UID(j.uid), Index: i, Pod: fmt.Sprintf("%s-%d-%d", t.job, i, s), PodUID: types.UID(fmt.Sprintf("%s-%d", j.uid, i)),
				Shard: c.names[o], InputRevision: "D", ModelRevision: "m-2026-11", Digest: "sha256:" + c.names[o],
			}
			switch r.IntN(12) {
			case 0:
				res.Shard = c.names[r.IntN(len(c.names))]
			case 1:
				res.InputRevision = "C"
			case 2:
				res.ModelRevision = "m-2026-10"
			case 3:
				res.RejectReason, res.RejectMessage = v1alpha1.RejectionCriterionNotMet, "result.valid == result.records is false"
			case 4:
				res.JobUID = "uid-old"
			case 5:
				other := res
				other.Digest, other.Pod = "sha256:other", res.Pod+"-b"
				fresh = append(fresh, other)
			case 6:
				fresh = append(fresh, res)
			}
			fresh = append(fresh, res)
		}
	}
	if r.IntN(5) == 0 {
		fresh = append(fresh, Result{Target: "job/nobody", JobUID: "u", Index: 0, Pod: "nobody-0", Shard: c.names[0], InputRevision: "D", ModelRevision: "m-2026-11"})
	}
	r.Shuffle(len(fresh), func(i, j int) { fresh[i], fresh[j] = fresh[j], fresh[i] })
	return append(slices.Clone(before), fresh...)
}

// shardTable is the model's assignment: target key -> index -> shard ordinal.
func (c *modelCase) shardTable() map[string]map[int]int {
	out := map[string]map[int]int{}
	for _, id := range c.ids {
		if out[id.target] == nil {
			out[id.target] = map[int]int{}
		}
		out[id.target][id.index] = id.shard
	}
	return out
}

// firstEntry is the position of the first assignment that names target key.
func (c *modelCase) firstEntry(key string) int {
	for i, a := range c.spec.Assignments {
		if string(a.Target.Key()) == key {
			return i
		}
	}
	return len(c.spec.Assignments)
}

// observations renders step s as the controller would hand it to Compute.
func (c *modelCase) observations(s int) map[string]Observation {
	obs := map[string]Observation{}
	for _, t := range c.targets {
		j := c.steps[s].jobs[t.key]
		if j == nil {
			continue
		}
		succeeded := 0
		for _, done := range j.completed {
			if done {
				succeeded++
			}
		}
		jw := makeJob(t.job, j.uid, int32(t.n)).Completed(setOf(j.completed), int32(succeeded)).ResourceVersion(fmt.Sprint(s + 1))
		if f := setOf(j.failed); f != "" {
			jw.FailedIndexes(f)
		}
		if j.criteriaMet {
			jw.Condition(batchv1.JobSuccessCriteriaMet, "CompletionsReached", jobCondAt)
		}
		if j.failureTarget {
			jw.Condition(batchv1.JobFailureTarget, "FailedIndexes", jobCondAt)
		}
		if j.terminal != "" {
			jw.Condition(batchv1.JobConditionType(j.terminal), "Reason"+j.terminal, jobCondAt)
		}
		obs[t.key] = Observation{Job: jw.Facts(), SuccessfulPods: slices.Clone(j.pods), PodsListed: j.podsListed}
	}
	return obs
}

// mState is the model's view of one target at a step.
type mState struct {
	found, deleted bool
	// job is the current identity (found) or the deleted identity's record.
	job *mJob
	// superseded is the identity that went to history at this step.
	superseded *mJob
}

// states follows the durable-ledger rules per target: a Job observed once and gone
// keeps its record; a JobSet child gone before it terminated is a restart (its identity
// goes to history), one gone after it terminated keeps its record; a new UID supersedes.
func (c *modelCase) states(s int) map[string]mState {
	out := map[string]mState{}
	for _, t := range c.targets {
		cur := c.steps[s].jobs[t.key]
		var prev *mJob
		if s > 0 {
			prev = c.steps[s-1].jobs[t.key]
		}
		var st mState
		switch {
		case cur != nil:
			st = mState{found: true, job: cur}
			if prev != nil && prev.uid != cur.uid {
				st.superseded = prev
			}
		case prev != nil && (t.ref.Job != "" || prev.terminal != ""):
			st = mState{deleted: true, job: prev}
		case prev != nil:
			st = mState{superseded: prev}
		}
		out[t.key] = st
	}
	return out
}

// checkModel compares the account computed at step s with the model, exactly.
func (c *modelCase) checkModel(s int, out Output) []string {
	var errs []string
	errorf := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	st := out.Status
	n := len(c.names)
	states := c.states(s)
	shardOf := c.shardTable()
	completed := func(key string, i int) bool {
		ms := states[key]
		return (ms.found || ms.deleted) && i < len(ms.job.completed) && ms.job.completed[i]
	}
	// mayRun is whether an identity that did not complete may still run its index: its
	// target's Job is not created yet or between a restart's delete and create, or runs,
	// is not ending and did not fail the index.
	mayRun := func(id mIdentity) bool {
		ms := states[id.target]
		if !ms.found {
			return !ms.deleted
		}
		j := ms.job
		failed := id.index < len(j.failed) && j.failed[id.index]
		return j.terminal == "" && !j.criteriaMet && !j.failureTarget && !failed
	}

	// The mapping, one identity at a time: ShardOf, IdentityOf, and ShardsOf of every
	// identity's target over the completed indexes (the set coverage uses).
	m := out.Mapping
	if len(m.Problems) != 0 {
		errorf("valid mapping compiled with problems %+v", m.Problems)
	}
	for _, id := range c.ids {
		if o, ok := m.ShardOf(id.target, id.index); !ok || o != id.shard {
			errorf("ShardOf(%s, %d) = %d, %v; want %d", id.target, id.index, o, ok, id.shard)
		}
		if !id.repair {
			if key, i, ok := m.IdentityOf(id.shard); !ok || key != id.target || i != id.index {
				errorf("IdentityOf(%s) = %s index %d, %v; want %s index %d", c.names[id.shard], key, i, ok, id.target, id.index)
			}
		}
	}
	for _, t := range c.targets {
		for _, repair := range []bool{false, true} {
			var idx, want []int
			for i := range t.n {
				if completed(t.key, i) {
					idx = append(idx, i)
				}
			}
			for _, id := range c.ids {
				if id.target == t.key && id.repair == repair && completed(t.key, id.index) {
					want = append(want, id.shard)
				}
			}
			if got := m.ShardsOf(t.key, indexset.Of(idx...), repair); got.String() != indexset.Of(want...).String() {
				errorf("ShardsOf(%s, %s, repair=%v) = %s; want %s", t.key, indexset.Of(idx...), repair, got, indexset.Of(want...))
			}
		}
	}

	// Coverage per shard: covered when any of its identities completed.
	byOriginal, byRepair := make([]bool, n), make([]bool, n)
	for _, id := range c.ids {
		if completed(id.target, id.index) {
			if id.repair {
				byRepair[id.shard] = true
			} else {
				byOriginal[id.shard] = true
			}
		}
	}
	var missing []int
	covered := 0
	var coveredBy []v1alpha1.ShardCoverage
	for o := range n {
		switch {
		case byOriginal[o]:
			covered++
		case byRepair[o]:
			covered++
			// The repair identity that did cover it: the first, in spec order, that completed.
			for _, id := range c.ids {
				if id.repair && id.shard == o && completed(id.target, id.index) {
					coveredBy = append(coveredBy, v1alpha1.ShardCoverage{Shard: c.names[o], Target: id.target, Index: int32(id.index)})
					break
				}
			}
		default:
			missing = append(missing, o)
		}
	}
	missingSet := indexset.Of(missing...)
	if int(st.Shards.Total) != n || int(st.Shards.Covered) != covered || st.Shards.MissingOrdinals != missingSet.String() {
		errorf("shards total %d covered %d missing %q; want %d, %d, %q", st.Shards.Total, st.Shards.Covered, st.Shards.MissingOrdinals, n, covered, missingSet)
	}
	if !equality.Semantic.DeepEqual(st.Shards.CoveredBy, coveredBy) {
		errorf("coveredBy = %+v; want %+v", st.Shards.CoveredBy, coveredBy)
	}

	// Targets: identity, record, attempts.
	byName := map[string]v1alpha1.TargetStatus{}
	for _, ts := range st.Targets {
		byName[ts.Name] = ts
	}
	// History in the order the spec first names each target.
	var superseded []*mTarget
	for _, t := range c.targets {
		if states[t.key].superseded != nil {
			superseded = append(superseded, t)
		}
	}
	slices.SortStableFunc(superseded, func(a, b *mTarget) int { return c.firstEntry(a.key) - c.firstEntry(b.key) })
	var history []string
	for _, t := range superseded {
		h := states[t.key].superseded
		history = append(history, t.key+" "+h.uid+" "+setOf(h.completed))
	}
	for _, t := range c.targets {
		ms := states[t.key]
		ts, ok := byName[t.key]
		if !ok {
			errorf("no status for target %s", t.key)
			continue
		}
		if ts.Found != ms.found || ts.Deleted != ms.deleted {
			errorf("%s found %v deleted %v; want %v, %v", t.key, ts.Found, ts.Deleted, ms.found, ms.deleted)
		}
		if !ms.found && !ms.deleted {
			if ts.UID != "" {
				errorf("%s not found but reports UID %s", t.key, ts.UID)
			}
			continue
		}
		if string(ts.UID) != ms.job.uid || ts.CompletedIndexes != setOf(ms.job.completed) || ts.FailedIndexes != setOf(ms.job.failed) || ts.Terminal != ms.job.terminal {
			errorf("%s uid %s completed %q failed %q terminal %q; want %s, %q, %q, %q", t.key, ts.UID, ts.CompletedIndexes, ts.FailedIndexes, ts.Terminal,
				ms.job.uid, setOf(ms.job.completed), setOf(ms.job.failed), ms.job.terminal)
		}
		// Attempts are pods, indexes are indexes: every index completed or with a pod
		// counts once, every further distinct pod of an index once more.
		uids := map[int][]types.UID{}
		for _, p := range ms.job.pods {
			if !slices.Contains(uids[p.Index], p.UID) {
				uids[p.Index] = append(uids[p.Index], p.UID)
			}
		}
		attempts := 0
		var repeated []int
		var ledger []v1alpha1.IndexAttempts
		for i := range t.n {
			if ms.job.completed[i] || len(uids[i]) > 0 {
				attempts++
			}
			if len(uids[i]) > 1 {
				attempts += len(uids[i]) - 1
				repeated = append(repeated, i)
				ledger = append(ledger, v1alpha1.IndexAttempts{Index: int32(i), Pods: uids[i]})
			}
		}
		if int(ts.SuccessfulAttempts) != attempts || ts.RepeatedIndexes != indexset.Of(repeated...).String() {
			errorf("%s attempts %d repeated %q; want %d, %q", t.key, ts.SuccessfulAttempts, ts.RepeatedIndexes, attempts, indexset.Of(repeated...))
		}
		if !equality.Semantic.DeepEqual(ts.AttemptLedger, ledger) {
			errorf("%s attempt ledger %+v; want %+v", t.key, ts.AttemptLedger, ledger)
		}
	}
	var gotHistory []string
	for _, h := range st.History {
		gotHistory = append(gotHistory, h.Target+" "+string(h.UID)+" "+h.CompletedIndexes)
	}
	if !slices.Equal(gotHistory, history) {
		errorf("history %v; want %v", gotHistory, history)
	}

	// Results, one at a time in recording order: the first good result of a shard's
	// current identity stands.
	current := map[string]string{}
	for key, ms := range states {
		if ms.found || ms.deleted {
			current[key] = ms.job.uid
		}
	}
	accepted := map[int]string{}
	reported, rejectedOrd := map[int]bool{}, map[int]bool{}
	// reportedBy are the identities (target and index) whose current Job reported a result.
	reportedBy := map[mIdentity]bool{}
	rejected, conflicts := 0, 0
	for _, res := range c.steps[s].results {
		o, ok := shardOf[res.Target][res.Index]
		if !ok {
			rejected++
			continue
		}
		if current[res.Target] != string(res.JobUID) {
			// A superseded identity's result stands for no shard, rejected or not.
			rejected++
			continue
		}
		reported[o] = true
		reportedBy[mIdentity{target: res.Target, index: res.Index}] = true
		switch {
		case res.RejectReason != "":
			rejected++
			rejectedOrd[o] = true
		case res.Shard != c.names[o] || res.InputRevision != "D" || res.ModelRevision != "m-2026-11":
			rejected++
			rejectedOrd[o] = true
		default:
			if d, ok := accepted[o]; ok {
				if d != res.Digest {
					conflicts++
				}
				continue
			}
			accepted[o] = res.Digest
		}
	}
	requireResults := c.spec.Acceptance != nil && c.spec.Acceptance.RequireResults
	// A shard's result can no longer arrive when one of its identities completed and can
	// report nothing more (deleted, or terminated with its pods listed), none that
	// completed can still report, none may still run (its Job not created yet or between
	// a restart's delete and create, or running and its index not failed), it has no
	// result of its current identity, and no successful pod of a target that covers
	// anything is left for its identities.
	var lost []int
	if requireResults {
		held := map[int]bool{}
		for _, t := range c.targets {
			ms := states[t.key]
			coversAny := false
			for i := range t.n {
				coversAny = coversAny || completed(t.key, i)
			}
			if ms.found && coversAny {
				for _, p := range ms.job.pods {
					held[shardOf[t.key][p.Index]] = true
				}
			}
		}
		for o := range n {
			finalDone, openDone := false, false
			for _, id := range c.ids {
				if id.shard != o {
					continue
				}
				ms := states[id.target]
				if !completed(id.target, id.index) {
					openDone = openDone || mayRun(id)
					continue
				}
				if ms.deleted || (ms.found && ms.job.terminal != "" && ms.job.podsListed) {
					finalDone = true
				} else {
					openDone = true
				}
			}
			_, acc := accepted[o]
			if finalDone && !openDone && !acc && !reported[o] && !held[o] {
				lost = append(lost, o)
			}
		}
	}
	// A rejected shard is decided only when none of its identities that reported no result
	// may still report one: one not created yet (or between a restart's delete and
	// create), one that may still run its index and did not complete it, one that
	// completed it with its pods not listed, or one with a successful pod of the index.
	mayReport := func(id mIdentity) bool {
		if reportedBy[mIdentity{target: id.target, index: id.index}] {
			return false
		}
		ms := states[id.target]
		if !ms.found && !ms.deleted {
			return true
		}
		if !completed(id.target, id.index) && mayRun(id) {
			return true
		}
		if !ms.found {
			return false
		}
		if completed(id.target, id.index) && !ms.job.podsListed {
			return true
		}
		return slices.ContainsFunc(ms.job.pods, func(p PodAttempt) bool { return p.Index == id.index && !p.NoResult })
	}
	var rejectedPending []int
	for o := range rejectedOrd {
		if _, acc := accepted[o]; acc {
			continue
		}
		undecided := false
		for _, id := range c.ids {
			undecided = undecided || (id.shard == o && mayReport(id))
		}
		if !undecided {
			rejectedPending = append(rejectedPending, o)
		}
	}
	var acceptedOrds []int
	for o := range accepted {
		acceptedOrds = append(acceptedOrds, o)
	}
	if int(st.Shards.Accepted) != len(accepted) || int(st.Results.Rejected) != rejected || int(st.Results.Conflicts) != conflicts {
		errorf("accepted %d rejected %d conflicts %d; want %d (%s), %d, %d", st.Shards.Accepted, st.Results.Rejected, st.Results.Conflicts, len(accepted), indexset.Of(acceptedOrds...), rejected, conflicts)
	}
	if requireResults {
		if int(st.Results.Missing) != len(lost) || st.Results.MissingOrdinals != indexset.Of(lost...).String() || st.Results.RejectedOrdinals != indexset.Of(rejectedPending...).String() {
			errorf("results missing %d %q rejected ordinals %q; want %d %q, %q", st.Results.Missing, st.Results.MissingOrdinals, st.Results.RejectedOrdinals,
				len(lost), indexset.Of(lost...), indexset.Of(rejectedPending...))
		}
	}
	done := covered
	if requireResults {
		done = len(accepted)
	}
	if want := int32(done * 100 / n); st.Shards.Progress != want {
		errorf("progress %d; want %d", st.Shards.Progress, want)
	}

	// Verdicts.
	type verdict struct {
		status metav1.ConditionStatus
		reason string
	}
	want := map[string]verdict{v1alpha1.ConditionAssignmentValid: {metav1.ConditionTrue, v1alpha1.ReasonValid}}
	anyFound := false
	for _, ms := range states {
		anyFound = anyFound || ms.found || ms.deleted
	}
	switch {
	case len(missing) == 0:
		want[v1alpha1.ConditionShardsCovered] = verdict{metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered}
	case !anyFound:
		want[v1alpha1.ConditionShardsCovered] = verdict{metav1.ConditionFalse, v1alpha1.ReasonTargetsNotFound}
	default:
		want[v1alpha1.ConditionShardsCovered] = verdict{metav1.ConditionFalse, v1alpha1.ReasonShardsMissing}
	}
	var lostTargets, waiting, lostCovered, failed int
	for _, t := range c.targets {
		ms := states[t.key]
		switch {
		case ms.deleted && ms.job.terminal == "":
			// Deleted before it terminated: dead end while a shard of its identities is
			// missing and no other identity may still cover it, awaited while each missing
			// one has such an identity, standing like a failed Job once repairs covered them.
			stillMissing, deadEnd := false, false
			for _, id := range c.ids {
				if id.target != t.key || !slices.Contains(missing, id.shard) {
					continue
				}
				stillMissing = true
				coverable := false
				for _, other := range c.ids {
					coverable = coverable || (other.shard == id.shard && !completed(other.target, other.index) && mayRun(other))
				}
				deadEnd = deadEnd || !coverable
			}
			switch {
			case deadEnd:
				lostTargets++
			case stillMissing:
				waiting++
			default:
				lostCovered++
			}
		case !ms.found && !ms.deleted, ms.job.terminal == "":
			waiting++
		case ms.job.terminal == TerminalFailed:
			failed++
		}
	}
	switch {
	case lostTargets > 0:
		want[v1alpha1.ConditionTerminated] = verdict{metav1.ConditionFalse, v1alpha1.ReasonTargetDeleted}
	case waiting > 0:
		want[v1alpha1.ConditionTerminated] = verdict{metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination}
	case lostCovered > 0:
		want[v1alpha1.ConditionTerminated] = verdict{metav1.ConditionTrue, v1alpha1.ReasonTargetDeleted}
	case failed > 0:
		want[v1alpha1.ConditionTerminated] = verdict{metav1.ConditionTrue, v1alpha1.ReasonTargetFailed}
	default:
		want[v1alpha1.ConditionTerminated] = verdict{metav1.ConditionTrue, v1alpha1.ReasonComplete}
	}
	switch {
	case !requireResults:
		want[v1alpha1.ConditionResultsAccepted] = verdict{metav1.ConditionTrue, v1alpha1.ReasonResultsNotRequired}
	case len(accepted) == n:
		want[v1alpha1.ConditionResultsAccepted] = verdict{metav1.ConditionTrue, v1alpha1.ReasonAllResultsAccepted}
	case len(rejectedPending) > 0:
		want[v1alpha1.ConditionResultsAccepted] = verdict{metav1.ConditionFalse, v1alpha1.ReasonResultRejected}
	case len(lost) > 0:
		want[v1alpha1.ConditionResultsAccepted] = verdict{metav1.ConditionFalse, v1alpha1.ReasonMissingResult}
	default:
		want[v1alpha1.ConditionResultsAccepted] = verdict{metav1.ConditionFalse, v1alpha1.ReasonResultsPending}
	}
	covV, termV, resV := want[v1alpha1.ConditionShardsCovered], want[v1alpha1.ConditionTerminated], want[v1alpha1.ConditionResultsAccepted]
	switch {
	case termV.status != metav1.ConditionTrue && termV.reason == v1alpha1.ReasonTargetDeleted:
		want[v1alpha1.ConditionAccepted] = verdict{metav1.ConditionFalse, v1alpha1.ReasonTargetDeleted}
	case covV.status != metav1.ConditionTrue:
		want[v1alpha1.ConditionAccepted] = verdict{metav1.ConditionFalse, covV.reason}
	case termV.status != metav1.ConditionTrue:
		want[v1alpha1.ConditionAccepted] = verdict{metav1.ConditionFalse, v1alpha1.ReasonAwaitingTermination}
	case resV.status != metav1.ConditionTrue:
		want[v1alpha1.ConditionAccepted] = verdict{metav1.ConditionFalse, resV.reason}
	default:
		want[v1alpha1.ConditionAccepted] = verdict{metav1.ConditionTrue, v1alpha1.ReasonAccepted}
	}
	for _, typ := range []string{v1alpha1.ConditionAssignmentValid, v1alpha1.ConditionShardsCovered, v1alpha1.ConditionTerminated, v1alpha1.ConditionResultsAccepted, v1alpha1.ConditionAccepted} {
		cnd := meta.FindStatusCondition(st.Conditions, typ)
		if cnd == nil {
			errorf("condition %s missing", typ)
			continue
		}
		if w := want[typ]; cnd.Status != w.status || cnd.Reason != w.reason {
			errorf("%s = %s/%s (%q); want %s/%s", typ, cnd.Status, cnd.Reason, cnd.Message, w.status, w.reason)
		}
	}
	if cnd := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionShardsCovered); cnd != nil {
		if head := fmt.Sprintf("%d/%d shards covered", covered, n); !strings.HasPrefix(cnd.Message, head) {
			errorf("ShardsCovered message %q does not start with %q", cnd.Message, head)
		}
	}
	return errs
}

// runModel draws the case of seed and checks both steps against the model.
// It returns the condition reasons the account reached, so that TestModel can show the
// generator draws every verdict.
func runModel(t *testing.T, seed uint64) []string {
	t.Helper()
	var reasons []string
	c := genModelCase(rand.New(rand.NewPCG(seed, 0x5eed)))
	var prev *v1alpha1.BatchAccountStatus
	for s := range c.steps {
		out := Compute(Input{
			Namespace: "ml-team", Generation: 1, Spec: c.spec, Previous: prev,
			Observations: c.observations(s), Results: c.steps[s].results, Now: metav1.NewTime(time0.Add(time.Duration(s) * 10 * time.Second)),
		})
		check := c.checkModel
		if prev != nil && Final(prev, c.spec, 1) {
			// The model follows what the Jobs do; an Accepted account no longer does
			// (recordStands): it keeps its verdict and the identities that earned it.
			check = func(_ int, out Output) []string { return checkStaysFinal(prev, &out.Status) }
		}
		if errs := check(s, out); len(errs) > 0 {
			t.Fatalf("seed %d step %d: the account disagrees with the model:\n  %s\ncase:\n%s", seed, s, strings.Join(errs, "\n  "), c)
		}
		for _, cnd := range out.Status.Conditions {
			reasons = append(reasons, cnd.Type+"/"+cnd.Reason)
		}
		if len(out.Status.History) > 0 {
			reasons = append(reasons, "history")
		}
		if len(out.Status.Shards.CoveredBy) > 0 {
			reasons = append(reasons, "coveredBy")
		}
		prev = &out.Status
	}
	return reasons
}

// checkStaysFinal lists how st, computed from an Accepted status prev under the same spec,
// takes back what prev said: the verdict, a shard covered or accepted (results not
// required may still be accepted later), or the identity of a target.
func checkStaysFinal(prev, st *v1alpha1.BatchAccountStatus) []string {
	var errs []string
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAccepted); c == nil || c.Status != metav1.ConditionTrue {
		errs = append(errs, fmt.Sprintf("Accepted %+v after Accepted True under the same spec", c))
	}
	if st.Shards.Covered < prev.Shards.Covered || st.Shards.Accepted < prev.Shards.Accepted {
		errs = append(errs, fmt.Sprintf("shards covered/accepted %d/%d, were %d/%d", st.Shards.Covered, st.Shards.Accepted, prev.Shards.Covered, prev.Shards.Accepted))
	}
	for i, t := range st.Targets {
		if i < len(prev.Targets) && t.UID != prev.Targets[i].UID {
			errs = append(errs, fmt.Sprintf("target %s follows %q, was %q", t.Name, t.UID, prev.Targets[i].UID))
		}
	}
	return errs
}

// TestCoveredByNamesTheRepairThatCovered: of two repair identities of shard B, only the
// second completed; status.shards.coveredBy must name it, not the first.
func TestCoveredByNamesTheRepairThatCovered(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").Repair("r1", "0", "B").Repair("r2", "0", "B").SpecObj()
	st := step(t, spec, nil, map[string]Observation{
		"job/j":  {Job: makeJob("j", "uid-j", 2).Completed("0", 1).Facts()},
		"job/r1": {Job: makeJob("r1", "uid-r1", 1).FailedIndexes("0").Facts()},
		"job/r2": {Job: makeJob("r2", "uid-r2", 1).Completed("0", 1).Facts()},
	}).Status
	want := []v1alpha1.ShardCoverage{{Shard: "B", Target: "job/r2", Index: 0}}
	if !equality.Semantic.DeepEqual(st.Shards.CoveredBy, want) {
		t.Errorf("coveredBy = %+v; want %+v", st.Shards.CoveredBy, want)
	}
}

// modelSeeds is how many fixed seeds the normal test runs: enough to draw every shape
// (deleted records, restarts, repairs on original Jobs, lost results) many times, fast
// enough for every mutant of a mutation run.
const modelSeeds = 1500

// TestModel compares the account with the naive per-index model on fixed seeds.
// It also checks that the seeds reach every verdict the model knows, so that a
// generator that stopped drawing a shape would not pass silently.
func TestModel(t *testing.T) {
	seen := map[string]int{}
	for seed := range uint64(modelSeeds) {
		for _, r := range runModel(t, seed) {
			seen[r]++
		}
	}
	for _, want := range []string{
		v1alpha1.ConditionShardsCovered + "/" + v1alpha1.ReasonAllShardsCovered,
		v1alpha1.ConditionShardsCovered + "/" + v1alpha1.ReasonShardsMissing,
		v1alpha1.ConditionShardsCovered + "/" + v1alpha1.ReasonTargetsNotFound,
		v1alpha1.ConditionTerminated + "/" + v1alpha1.ReasonComplete,
		v1alpha1.ConditionTerminated + "/" + v1alpha1.ReasonTargetFailed,
		v1alpha1.ConditionTerminated + "/" + v1alpha1.ReasonAwaitingTermination,
		v1alpha1.ConditionTerminated + "/" + v1alpha1.ReasonTargetDeleted,
		v1alpha1.ConditionResultsAccepted + "/" + v1alpha1.ReasonResultsNotRequired,
		v1alpha1.ConditionResultsAccepted + "/" + v1alpha1.ReasonAllResultsAccepted,
		v1alpha1.ConditionResultsAccepted + "/" + v1alpha1.ReasonResultRejected,
		v1alpha1.ConditionResultsAccepted + "/" + v1alpha1.ReasonMissingResult,
		v1alpha1.ConditionResultsAccepted + "/" + v1alpha1.ReasonResultsPending,
		v1alpha1.ConditionAccepted + "/" + v1alpha1.ReasonAccepted,
		v1alpha1.ConditionAccepted + "/" + v1alpha1.ReasonTargetDeleted,
		v1alpha1.ConditionAccepted + "/" + v1alpha1.ReasonAwaitingTermination,
		"history", "coveredBy",
	} {
		if seen[want] == 0 {
			t.Errorf("no seed reached %s: the generator no longer draws it", want)
		}
	}
	t.Logf("reached: %v", seen)
}

// FuzzModel draws further cases: go test -fuzz FuzzModel ./pkg/account/
func FuzzModel(f *testing.F) {
	for _, s := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { _ = runModel(t, seed) })
}
