package indexset

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// parseSeeds are inputs for both parsers: canonical, non-canonical,
// malformed and quirky strings.
var parseSeeds = []string{
	"", "0", "7", "3,4", "0-2", "1,3-5,7", "0-99999", "0,2,4,6", "0-5,7-12,14-19",
	"1-2", "1,2,3", "0,1-3,5,7-10", "2147483646", "0-2147483646", "2147483645,2147483646",
	"0,1-3, 5", "0,1-3,5", "1-3,0,5", "0,0,5", "0,1-1,5", "-1,0", "0,1-", "0,1--3", "0,,1,3",
	"1-3-9", "+5,007", "5,1", "5,1-9", "1-5,3-7", "5-2", "1-5,6-2", "5-2,3,4,5,6", "0-10,20-1,5",
	"99999999999999999999,3", "9223372036854775807,3", "9223372036854775808", "2-9223372036854775807",
	"2147483647", ",", "1,", ",1", "-", "+", "01", "1 ", "٣", "0-1-2-3", "12,3",
}

// statusAlphabet is what status strings are made of, weighted towards the
// separators so that mapped fuzz inputs hit the parsers' structure often.
const statusAlphabet = "0123456789,,,---+ 00"

// toStatusAlphabet maps arbitrary fuzz input onto statusAlphabet, so that
// random bytes become plausible (and plausibly broken) status strings.
func toStatusAlphabet(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = statusAlphabet[int(c)%len(statusAlphabet)]
	}
	return string(b)
}

// FuzzParseRoundTrip checks that for every string Parse accepts, String is
// canonical and round-trips, that Kubernetes (writer, lenient parser and
// API validation) reads the same string the same way, and that errors name
// a token that really is in the input.
func FuzzParseRoundTrip(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkRoundTrip(t, s)
		checkRoundTrip(t, toStatusAlphabet(s))
	})
}

func checkRoundTrip(t *testing.T, s string) {
	t.Helper()
	x, err := Parse(s)
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("Parse(%q) error %v is not a *ParseError", s, err)
		}
		if pe.Offset < 0 || pe.Offset+len(pe.Token) > len(s) || s[pe.Offset:pe.Offset+len(pe.Token)] != pe.Token {
			t.Fatalf("Parse(%q): token %q at %d is not in the input", s, pe.Token, pe.Offset)
		}
		return
	}
	checkNormalized(t, x)
	str := x.String()
	y, err := Parse(str)
	if err != nil {
		t.Fatalf("Parse(String()) of %q = %q: %v", s, str, err)
	}
	if !y.Equal(x) || y.String() != str {
		t.Fatalf("round trip of %q: %q -> %q", s, str, y)
	}
	if b, _ := x.MarshalText(); string(b) != str {
		t.Fatalf("MarshalText %q != String %q", b, str)
	}
	if len(str) > len(s) {
		t.Fatalf("canonical %q is longer than accepted input %q", str, s)
	}
	// Kubernetes writes the same string for these intervals...
	k := k8sParseIndexesFromString(str, math.MaxInt32)
	if k.String() != str || !slices.Equal(fromK8s(k), x.Intervals()) {
		t.Fatalf("Kubernetes reads %q as %v and writes %q", str, k, k.String())
	}
	// ...its API server accepts whatever we accept...
	total, err := k8sValidateIndexesFormat(s, math.MaxInt32)
	if err != nil || int(total) != x.Count() {
		t.Fatalf("API validation of accepted %q: total %d (Count %d), %v", s, total, x.Count(), err)
	}
	// ...and the lenient parser agrees, without complaint.
	lenient, notes := checkAgainstKubernetes(t, s, math.MaxInt32)
	if !lenient.Equal(x) || notes != nil {
		t.Fatalf("ParseJobStatus(%q) = %q %q, strict %q", s, lenient, notes, x)
	}
}

// modelDomain bounds the indexes of FuzzSetOpsModel so the reference model
// can be a plain array.
const modelDomain = 200

// model is the obviously correct reference: a membership array.
type model [modelDomain + 16]bool

func (m *model) set() Set {
	var ivs []Interval
	for i, in := range m {
		if in {
			ivs = append(ivs, Interval{i, i}) // deliberately unmerged
		}
	}
	return FromIntervals(ivs...)
}

