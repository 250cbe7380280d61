package indexset

import (
	"math"
	"testing"
)

const benchCompletions = 100000

// statusOf returns the completedIndexes string of a Job whose indexes
// below n are complete except those for which missing returns true.
func statusOf(n int, missing func(i int) bool) string {
	var ivs []Interval
	for i := range n {
		if !missing(i) {
			ivs = append(ivs, Interval{i, i})
		}
	}
	return FromIntervals(ivs...).String()
}

// benchShape is one shape of a 100,000-completion Job's status: old is an
// earlier status, new a later one.
type benchShape struct {
	name     string
	old, new string
}

func benchShapes() []benchShape {
	few := func(i int) bool { return i%25000 == 24999 } // 4 ranges
	every7th := func(i int) bool { return i%7 == 6 }    // ~14,286 intervals
	everyOther := func(i int) bool { return i%2 == 1 }  // 50,000 single indexes
	return []benchShape{
		{"complete", statusOf(90000, func(int) bool { return false }), "0-99999"},
		{"fewRanges", statusOf(90000, few), statusOf(benchCompletions, few)},
		{"every7thMissing", statusOf(90000, every7th), statusOf(benchCompletions, every7th)},
		{"everyOtherMissing", statusOf(90000, everyOther), statusOf(benchCompletions, everyOther)},
	}
}

// BenchmarkParseJobStatus100k parses the completedIndexes string of a
// 100,000-completion Job in several shapes.
func BenchmarkParseJobStatus100k(b *testing.B) {
	for _, sh := range benchShapes() {
		b.Run(sh.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(sh.new)))
			for b.Loop() {
				s, notes := ParseJobStatus(sh.new, benchCompletions)
				if notes != nil || s.IsEmpty() {
					b.Fatal(notes)
				}
			}
		})
	}
}

// BenchmarkParseAndDiff100k is the controller's hot path: parse the old and
// new status strings and compute the newly completed indexes.
func BenchmarkParseAndDiff100k(b *testing.B) {
	for _, sh := range benchShapes() {
		b.Run(sh.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(sh.old) + len(sh.new)))
			for b.Loop() {
				old, _ := ParseJobStatus(sh.old, benchCompletions)
				cur, _ := ParseJobStatus(sh.new, benchCompletions)
				if cur.Difference(old).IsEmpty() {
					b.Fatal("no new indexes")
				}
			}
		})
	}
}

// BenchmarkParse100k is the strict parser on the same strings.
func BenchmarkParse100k(b *testing.B) {
	for _, sh := range benchShapes() {
		b.Run(sh.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(sh.new)))
			for b.Loop() {
				if _, err := Parse(sh.new); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkString100k formats the same sets.
func BenchmarkString100k(b *testing.B) {
	for _, sh := range benchShapes() {
		s := mustParse(b, sh.new)
		b.Run(sh.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if s.String() != sh.new {
					b.Fatal("mismatch")
				}
			}
		})
	}
}

// BenchmarkKubernetesParse100k measures the reference Kubernetes parser
// (strings.Split based) on the same strings, for comparison only.
func BenchmarkKubernetesParse100k(b *testing.B) {
	for _, sh := range benchShapes() {
		b.Run(sh.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = k8sParseIndexesFromString(sh.new, benchCompletions)
			}
		})
	}
}

// BenchmarkSetOps100k measures the set operations on large operands.
func BenchmarkSetOps100k(b *testing.B) {
	for _, sh := range benchShapes() {
		old, cur := mustParse(b, sh.old), mustParse(b, sh.new)
		b.Run(sh.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = cur.Union(old)
				_ = cur.Intersect(old)
				_ = cur.Difference(old)
				_, _ = cur.Nth(cur.Count() - 1)
				_ = cur.Contains(math.MaxInt32)
			}
		})
	}
}
