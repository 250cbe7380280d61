package account

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
)

// Problem is one reason the mapping or an observation is unusable, with a message a
// person can act on.
type Problem struct {
	Reason  string
	Message string
}

func problemf(reason, format string, args ...any) Problem {
	return Problem{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Shards is the declared shard population: names by ordinal, in either the explicit or
// the compact form. Compact populations are never expanded, so 100,000 shards cost a
// prefix and a count.
type Shards struct {
	names   []string
	ordinal map[string]int
	prefix  string
	count   int
}

// Count is the number of declared shards.
func (s *Shards) Count() int { return s.count }

// Name is the name of the shard with ordinal o.
func (s *Shards) Name(o int) string {
	if s.names != nil {
		return s.names[o]
	}
	return s.prefix + strconv.Itoa(o)
}

// Ordinal returns the ordinal of the shard called name.
func (s *Shards) Ordinal(name string) (int, bool) {
	if s.names != nil {
		o, ok := s.ordinal[name]
		return o, ok
	}
	rest, ok := strings.CutPrefix(name, s.prefix)
	// Only the canonical decimal names a shard: no sign, no leading zero.
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') || strings.TrimLeft(rest, "0123456789") != "" {
		return 0, false
	}
	o, err := strconv.Atoi(rest)
	if err != nil || o < 0 || o >= s.count {
		return 0, false
	}
	return o, true
}

// Describe renders a set of shard ordinals compactly by name: "D", "A, C..F". At most
// limit runs are written; the rest is summarized so that the text stays bounded.
func (s *Shards) Describe(ordinals indexset.Set, limit int) string {
	var b strings.Builder
	ivs := ordinals.Intervals()
	for i, iv := range ivs {
		if i == limit {
			fmt.Fprintf(&b, ", … (+%d more)", ordinals.Count()-countIntervals(ivs[:i]))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.Name(iv.First))
		switch {
		case iv.Last == iv.First+1:
			b.WriteString(", " + s.Name(iv.Last))
		case iv.Last > iv.First:
			b.WriteString(".." + s.Name(iv.Last))
		}
	}
	return b.String()
}

func countIntervals(ivs []indexset.Interval) int {
	n := 0
	for _, iv := range ivs {
		n += iv.Count()
	}
	return n
}

// Run maps Length consecutive completion indexes of one target, from FirstIndex, onto
// Length consecutive shard ordinals from FirstShard. Any assignment is a list of runs,
// so coverage costs O(runs), never O(indexes).
type Run struct {
	Target     string
	FirstIndex int
	FirstShard int
	Length     int
	Repair     bool
	// Entry is the position of the assignment in spec.AllAssignments(): in
	// spec.assignments, then in spec.repairs. Mapping.entryName names it in messages.
	Entry int
}

// indexes is the run's index interval.
func (r Run) indexes() indexset.Interval {
	return indexset.Interval{First: r.FirstIndex, Last: r.FirstIndex + r.Length - 1}
}

// shards is the run's shard-ordinal interval.
func (r Run) shards() indexset.Interval {
	return indexset.Interval{First: r.FirstShard, Last: r.FirstShard + r.Length - 1}
}

// Target is one distinct assignment target and the indexes mapped on it.
type Target struct {
	// Key is the target key (v1alpha1.TargetRef.Key): "job/<name>" or
	// "jobset/<name>/<replicatedJob>/<jobIndex>".
	Key string
	Ref v1alpha1.TargetRef
	// Indexes are all indexes mapped on this target (original and repair).
	Indexes indexset.Set
}

// Mapping is a compiled spec: the shard population, the targets and the runs. It is
// usable for coverage even when invalid, so that an invalid account still shows what it
// observed.
type Mapping struct {
	Shards  Shards
	Targets []Target
	Runs    []Run
	// byShard are the original (non-repair) runs sorted by first shard ordinal.
	byShard []Run
	// byTarget are each target's runs, original and repair, sorted by first index: an
	// identity is looked up by binary search, and a set of indexes is mapped through
	// its target's runs alone, each run finding its part of the set by binary search. A
	// pass over every run per identity, and an intersection with the whole set per run,
	// cost a mapping of many short runs (indexes "0,2,4,…") runs × intervals on every
	// reconcile.
	byTarget map[string][]Run
	// overlapping are the targets with an index in two runs (DuplicateIndex): ShardOf
	// keeps answering for them as the spec orders the runs.
	overlapping map[string]bool
	// Problems found statically, without looking at any Job.
	Problems []Problem
	// assignments is len(spec.assignments): entries from there on are spec.repairs.
	assignments int
	// judging is the spec's JudgingDigest: a JSON encoding and a hash of the whole
	// spec, milliseconds for a large one, taken once with the mapping rather than on
	// every reconcile of the same spec.
	judging string
}

// JudgingDigest is the JudgingDigest of the spec the mapping was compiled from.
func (m *Mapping) JudgingDigest() string { return m.judging }

// entryName names the entry of spec.AllAssignments() at position e as the spec spells
// it: "assignments[2]", or "repairs[0]" for an entry of spec.repairs.
func (m *Mapping) entryName(e int) string {
	if e >= m.assignments {
		return fmt.Sprintf("repairs[%d]", e-m.assignments)
	}
	return fmt.Sprintf("assignments[%d]", e)
}

// Compile checks the spec of an account in namespace and compiles it into runs. The
// Mapping keeps no reference into spec: a cached one (MappingCache) is read by goroutines
// that never saw the object it came from, which its reader may go on writing.
func Compile(namespace string, spec *v1alpha1.BatchAccountSpec) *Mapping {
	m := &Mapping{assignments: len(spec.Assignments), judging: spec.JudgingDigest()}
	m.compileShards(&spec.Shards)
	targets := map[string]int{}
	var targetIndexes [][]indexset.Interval
	// spec.repairs count exactly as assignments marked repair.
	all := spec.AllAssignments()
	for i := range all {
		a := &all[i]
		key, ok := m.checkTarget(namespace, i, a.Target)
		if !ok {
			continue
		}
		runs, ok := m.compileAssignment(i, key, a)
		if !ok {
			continue
		}
		ti, seen := targets[key]
		if !seen && len(m.Targets) == MaxTargets {
			// spec.assignments and spec.repairs are bounded apart: together they may name
			// more targets than a status holds (status.targets' MaxItems), and a status
			// the API server refuses is never written again.
			m.Problems = append(m.Problems, problemf(v1alpha1.ReasonInvalidTarget,
				"%s names a target beyond the %d an account may name (spec.assignments and spec.repairs together): "+
					"re-run the shards instead in a Job created again under the name of the target that maps them, once its Job is gone: a new identity of a target covers its shards without a repair",
				m.entryName(i), MaxTargets))
			continue
		}
		if !seen {
			ti = len(m.Targets)
			targets[key] = ti
			m.Targets = append(m.Targets, Target{Key: key, Ref: *a.Target.DeepCopy()})
			targetIndexes = append(targetIndexes, nil)
		}
		m.Runs = append(m.Runs, runs...)
		for _, r := range runs {
			targetIndexes[ti] = append(targetIndexes[ti], r.indexes())
		}
	}
	for i, ivs := range targetIndexes {
		m.Targets[i].Indexes = indexset.FromIntervals(ivs...)
	}
	for _, r := range m.Runs {
		if !r.Repair {
			m.byShard = append(m.byShard, r)
		}
	}
	slices.SortFunc(m.byShard, func(a, b Run) int { return cmp.Compare(a.FirstShard, b.FirstShard) })
	m.indexTargets()
	m.checkPartition()
	return m
}

// indexTargets fills byTarget and overlapping from Runs.
func (m *Mapping) indexTargets() {
	counts := make(map[string]int, len(m.Targets))
	for _, r := range m.Runs {
		counts[r.Target]++
	}
	m.byTarget = make(map[string][]Run, len(counts))
	for _, r := range m.Runs {
		runs, ok := m.byTarget[r.Target]
		if !ok {
			runs = make([]Run, 0, counts[r.Target])
		}
		m.byTarget[r.Target] = append(runs, r)
	}
	for key, runs := range m.byTarget {
		slices.SortStableFunc(runs, func(a, b Run) int { return cmp.Compare(a.FirstIndex, b.FirstIndex) })
		for i := 1; i < len(runs); i++ {
			if runs[i-1].indexes().Last >= runs[i].FirstIndex {
				if m.overlapping == nil {
					m.overlapping = map[string]bool{}
				}
				m.overlapping[key] = true
				break
			}
		}
	}
}

func (m *Mapping) compileShards(p *v1alpha1.ShardPopulation) {
	switch {
	case len(p.Names) > 0:
		m.Shards.names = slices.Clone(p.Names)
		m.Shards.count = len(p.Names)
		m.Shards.ordinal = make(map[string]int, len(p.Names))
		for i, n := range p.Names {
			if _, dup := m.Shards.ordinal[n]; dup {
				m.Problems = append(m.Problems, problemf(v1alpha1.ReasonDuplicateShardName, "shard %q is declared twice in spec.shards.names", n))
				continue
			}
			m.Shards.ordinal[n] = i
		}
	case p.Count != nil && *p.Count > 0:
		m.Shards.prefix = p.Prefix
		m.Shards.count = int(*p.Count)
	default:
		m.Problems = append(m.Problems, problemf(v1alpha1.ReasonNoShards, "spec.shards declares no shards: give names or a count"))
	}
}

func (m *Mapping) checkTarget(namespace string, entry int, ref v1alpha1.TargetRef) (string, bool) {
	switch {
	case ref.Namespace != "" && len(validation.IsDNS1123Label(ref.Namespace)) > 0:
		m.Problems = append(m.Problems, problemf(v1alpha1.ReasonInvalidTarget, "%s.target.namespace %q can name no namespace: %s",
			m.entryName(entry), ref.Namespace, strings.Join(validation.IsDNS1123Label(ref.Namespace), "; ")))
		return "", false
	case ref.Namespace != "" && ref.Namespace != namespace:
		m.Problems = append(m.Problems, problemf(v1alpha1.ReasonCrossNamespaceTarget,
			"%s names a target in namespace %q; targets must be in the account's namespace %q", m.entryName(entry), ref.Namespace, namespace))
		return "", false
	case ref.NamedKinds() != 1:
		m.Problems = append(m.Problems, problemf(v1alpha1.ReasonInvalidTarget, "%s.target must name exactly one of job, jobSet or trainJob", m.entryName(entry)))
		return "", false
	case ref.IsChild() && ref.ReplicatedJob == "":
		m.Problems = append(m.Problems, problemf(v1alpha1.ReasonInvalidTarget, "%s.target names %s %q without a replicatedJob", m.entryName(entry), ref.Field(), ref.Owner()))
		return "", false
	case !ref.IsChild() && (ref.ReplicatedJob != "" || ref.JobIndex != nil):
		m.Problems = append(m.Problems, problemf(v1alpha1.ReasonInvalidTarget, "%s.target names job %q with a replicatedJob or jobIndex, which apply only to jobSet and trainJob targets", m.entryName(entry), ref.Job))
		return "", false
	}
	// A name no object can have is refused here: the account would otherwise wait for
	// the target forever (TargetsNotFound), which looks like an expected wait.
	if errs := validation.IsDNS1123Subdomain(ref.Owner()); len(errs) > 0 {
		field := ref.Field()
		m.Problems = append(m.Problems, problemf(v1alpha1.ReasonInvalidTarget, "%s.target.%s %q can name no %s: %s",
			m.entryName(entry), field, ref.Owner(), strings.ToUpper(field[:1])+field[1:], strings.Join(errs, "; ")))
		return "", false
	}
	if ref.IsChild() {
		// JobSet's own rule (its webhook): the child Job's name, which the pods' names
		// and hostnames extend, must be a DNS-1035 label. A TrainJob's JobSet has the
		// TrainJob's name.
		child := fmt.Sprintf("%s-%s-%d", ref.Owner(), ref.ReplicatedJob, ref.Index())
		if errs := validation.IsDNS1035Label(child); len(errs) > 0 {
			m.Problems = append(m.Problems, problemf(v1alpha1.ReasonInvalidTarget,
				"%s.target.replicatedJob %q can name no child Job: JobSet would name it %q (<%s>-<replicatedJob>-<jobIndex>), a name it refuses: %s",
				m.entryName(entry), ref.ReplicatedJob, child, ref.Field(), strings.Join(errs, "; ")))
			return "", false
		}
	}
	return string(ref.Key()), true
}

// compileAssignment turns one assignment into runs: the k-th index onto the k-th shard.
func (m *Mapping) compileAssignment(entry int, key string, a *v1alpha1.Assignment) ([]Run, bool) {
	idx, err := indexset.Parse(a.Indexes)
	if err != nil {
		m.Problems = append(m.Problems, problemf(v1alpha1.ReasonMalformedIndexes, "%s.indexes %q: %v", m.entryName(entry), a.Indexes, err))
		return nil, false
	}
	if idx.IsEmpty() {
		// The API server refuses it (MinLength); a Go caller may not.
		m.Problems = append(m.Problems, problemf(v1alpha1.ReasonMalformedIndexes, "%s.indexes is empty: an assignment maps at least one index", m.entryName(entry)))
		return nil, false
	}
	var ordinals []indexset.Interval // shard ordinals in assignment order
	switch {
	case len(a.Shards) > 0:
		for _, name := range a.Shards {
			o, ok := m.Shards.Ordinal(name)
			if !ok {
				m.Problems = append(m.Problems, problemf(v1alpha1.ReasonUnknownShard, "%s maps onto shard %q, which spec.shards does not declare", m.entryName(entry), name))
				return nil, false
			}
			if n := len(ordinals); n > 0 && ordinals[n-1].Last+1 == o {
				ordinals[n-1].Last = o
			} else {
				ordinals = append(ordinals, indexset.Interval{First: o, Last: o})
			}
		}
	default:
		so, err := indexset.Parse(a.ShardOrdinals)
		if err != nil {
			m.Problems = append(m.Problems, problemf(v1alpha1.ReasonMalformedIndexes, "%s.shardOrdinals %q: %v", m.entryName(entry), a.ShardOrdinals, err))
			return nil, false
		}
		if max, ok := so.Max(); ok && max >= m.Shards.Count() {
			m.Problems = append(m.Problems, problemf(v1alpha1.ReasonUnknownShard, "%s.shardOrdinals reaches ordinal %d; spec.shards declares %d shards (0-%d)", m.entryName(entry), max, m.Shards.Count(), m.Shards.Count()-1))
			return nil, false
		}
		ordinals = so.Intervals()
	}
	nShards := countIntervals(ordinals)
	if nShards != idx.Count() {
		m.Problems = append(m.Problems, problemf(v1alpha1.ReasonShardCountMismatch,
			"%s maps %d indexes (%s) onto %d shards: give one shard per index", m.entryName(entry), idx.Count(), idx, nShards))
		return nil, false
	}
	return zipRuns(entry, key, a.Repair, idx.Intervals(), ordinals), true
}

// zipRuns walks index intervals and shard intervals together, emitting a run for each
// stretch where both advance by one.
func zipRuns(entry int, key string, repair bool, idx, shards []indexset.Interval) []Run {
	var runs []Run
	i, s := 0, 0
	ii, ss := idx[0], shards[0]
	for {
		n := min(ii.Count(), ss.Count())
		runs = append(runs, Run{Target: key, FirstIndex: ii.First, FirstShard: ss.First, Length: n, Repair: repair, Entry: entry})
		ii.First += n
		ss.First += n
		if ii.First > ii.Last {
			if i++; i == len(idx) {
				return runs
			}
			ii = idx[i]
		}
		if ss.First > ss.Last {
			s++
			ss = shards[s]
		}
	}
}

// checkPartition verifies that original (non-repair) runs assign every declared shard
// exactly once, that no (target, index) is assigned twice, and that repairs only add
// identities to shards that already have one.
func (m *Mapping) checkPartition() {
	// Shards assigned twice: in shard order, any overlap shows between neighbours.
	byShard := m.byShard
	for i, r := range byShard {
		if i > 0 {
			prev := byShard[i-1]
			if prev.shards().Last >= r.FirstShard {
				o := r.FirstShard
				m.Problems = append(m.Problems, problemf(v1alpha1.ReasonDuplicateShard,
					"shard %s is assigned twice: %s index %d (%s) and %s index %d (%s); a mapping must be a partition",
					m.Shards.Name(o), v1alpha1.TargetKey(prev.Target).Describe(), prev.FirstIndex+(o-prev.FirstShard), m.entryName(prev.Entry),
					v1alpha1.TargetKey(r.Target).Describe(), r.FirstIndex, m.entryName(r.Entry)))
				break
			}
		}
	}
	shardIvs := make([]indexset.Interval, len(byShard))
	for i, r := range byShard {
		shardIvs[i] = r.shards()
	}
	assigned := indexset.FromIntervals(shardIvs...)
	if m.Shards.Count() > 0 {
		if missing := indexset.Range(0, m.Shards.Count()-1).Difference(assigned); !missing.IsEmpty() {
			m.Problems = append(m.Problems, problemf(v1alpha1.ReasonUnassignedShard,
				"%d of %d declared shards are assigned to no index: %s", missing.Count(), m.Shards.Count(), m.Shards.Describe(missing, 8)))
		}
	}
	// (target, index) assigned twice, repairs included.
	byIndex := slices.Clone(m.Runs)
	slices.SortFunc(byIndex, func(a, b Run) int {
		return cmp.Or(strings.Compare(a.Target, b.Target), cmp.Compare(a.FirstIndex, b.FirstIndex))
	})
	for i := 1; i < len(byIndex); i++ {
		prev, r := byIndex[i-1], byIndex[i]
		if prev.Target == r.Target && prev.indexes().Last >= r.FirstIndex {
			m.Problems = append(m.Problems, problemf(v1alpha1.ReasonDuplicateIndex,
				"%s index %d is assigned twice (%s and %s): one completion identity can stand for one shard",
				v1alpha1.TargetKey(r.Target).Describe(), r.FirstIndex, m.entryName(prev.Entry), m.entryName(r.Entry)))
			break
		}
	}
	// Repairs onto unassigned shards: one Difference for all of them, then the first
	// repair run reaching one, by binary search. A Difference per run would cost the
	// admission of a spec of many repair runs over a fragmented assignment runs ×
	// intervals (seconds at 100,000 runs), whatever the webhook's timeout.
	var repairs []indexset.Interval
	for _, r := range m.Runs {
		if r.Repair {
			repairs = append(repairs, r.shards())
		}
	}
	unassigned := indexset.FromIntervals(repairs...).Difference(assigned).Intervals()
	for _, r := range m.Runs {
		if len(unassigned) == 0 {
			break
		}
		if !r.Repair {
			continue
		}
		if missing := overlap(unassigned, r.shards()); len(missing) > 0 {
			m.Problems = append(m.Problems, problemf(v1alpha1.ReasonRepairOfUnassigned,
				"repair %s maps onto %s, which no original assignment has: a repair gives an assigned shard a further identity",
				m.entryName(r.Entry), m.Shards.Describe(indexset.FromIntervals(missing...), 8)))
			break
		}
	}
}

// ShardsOfAny maps a set of a target's indexes onto shard ordinals through every run,
// original and repair: the shards an identity running those indexes may cover.
func (m *Mapping) ShardsOfAny(target string, indexes indexset.Set) indexset.Set {
	return m.ShardsOf(target, indexes, false).Union(m.ShardsOf(target, indexes, true))
}

// ShardsOf maps a set of a target's indexes onto shard ordinals through the runs
// (repair runs included when repair is true, original runs otherwise).
func (m *Mapping) ShardsOf(target string, indexes indexset.Set, repair bool) indexset.Set {
	if indexes.IsEmpty() {
		return indexset.Set{}
	}
	ivs := indexes.Intervals()
	var out []indexset.Interval
	for _, r := range m.byTarget[target] {
		if r.Repair != repair {
			continue
		}
		shift := r.FirstShard - r.FirstIndex
		for _, iv := range overlap(ivs, r.indexes()) {
			out = append(out, indexset.Interval{First: iv.First + shift, Last: iv.Last + shift})
		}
	}
	return indexset.FromIntervals(out...)
}

// IndexesOf maps shard ordinals back onto the target's indexes through every run,
// original and repair: the inverse of ShardsOfAny.
func (m *Mapping) IndexesOf(target string, shards indexset.Set) indexset.Set {
	if shards.IsEmpty() {
		return indexset.Set{}
	}
	ivs := shards.Intervals()
	var out []indexset.Interval
	for _, r := range m.byTarget[target] {
		shift := r.FirstIndex - r.FirstShard
		for _, iv := range overlap(ivs, r.shards()) {
			out = append(out, indexset.Interval{First: iv.First + shift, Last: iv.Last + shift})
		}
	}
	return indexset.FromIntervals(out...)
}

// overlap is the part of the sorted, disjoint intervals ivs within span, found by binary
// search: O(log len(ivs)) plus the intervals it returns.
func overlap(ivs []indexset.Interval, span indexset.Interval) []indexset.Interval {
	k, _ := slices.BinarySearchFunc(ivs, span.First, func(iv indexset.Interval, i int) int { return cmp.Compare(iv.Last, i) })
	var out []indexset.Interval
	for ; k < len(ivs) && ivs[k].First <= span.Last; k++ {
		out = append(out, indexset.Interval{First: max(ivs[k].First, span.First), Last: min(ivs[k].Last, span.Last)})
	}
	return out
}

// IdentityOf names the original identity assigned shard ordinal o: target key and index.
func (m *Mapping) IdentityOf(o int) (string, int, bool) {
	i, _ := slices.BinarySearchFunc(m.byShard, o, func(r Run, o int) int { return cmp.Compare(r.FirstShard, o) })
	for _, j := range []int{i, i - 1} {
		if j >= 0 && j < len(m.byShard) {
			if r := m.byShard[j]; o >= r.FirstShard && o < r.FirstShard+r.Length {
				return r.Target, r.FirstIndex + (o - r.FirstShard), true
			}
		}
	}
	return "", 0, false
}

// ShardOf returns the shard ordinal a (target, index) identity is assigned, if any. An
// index two runs of the target assign (DuplicateIndex) gets the first run's shard, in
// the spec's order.
func (m *Mapping) ShardOf(target string, index int) (int, bool) {
	runs := m.byTarget[target]
	if m.overlapping[target] {
		for _, r := range m.Runs {
			if r.Target == target && index >= r.FirstIndex && index < r.FirstIndex+r.Length {
				return r.FirstShard + (index - r.FirstIndex), true
			}
		}
		return 0, false
	}
	// The last run that starts at or before index is the only one that may hold it.
	i, found := slices.BinarySearchFunc(runs, index, func(r Run, i int) int { return cmp.Compare(r.FirstIndex, i) })
	if !found {
		i--
	}
	if i >= 0 && index < runs[i].FirstIndex+runs[i].Length {
		return runs[i].FirstShard + (index - runs[i].FirstIndex), true
	}
	return 0, false
}