func (m *model) list() []int {
	var out []int
	for i, in := range m {
		if in {
			out = append(out, i)
		}
	}
	return out
}

// modelString formats a sorted index list with an independent
// implementation of the Kubernetes rules.
func modelString(l []int) string {
	var parts []string
	for i := 0; i < len(l); {
		j := i
		for j+1 < len(l) && l[j+1] == l[j]+1 {
			j++
		}
		switch j - i {
		case 0:
			parts = append(parts, strconv.Itoa(l[i]))
		case 1:
			parts = append(parts, strconv.Itoa(l[i]), strconv.Itoa(l[j]))
		default:
			parts = append(parts, strconv.Itoa(l[i])+"-"+strconv.Itoa(l[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// decodeOperand turns fuzz bytes into a Set two ways (Of from single
// indexes, FromIntervals from byte pairs) and the matching models.
func decodeOperand(data []byte) (viaOf, viaIvs Set, mOf, mIvs model) {
	idx := make([]int, 0, len(data))
	for _, b := range data {
		i := int(b) % modelDomain
		idx = append(idx, i)
		mOf[i] = true
	}
	var ivs []Interval
	for k := 0; k+1 < len(data); k += 2 {
		first := int(data[k]) % modelDomain
		last := first + int(data[k+1]%12) - 3 // may be descending (empty)
		ivs = append(ivs, Interval{first, last})
		for i := first; i <= last; i++ {
			mIvs[i] = true
		}
	}
	return Of(idx...), FromIntervals(ivs...), mOf, mIvs
}

// runs returns the maximal runs of m, computed naively.
func (m *model) runs() []Interval {
	var out []Interval
	for i := 0; i < len(m); i++ {
		if !m[i] {
			continue
		}
		j := i
		for j+1 < len(m) && m[j+1] {
			j++
		}
		out = append(out, Interval{i, j})
		i = j
	}
	return out
}

// checkModel compares got with m. full adds the string form and the
// per-index Contains/Nth/Rank/Each checks, which are only worth their cost
// for the constructors' results; the interval comparison alone already pins
// the set down exactly.
func checkModel(t *testing.T, what string, got Set, m *model, full bool) {
	t.Helper()
	checkNormalized(t, got)
	runs := m.runs()
	if !slices.Equal(got.Intervals(), runs) {
		t.Fatalf("%s: intervals %v, model %v", what, got.Intervals(), runs)
	}
	l := m.list()
	if got.Count() != len(l) {
		t.Fatalf("%s: Count %d, model %d (%q)", what, got.Count(), len(l), got)
	}
	if !full {
		// Contains around every boundary, where off-by-ones live.
		for _, r := range runs {
			for _, i := range []int{r.First - 1, r.First, r.Last, r.Last + 1} {
				want := i >= 0 && i < len(m) && m[i]
				if got.Contains(i) != want {
					t.Fatalf("%s: Contains(%d) = %v", what, i, !want)
				}
			}
		}
		return
	}
	if s := got.String(); s != modelString(l) {
		t.Fatalf("%s: String %q, model %q", what, s, modelString(l))
	}
	for i := -2; i < len(m)+2; i++ {
		want := i >= 0 && i < len(m) && m[i]
		if got.Contains(i) != want {
			t.Fatalf("%s: Contains(%d) = %v", what, i, !want)
		}
	}
	if !got.Equal(m.set()) {
		t.Fatalf("%s: not Equal to the model's set", what)
	}
	for k, i := range l {
		if n, ok := got.Nth(k); !ok || n != i {
			t.Fatalf("%s: Nth(%d) = %d, %v; want %d", what, k, n, ok, i)
		}
		if r, ok := got.Rank(i); !ok || r != k {
			t.Fatalf("%s: Rank(%d) = %d, %v; want %d", what, i, r, ok, k)
		}
	}
	if _, ok := got.Nth(len(l)); ok {
		t.Fatalf("%s: Nth(Count) succeeded", what)
	}
	mn, okMin := got.Min()
	mx, okMax := got.Max()
	if okMin != (len(l) > 0) || okMax != (len(l) > 0) || (len(l) > 0 && (mn != l[0] || mx != l[len(l)-1])) {
		t.Fatalf("%s: Min/Max %d,%v %d,%v for %v", what, mn, okMin, mx, okMax, l)
	}
	var each []int
	got.Each(func(i int) bool { each = append(each, i); return true })
	if !slices.Equal(each, l) {
		t.Fatalf("%s: Each %v, model %v", what, each, l)
	}
}

// FuzzSetOpsModel checks constructors and every set operation against a
// membership-array model on small index sets.
func FuzzSetOpsModel(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Add([]byte{0, 1, 2}, []byte{3})
	f.Add([]byte{5, 9, 5, 0, 199}, []byte{6, 200, 4})
	f.Add([]byte{10, 11, 20, 3}, []byte{10, 11, 12, 13, 14})
	f.Add([]byte("completedIndexes"), []byte("failedIndexes"))
	f.Add([]byte{0, 255, 128, 7, 64, 1}, []byte{199, 11, 0, 0})
	f.Fuzz(fuzzSetOpsBody)
}

func fuzzSetOpsBody(t *testing.T, da, db []byte) {
	// With indexes below modelDomain, longer inputs add cost, not coverage.
	da, db = da[:min(len(da), 2*modelDomain)], db[:min(len(db), 2*modelDomain)]
	{
		aOf, aIvs, maOf, maIvs := decodeOperand(da)
		bOf, bIvs, mbOf, mbIvs := decodeOperand(db)
		checkModel(t, "Of(a)", aOf, &maOf, true)
		checkModel(t, "FromIntervals(a)", aIvs, &maIvs, true)
		checkModel(t, "Of(b)", bOf, &mbOf, true)
		checkModel(t, "FromIntervals(b)", bIvs, &mbIvs, true)

		type operand struct {
			name string
			s    Set
			m    *model
		}
		ops := []operand{{"aOf", aOf, &maOf}, {"aIvs", aIvs, &maIvs}, {"bOf", bOf, &mbOf}, {"bIvs", bIvs, &mbIvs}}
		for _, x := range ops {
			for _, y := range ops {
				var u, in, d model
				for i := range u {
					u[i] = x.m[i] || y.m[i]
					in[i] = x.m[i] && y.m[i]
					d[i] = x.m[i] && !y.m[i]
				}
				checkModel(t, x.name+"∪"+y.name, x.s.Union(y.s), &u, false)
				checkModel(t, x.name+"∩"+y.name, x.s.Intersect(y.s), &in, false)
				checkModel(t, x.name+"−"+y.name, x.s.Difference(y.s), &d, false)
				if x.s.Equal(y.s) != (*x.m == *y.m) {
					t.Fatalf("%s.Equal(%s) wrong", x.name, y.name)
				}
			}
		}
		// Limit against the model, at a cut taken from the input.
		n := 0
		if len(db) > 0 {
			n = int(db[0]) - 20
		}
		var lm model
		for i := range lm {
			lm[i] = maOf[i] && i < n
		}
		checkModel(t, "Limit", aOf.Limit(n), &lm, true)
		// The string form parses back strictly to the same set.
		if back := mustParse(t, aIvs.String()); !back.Equal(aIvs) {
			t.Fatalf("Parse(String()) = %q, want %q", back, aIvs)
		}
	}
}

// FuzzParseJobStatus checks that the lenient parser never panics, never
// returns an index >= completions, and agrees with the verbatim Kubernetes
// parser (followed by its merge pass) on every input.
func FuzzParseJobStatus(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add(s, 10)
		f.Add(s, math.MaxInt32)
	}
	f.Add("0-5,8-10", 8)
	f.Add("0,1-foo,bar", 4)
	f.Add("9", 2)
	f.Add("0,1", 0)
	f.Add("0", -3)
	f.Add("2147483646,2147483647,5", math.MaxInt)
	f.Add("1-3,0,5", 6)
	f.Fuzz(func(t *testing.T, s string, completions int) {
		mapped := toStatusAlphabet(s)
		for _, in := range []struct {
			s string
			c int
		}{{s, completions}, {s, completions % 64}, {mapped, completions % 64}, {mapped, 1 + completions%1000}} {
			s, c := in.s, in.c
			_, notes := checkAgainstKubernetes(t, s, c)
			for _, n := range notes {
				if n == "" {
					t.Fatalf("ParseJobStatus(%q, %d): empty note in %q", s, c, notes)
				}
			}
			if notes != nil && len(notes) == 0 {
				t.Fatalf("notes must be nil when empty")
			}
		}
	})
}
