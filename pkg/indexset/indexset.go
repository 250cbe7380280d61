// Package indexset implements immutable sets of Job completion indexes stored
// as sorted interval lists, in the text format the Kubernetes Job controller
// uses for .status.completedIndexes and .status.failedIndexes.
//
// A Job with 100,000 completions is routinely described by a handful of
// ranges, so every operation here is linear in the number of intervals (or
// logarithmic), never in the number of indexes; only Each and All visit
// individual indexes.
//
// Two parsers exist because the two sources of strings differ in trust:
//
//   - Parse is strict. It is for strings batchledger writes itself (for
//     example Sets serialized through encoding.TextMarshaler), where any
//     deviation from the format is a bug that must surface as an error.
//   - ParseJobStatus reproduces the lenient parser of the Kubernetes v1.35
//     Job controller bit for bit, so batchledger counts exactly the indexes
//     Kubernetes counts, and additionally reports every token Kubernetes
//     silently ignored, clamped or mangled so the controller can surface it.
//
// Indexes are restricted to [0, MaxIndex]: Kubernetes completion indexes are
// below spec.completions, an int32, and keeping every index below
// math.MaxInt32 makes Count, Last+1 and friends overflow-free even where int
// is 32 bits wide.
package indexset

import (
	"cmp"
	"iter"
	"math"
	"slices"
	"sort"
)

// MaxIndex is the largest index a Set can hold. Kubernetes completion indexes
// are < spec.completions <= math.MaxInt32, so no real index exceeds it, and
// with this bound the number of indexes in any Set (at most MaxIndex+1)
// still fits in an int32.
const MaxIndex = math.MaxInt32 - 1

// Interval is a closed range [First, Last] of indexes, First <= Last.
//
// Intervals returned by this package always satisfy
// 0 <= First <= Last <= MaxIndex; intervals passed in that violate it are
// clipped or dropped (see FromIntervals).
type Interval struct{ First, Last int }

// Count returns the number of indexes in the interval, 0 if Last < First. It
// exists so callers mapping index ranges onto shard ranges need not repeat
// the off-by-one "+1".
func (iv Interval) Count() int {
	if iv.Last < iv.First {
		return 0
	}
	return iv.Last - iv.First + 1
}

// Set is a normalized (sorted, disjoint, non-adjacent intervals) immutable
// value. Zero value = empty set.
//
// Because the representation is normalized, two Sets hold the same indexes
// exactly when their interval lists are equal, which is what makes Equal and
// String canonical. Sets are never modified after construction, so they may
// be copied and shared between goroutines freely; they are not comparable
// with ==, use Equal.
type Set struct {
	// ivs is sorted by First, with ivs[k].Last+1 < ivs[k+1].First, and every
	// value in [0, MaxIndex]. It may share its backing array with other Sets
	// and must never be written to after the Set is built.
	ivs []Interval
}

// clip restricts iv to [0, MaxIndex] and reports whether anything is left.
func clip(iv Interval) (Interval, bool) {
	iv.First = max(iv.First, 0)
	iv.Last = min(iv.Last, MaxIndex)
	return iv, iv.First <= iv.Last
}

// Range returns the set [first, last], or the empty set if last < first.
// Indexes outside [0, MaxIndex] cannot be completion indexes and are
// dropped, so Range(-5, 2) is the same as Range(0, 2).
func Range(first, last int) Set {
	iv, ok := clip(Interval{first, last})
	if !ok {
		return Set{}
	}
	return Set{ivs: []Interval{iv}}
}

// Of returns the set of the given indexes, which may come in any order and
// with duplicates (for example, indexes read off a list of Pods). Indexes
// outside [0, MaxIndex] are dropped. The cost is O(n log n) in
// len(indexes).
func Of(indexes ...int) Set {
	if len(indexes) == 0 {
		return Set{}
	}
	sorted := slices.Clone(indexes)
	slices.Sort(sorted)
	var ivs []Interval
	for _, i := range sorted {
		if i < 0 || i > MaxIndex {
			continue
		}
		if n := len(ivs); n > 0 && i <= ivs[n-1].Last+1 {
			ivs[n-1].Last = max(ivs[n-1].Last, i)
			continue
		}
		ivs = append(ivs, Interval{i, i})
	}
	return Set{ivs: ivs}
}

// FromIntervals returns the union of the given intervals, which may come in
// any order, overlap or touch; the result is normalized. Intervals with
// Last < First are empty and ignored, and each interval is clipped to
// [0, MaxIndex]. The cost is O(n log n) in len(ivs).
func FromIntervals(ivs ...Interval) Set {
	out := make([]Interval, 0, len(ivs))
	for _, iv := range ivs {
		if iv, ok := clip(iv); ok {
			out = append(out, iv)
		}
	}
	return Set{ivs: normalize(out)}
}

// normalize sorts ivs (all non-empty and within bounds) and merges
// overlapping and adjacent intervals in place.
func normalize(ivs []Interval) []Interval {
	if len(ivs) == 0 {
		return nil
	}
	if !slices.IsSortedFunc(ivs, cmpFirst) {
		slices.SortFunc(ivs, cmpFirst)
	}
	n := 0
	for _, iv := range ivs[1:] {
		if iv.First <= ivs[n].Last+1 {
			ivs[n].Last = max(ivs[n].Last, iv.Last)
			continue
		}
		n++
		ivs[n] = iv
	}
	return ivs[: n+1 : n+1]
}

func cmpFirst(a, b Interval) int { return cmp.Compare(a.First, b.First) }

// Intervals returns a copy of the normalized intervals, so callers may
// modify the result without affecting s. It returns nil for the empty set.
func (s Set) Intervals() []Interval {
	if len(s.ivs) == 0 {
		return nil
	}
	return slices.Clone(s.ivs)
}

// NumIntervals returns the number of maximal runs of consecutive indexes,
// the size that the cost of every set operation is proportional to.
func (s Set) NumIntervals() int { return len(s.ivs) }

// Count returns the number of indexes in s (Kubernetes' status.succeeded for
// a completedIndexes set). It is O(intervals).
func (s Set) Count() int {
	n := 0
	for _, iv := range s.ivs {
		n += iv.Last - iv.First + 1
	}
	return n
}

// IsEmpty reports whether s holds no index.
func (s Set) IsEmpty() bool { return len(s.ivs) == 0 }

// IsZero reports whether s is empty. It lets `json:",omitzero"` omit empty
// Sets regardless of how they were built (a Set produced by an operation may
// be empty without being the literal zero value).
func (s Set) IsZero() bool { return s.IsEmpty() }

// search returns the position of the first interval with Last >= i, or
// len(s.ivs) if there is none; this is the only interval that can hold i.
func (s Set) search(i int) int {
	return sort.Search(len(s.ivs), func(k int) bool { return s.ivs[k].Last >= i })
}

// Contains reports whether index i is in s, in O(log intervals).
func (s Set) Contains(i int) bool {
	k := s.search(i)
	return k < len(s.ivs) && s.ivs[k].First <= i
}

// Union returns the indexes in s or o (or both), in O(intervals of both).
func (s Set) Union(o Set) Set {
	switch {
	case len(o.ivs) == 0:
		return s
	case len(s.ivs) == 0:
		return o
	}
	a, b := s.ivs, o.ivs
	out := make([]Interval, 0, len(a)+len(b))
	add := func(iv Interval) {
		if n := len(out); n > 0 && iv.First <= out[n-1].Last+1 {
			out[n-1].Last = max(out[n-1].Last, iv.Last)
			return
		}
		out = append(out, iv)
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if a[i].First <= b[j].First {
			add(a[i])
			i++
		} else {
			add(b[j])
			j++
		}
	}
	for ; i < len(a); i++ {
		add(a[i])
	}
	for ; j < len(b); j++ {
		add(b[j])
	}
	return Set{ivs: out}
}

// Intersect returns the indexes in both s and o, in O(intervals of both).
func (s Set) Intersect(o Set) Set {
	a, b := s.ivs, o.ivs
	var out []Interval
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := max(a[i].First, b[j].First), min(a[i].Last, b[j].Last)
		if lo <= hi {
			out = append(out, Interval{lo, hi})
		}
		// Advance whichever interval ends first: it cannot meet anything
		// further along the other list.
		if a[i].Last < b[j].Last {
			i++
		} else {
			j++
		}
	}
	return Set{ivs: out}
}

// Difference returns the indexes in s that are not in o (s minus o), in
// O(intervals of both). Difference(old completedIndexes) on a new status
// yields the indexes that completed in between.
func (s Set) Difference(o Set) Set {
	if len(s.ivs) == 0 || len(o.ivs) == 0 {
		return s
	}
	b := o.ivs
	var out []Interval
	j := 0
	for _, a := range s.ivs {
		lo := a.First
		for j < len(b) && b[j].Last < lo {
			j++
		}
		for j < len(b) && b[j].First <= a.Last {
			if b[j].First > lo {
				out = append(out, Interval{lo, b[j].First - 1})
			}
			if b[j].Last >= a.Last {
				// b[j] covers the rest of a and may reach into the next
				// interval of s, so it is not consumed.
				lo = a.Last + 1
				break
			}
			lo = b[j].Last + 1
			j++
		}
		if lo <= a.Last {
			out = append(out, Interval{lo, a.Last})
		}
	}
	return Set{ivs: out}
}

// Equal reports whether s and o hold the same indexes. Normalization makes
// this a plain comparison of the interval lists.
func (s Set) Equal(o Set) bool { return slices.Equal(s.ivs, o.ivs) }

// Min returns the smallest index in s; false if s is empty.
func (s Set) Min() (int, bool) {
	if len(s.ivs) == 0 {
		return 0, false
	}
	return s.ivs[0].First, true
}

// Max returns the largest index in s; false if s is empty.
func (s Set) Max() (int, bool) {
	if len(s.ivs) == 0 {
		return 0, false
	}
	return s.ivs[len(s.ivs)-1].Last, true
}

// Nth returns the k-th smallest index of s (0-based), or false if k < 0 or
// k >= s.Count(). It walks the intervals, O(intervals), and is the building
// block for mapping the k-th completed index onto the k-th shard.
func (s Set) Nth(k int) (int, bool) {
	if k < 0 {
		return 0, false
	}
	for _, iv := range s.ivs {
		n := iv.Last - iv.First + 1
		if k < n {
			return iv.First + k, true
		}
		k -= n
	}
	return 0, false
}

// Rank returns the position of index i within s, that is the number of
// indexes of s smaller than i, so that s.Nth(r) == i. It returns false if i
// is not in s. It is O(intervals).
func (s Set) Rank(i int) (int, bool) {
	k := s.search(i)
	if k == len(s.ivs) || s.ivs[k].First > i {
		return 0, false
	}
	r := i - s.ivs[k].First
	for _, iv := range s.ivs[:k] {
		r += iv.Last - iv.First + 1
	}
	return r, true
}

// Each calls fn for every index of s in ascending order until fn returns
// false. Unlike everything else in this package it is O(indexes).
func (s Set) Each(fn func(i int) bool) {
	for _, iv := range s.ivs {
		// i <= MaxIndex < math.MaxInt, so i++ cannot overflow.
		for i := iv.First; i <= iv.Last; i++ {
			if !fn(i) {
				return
			}
		}
	}
}

// All returns an iterator over the indexes of s in ascending order, the
// range-over-func form of Each. It is O(indexes).
func (s Set) All() iter.Seq[int] {
	return func(yield func(int) bool) { s.Each(yield) }
}

// Limit returns the indexes of s that are < n, which is how Kubernetes
// treats indexes at or beyond spec.completions (for example after a Job's
// completions were lowered). The result may share memory with s, which is
// safe because Sets are immutable.
func (s Set) Limit(n int) Set {
	if n <= 0 {
		return Set{}
	}
	k := s.search(n) // first interval with Last >= n
	switch {
	case k == len(s.ivs):
		return s
	case s.ivs[k].First >= n:
		if k == 0 {
			return Set{}
		}
		return Set{ivs: s.ivs[:k:k]}
	}
	out := slices.Clone(s.ivs[:k+1])
	out[k].Last = n - 1
	return Set{ivs: out}
}
