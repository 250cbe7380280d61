package indexset

import (
	"encoding"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// Compile-time checks that Sets can sit in JSON structs as strings.
var (
	_ encoding.TextMarshaler   = Set{}
	_ encoding.TextAppender    = Set{}
	_ encoding.TextUnmarshaler = (*Set)(nil)
)

// mustParse is for test tables: it fails the test on a strict-parse error.
func mustParse(t testing.TB, s string) Set {
	t.Helper()
	v, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return v
}

// checkNormalized fails if s violates the Set invariant.
func checkNormalized(t testing.TB, s Set) {
	t.Helper()
	for k, iv := range s.ivs {
		if iv.First < 0 || iv.First > iv.Last || iv.Last > MaxIndex {
			t.Fatalf("interval %d of %v out of bounds: %+v", k, s.ivs, iv)
		}
		if k > 0 && s.ivs[k-1].Last+1 >= iv.First {
			t.Fatalf("intervals %d and %d of %v overlap or touch", k-1, k, s.ivs)
		}
	}
}

func TestStringAndParse(t *testing.T) {
	cases := []struct {
		name string
		set  Set
		want string
	}{
		{"zero value", Set{}, ""},
		{"empty range", Range(5, 4), ""},
		{"empty Of", Of(), ""},
		{"single", Of(7), "7"},
		{"zero", Of(0), "0"},
		{"two neighbours", Of(4, 3), "3,4"},
		{"two neighbours as range", Range(3, 4), "3,4"},
		{"three is a range", Of(0, 1, 2), "0-2"},
		{"long range", Range(0, 99999), "0-99999"},
		{"two separate", Of(5, 10), "5,10"},
		{"mixed (API doc example)", Of(1, 3, 4, 5, 7), "1,3-5,7"},
		{"mixed with pair", Of(0, 2, 3, 5, 6, 7, 9), "0,2,3,5-7,9"},
		{"k8s two intervals", FromIntervals(Interval{2, 3}, Interval{5, 7}), "2,3,5-7"},
		{"FromIntervals adjacent", FromIntervals(Interval{0, 2}, Interval{3, 3}), "0-3"},
		{"FromIntervals adjacent reversed", FromIntervals(Interval{3, 3}, Interval{0, 2}), "0-3"},
		{"Union adjacent", Range(0, 2).Union(Of(3)), "0-3"},
		{"Union adjacent other side", Of(3).Union(Range(0, 2)), "0-3"},
		{"Union bridges gap", Of(0, 1, 3, 4).Union(Of(2)), "0-4"},
		{"max index", Of(MaxIndex), "2147483646"},
		{"full range", Range(0, MaxIndex), "0-2147483646"},
		{"top pair", Range(MaxIndex-1, MaxIndex), "2147483645,2147483646"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkNormalized(t, tc.set)
			if got := tc.set.String(); got != tc.want {
				t.Fatalf("String() = %q, want %q", got, tc.want)
			}
			b, err := tc.set.MarshalText()
			if err != nil || string(b) != tc.want {
				t.Fatalf("MarshalText() = %q, %v; want %q", b, err, tc.want)
			}
			if b, _ := tc.set.AppendText([]byte("x=")); string(b) != "x="+tc.want {
				t.Fatalf("AppendText = %q", b)
			}
			got := mustParse(t, tc.want)
			if !got.Equal(tc.set) {
				t.Fatalf("Parse(%q) = %v, want %v", tc.want, got.ivs, tc.set.ivs)
			}
			// The Kubernetes writer must produce the same bytes.
			k := make(k8sOrderedIntervals, 0, tc.set.NumIntervals())
			for _, iv := range tc.set.Intervals() {
				k = append(k, k8sInterval(iv))
			}
			if ks := k.String(); ks != tc.want {
				t.Fatalf("Kubernetes writes %q, we write %q", ks, tc.want)
			}
		})
	}
}

func TestParseNormalizes(t *testing.T) {
	cases := map[string]string{
		"1-2":          "1,2",
		"1,2,3":        "1-3",
		"0,1,2,4":      "0-2,4",
		"1-3,4-6":      "1-6",
		"0-1,2":        "0-2",
		"0,1-3,5,7-10": "0-3,5,7-10",
		"3,4,6":        "3,4,6",
		"0,4,5,10-12":  "0,4,5,10-12",
		"5,7,8,9":      "5,7-9",
	}
	for in, want := range cases {
		got, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		checkNormalized(t, got)
		if got.String() != want {
			t.Errorf("Parse(%q).String() = %q, want %q", in, got.String(), want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		in     string
		token  string
		offset int
		reason string
	}{
		{"a", "a", 0, "not a decimal"},
		{"0,1-3, 5", " 5", 6, "not a decimal"},
		{"5 ", "5 ", 0, "not a decimal"},
		{"1.5", "1.5", 0, "not a decimal"},
		{"0x10", "0x10", 0, "not a decimal"},
		{"١", "١", 0, "not a decimal"},
		{"1,,2", "", 2, "empty token"},
		{",1", "", 0, "empty token"},
		{"1,", "", 2, "empty token"},
		{",", "", 0, "empty token"},
		{"-1", "-1", 0, "negative"},
		{"3,-1-5", "-1-5", 2, "negative"},
		{"-", "-", 0, "missing first"},
		{"1-", "1-", 0, "missing last"},
		{"0,1--3", "1--3", 2, "more than one '-'"},
		{"1-2-3", "1-2-3", 0, "more than one '-'"},
		{"3-1", "3-1", 0, "descending"},
		{"0,1-1,5", "1-1", 2, "single index"},
		{"0,0,5", "0", 2, "out of order or overlapping"},
		{"1-3,0,5", "0", 4, "not above the previous index 3"},
		{"2,1", "1", 2, "out of order"},
		{"1-5,3", "3", 4, "overlapping"},
		{"1-5,5-7", "5-7", 4, "overlapping"},
		{"+1", "+1", 0, "not a decimal"},
		{"01", "01", 0, "leading zero"},
		{"00", "00", 0, "leading zero"},
		{"1-02", "1-02", 0, "leading zero"},
		{"2147483647", "2147483647", 0, "exceeds the maximum"},
		{"1-2147483647", "1-2147483647", 0, "exceeds the maximum"},
		{"99999999999999999999999999", "99999999999999999999999999", 0, "exceeds the maximum"},
		{"1\x00", "1\x00", 0, "not a decimal"},
	}
	for _, tc := range cases {
		_, err := Parse(tc.in)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) error = %v, want *ParseError", tc.in, err)
			continue
		}
		if pe.Token != tc.token || pe.Offset != tc.offset || !strings.Contains(pe.Reason, tc.reason) {
			t.Errorf("Parse(%q) = %+v, want token %q at %d, reason containing %q", tc.in, *pe, tc.token, tc.offset, tc.reason)
		}
		if !strings.Contains(err.Error(), pe.Reason) {
			t.Errorf("Error() %q lacks the reason", err.Error())
		}
	}
}

func TestParseErrorTruncatesHugeToken(t *testing.T) {
	_, err := Parse(strings.Repeat("x", 10000))
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("error = %v", err)
	}
}

func TestConstructors(t *testing.T) {
	cases := []struct {
		name string
		set  Set
		want string
	}{
		{"Range", Range(3, 9), "3-9"},
		{"Range single", Range(3, 3), "3"},
		{"Range reversed is empty", Range(9, 3), ""},
		{"Range clips negatives", Range(-5, 2), "0-2"},
		{"Range all negative", Range(-5, -1), ""},
		{"Range clips above MaxIndex", Range(MaxIndex-1, math.MaxInt), "2147483645,2147483646"},
		{"Range above MaxIndex", Range(MaxIndex+1, math.MaxInt), ""},
		{"Of unsorted with duplicates", Of(5, 1, 3, 2, 5, 1, 9, 10), "1-3,5,9,10"},
		{"Of drops out of range", Of(-1, 4, MaxIndex+1, -100), "4"},
		{"Of one", Of(0), "0"},
		{"FromIntervals none", FromIntervals(), ""},
		{"FromIntervals overlap", FromIntervals(Interval{5, 9}, Interval{0, 6}), "0-9"},
		{"FromIntervals nested", FromIntervals(Interval{0, 10}, Interval{2, 3}, Interval{4, 4}), "0-10"},
		{"FromIntervals touching chain", FromIntervals(Interval{6, 8}, Interval{0, 2}, Interval{3, 5}), "0-8"},
		{"FromIntervals ignores descending", FromIntervals(Interval{5, 2}, Interval{7, 7}), "7"},
		{"FromIntervals clips", FromIntervals(Interval{-3, 1}, Interval{MaxIndex, math.MaxInt}), "0,1,2147483646"},
		{"FromIntervals duplicates", FromIntervals(Interval{1, 4}, Interval{1, 4}), "1-4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkNormalized(t, tc.set)
			if got := tc.set.String(); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestConstructorsDoNotAlias(t *testing.T) {
	in := []int{3, 1, 2}
	s := Of(in...)
	if !slices.Equal(in, []int{3, 1, 2}) {
		t.Fatalf("Of sorted its argument: %v", in)
	}
	ivs := []Interval{{5, 6}, {0, 1}}
	f := FromIntervals(ivs...)
	if ivs[0] != (Interval{5, 6}) {
		t.Fatalf("FromIntervals modified its argument: %v", ivs)
	}
	got := s.Intervals()
	got[0].Last = 100
	if s.String() != "1-3" {
		t.Fatalf("Intervals() aliases the set: %v", s)
	}
	if f.String() != "0,1,5,6" {
		t.Fatalf("f = %v", f)
	}
	if (Set{}).Intervals() != nil {
		t.Fatal("Intervals of empty set should be nil")
	}
}

// opCase lists a, b and the expected results of every binary operation.
type opCase struct {
	name                         string
	a, b                         string
	union, inter, aMinB, bMinusA string
}

var opCases = []opCase{
	{"both empty", "", "", "", "", "", ""},
	{"a empty", "", "1-3", "1-3", "", "", "1-3"},
	{"b empty", "1-3", "", "1-3", "", "1-3", ""},
	{"identical", "0-2,5,7-9", "0-2,5,7-9", "0-2,5,7-9", "0-2,5,7-9", "", ""},
	{"disjoint with gap", "0-2", "4-6", "0-2,4-6", "", "0-2", "4-6"},
	{"touching", "0-2", "3", "0-3", "", "0-2", "3"},
	{"touching ranges", "0-4", "5-9", "0-9", "", "0-4", "5-9"},
	{"single touching both sides", "0,2", "1", "0-2", "", "0,2", "1"},
	{"containment", "0-9", "3-5", "0-9", "3-5", "0-2,6-9", ""},
	{"containment at start", "0-9", "0-2", "0-9", "0-2", "3-9", ""},
	{"containment at end", "0-9", "7-9", "0-9", "7-9", "0-6", ""},
	{"partial overlap", "0-5", "3-8", "0-8", "3-5", "0-2", "6-8"},
	{"b spans several a", "0-1,4-5,8-9", "1-8", "0-9", "1,4,5,8", "0,9", "2,3,6,7"},
	{"a spans several b", "0-20", "2,5-6,10-12", "0-20", "2,5,6,10-12", "0,1,3,4,7-9,13-20", ""},
	{"interleaved", "0,2,4,6", "1,3,5,7", "0-7", "", "0,2,4,6", "1,3,5,7"},
	{"same ends", "3-7", "7-9", "3-9", "7", "3-6", "8,9"},
	{"single index overlap", "5", "5", "5", "5", "", ""},
	{"b interval reaches into next a", "0-3,6-9", "2-7", "0-9", "2,3,6,7", "0,1,8,9", "4,5"},
	{"max index", "2147483640-2147483646", "2147483646", "2147483640-2147483646", "2147483646", "2147483640-2147483645", ""},
	{"many vs one", "0,2,4,6,8,10", "3-7", "0,2-8,10", "4,6", "0,2,8,10", "3,5,7"},
}

func TestSetOps(t *testing.T) {
	for _, tc := range opCases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := mustParse(t, tc.a), mustParse(t, tc.b)
			aStr, bStr := a.String(), b.String()
			check := func(op string, got Set, want string) {
				t.Helper()
				checkNormalized(t, got)
				if got.String() != want {
					t.Errorf("%s = %q, want %q", op, got.String(), want)
				}
			}
			check("a∪b", a.Union(b), tc.union)
			check("b∪a", b.Union(a), tc.union)
			check("a∩b", a.Intersect(b), tc.inter)
			check("b∩a", b.Intersect(a), tc.inter)
			check("a−b", a.Difference(b), tc.aMinB)
			check("b−a", b.Difference(a), tc.bMinusA)
			if a.Union(b).Count() != a.Count()+b.Count()-a.Intersect(b).Count() {
				t.Errorf("inclusion-exclusion fails")
			}
			if got := a.Equal(b); got != (aStr == bStr) {
				t.Errorf("Equal = %v", got)
			}
			// Operands are unchanged (immutability).
			if a.String() != aStr || b.String() != bStr {
				t.Errorf("operands modified: %q %q", a, b)
			}
		})
	}
}

func TestEqual(t *testing.T) {
	if !(Set{}).Equal(Range(3, 1)) || !(Set{}).Equal(Of(1).Difference(Of(1))) {
		t.Error("differently built empty sets must be equal")
	}
	if Of(1, 2).Equal(Of(1)) || Of(1).Equal(Set{}) {
		t.Error("different sets reported equal")
	}
	if !Of(1, 2, 3).Equal(Range(1, 3)) {
		t.Error("same sets reported different")
	}
}

func TestQueries(t *testing.T) {
	s := mustParse(t, "1,3-5,7,10-12")
	cases := []struct {
		i    int
		want bool
	}{{-1, false}, {0, false}, {1, true}, {2, false}, {3, true}, {4, true}, {5, true}, {6, false}, {7, true}, {8, false}, {9, false}, {10, true}, {12, true}, {13, false}, {MaxIndex, false}, {MaxIndex + 1, false}}
	for _, tc := range cases {
		if got := s.Contains(tc.i); got != tc.want {
			t.Errorf("Contains(%d) = %v, want %v", tc.i, got, tc.want)
		}
	}
	if (Set{}).Contains(0) {
		t.Error("empty set contains 0")
	}
	if got := s.Count(); got != 8 {
		t.Errorf("Count = %d", got)
	}
	if got := s.NumIntervals(); got != 4 {
		t.Errorf("NumIntervals = %d", got)
	}
	if got := Range(0, MaxIndex).Count(); got != MaxIndex+1 {
		t.Errorf("Count of full range = %d", got)
	}
	if mn, ok := s.Min(); !ok || mn != 1 {
		t.Errorf("Min = %d, %v", mn, ok)
	}
	if mx, ok := s.Max(); !ok || mx != 12 {
		t.Errorf("Max = %d, %v", mx, ok)
	}
	if _, ok := (Set{}).Min(); ok {
		t.Error("Min of empty set")
	}
	if _, ok := (Set{}).Max(); ok {
		t.Error("Max of empty set")
	}
	if !(Set{}).IsEmpty() || !(Set{}).IsZero() || s.IsEmpty() || s.IsZero() {
		t.Error("IsEmpty/IsZero wrong")
	}
	if (Interval{3, 5}).Count() != 3 || (Interval{5, 3}).Count() != 0 {
		t.Error("Interval.Count wrong")
	}
}

func TestNthRank(t *testing.T) {
	sets := []string{"", "0", "7", "3,4", "0-2", "1,3-5,7,10-12", "0-99999", "2147483644-2147483646", "0,2,4,6,8,10,12"}
	for _, str := range sets {
		s := mustParse(t, str)
		var all []int
		s.Each(func(i int) bool { all = append(all, i); return true })
		if len(all) != s.Count() {
			t.Fatalf("%q: Each visited %d, Count %d", str, len(all), s.Count())
		}
		// Nth and Rank are inverse bijections between [0, Count) and s.
		for k, i := range all {
			if got, ok := s.Nth(k); !ok || got != i {
				t.Fatalf("%q: Nth(%d) = %d, %v; want %d", str, k, got, ok, i)
			}
			if r, ok := s.Rank(i); !ok || r != k {
				t.Fatalf("%q: Rank(%d) = %d, %v; want %d", str, i, r, ok, k)
			}
		}
		for _, k := range []int{-1, len(all), len(all) + 1, math.MinInt} {
			if _, ok := s.Nth(k); ok {
				t.Errorf("%q: Nth(%d) succeeded", str, k)
			}
		}
		for _, i := range []int{-1, 6, 9, 100000, MaxIndex + 1} {
			if s.Contains(i) {
				continue
			}
			if _, ok := s.Rank(i); ok {
				t.Errorf("%q: Rank(%d) of absent index succeeded", str, i)
			}
		}
	}
	// Spot checks on a large set without enumerating it.
	s := mustParse(t, "0-99,200-299,1000000-1999999")
	for _, c := range []struct{ k, i int }{{0, 0}, {99, 99}, {100, 200}, {199, 299}, {200, 1000000}, {1000199, 1999999}} {
		if got, ok := s.Nth(c.k); !ok || got != c.i {
			t.Errorf("Nth(%d) = %d, %v; want %d", c.k, got, ok, c.i)
		}
		if got, ok := s.Rank(c.i); !ok || got != c.k {
			t.Errorf("Rank(%d) = %d, %v; want %d", c.i, got, ok, c.k)
		}
	}
}

func TestEachAndAll(t *testing.T) {
	s := mustParse(t, "1,3-5,9")
	var got []int
	s.Each(func(i int) bool { got = append(got, i); return len(got) < 3 })
	if !slices.Equal(got, []int{1, 3, 4}) {
		t.Errorf("Each with early stop visited %v", got)
	}
	got = got[:0]
	for i := range s.All() {
		if i > 4 {
			break
		}
		got = append(got, i)
	}
	if !slices.Equal(got, []int{1, 3, 4}) {
		t.Errorf("All with break visited %v", got)
	}
	if all := slices.Collect(s.All()); !slices.Equal(all, []int{1, 3, 4, 5, 9}) {
		t.Errorf("All = %v", all)
	}
	// The last index must not overflow the loop.
	var top []int
	Range(MaxIndex-1, MaxIndex).Each(func(i int) bool { top = append(top, i); return true })
	if !slices.Equal(top, []int{MaxIndex - 1, MaxIndex}) {
		t.Errorf("Each at MaxIndex = %v", top)
	}
	(Set{}).Each(func(int) bool { t.Error("Each on empty set called fn"); return true })
}

func TestLimit(t *testing.T) {
	s := mustParse(t, "1,3-5,7,10-12")
	cases := []struct {
		n    int
		want string
	}{
		{-5, ""}, {0, ""}, {1, ""}, {2, "1"}, {3, "1"}, {4, "1,3"}, {5, "1,3,4"}, {6, "1,3-5"},
		{7, "1,3-5"}, {8, "1,3-5,7"}, {11, "1,3-5,7,10"}, {12, "1,3-5,7,10,11"}, {13, "1,3-5,7,10-12"},
		{1000, "1,3-5,7,10-12"}, {MaxIndex + 1, "1,3-5,7,10-12"},
	}
	for _, tc := range cases {
		got := s.Limit(tc.n)
		checkNormalized(t, got)
		if got.String() != tc.want {
			t.Errorf("Limit(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if s.String() != "1,3-5,7,10-12" {
		t.Fatalf("Limit modified its receiver: %q", s)
	}
	if got := (Set{}).Limit(10); !got.IsEmpty() {
		t.Errorf("empty.Limit = %q", got)
	}
	// A Limit result sharing memory with s must stay independent of later
	// operations on either.
	l := s.Limit(8)
	u := l.Union(Of(8))
	if l.String() != "1,3-5,7" || s.String() != "1,3-5,7,10-12" || u.String() != "1,3-5,7,8" {
		t.Errorf("aliasing: l=%q s=%q u=%q", l, s, u)
	}
}

func TestJSON(t *testing.T) {
	type record struct {
		Done   Set  `json:"done"`
		Failed Set  `json:"failed,omitzero"`
		Opt    *Set `json:"opt,omitempty"`
	}
	in := record{Done: mustParse(t, "0-2,4,6,7"), Failed: Of(1).Difference(Of(1))}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"done":"0-2,4,6,7"}` {
		t.Fatalf("Marshal = %s", b)
	}
	var out record
	if err := json.Unmarshal([]byte(`{"done":"0-2,4,6,7","failed":"","opt":"9"}`), &out); err != nil {
		t.Fatal(err)
	}
	if out.Done.String() != "0-2,4,6,7" || !out.Failed.IsEmpty() || out.Opt == nil || out.Opt.String() != "9" {
		t.Fatalf("Unmarshal = %+v", out)
	}
	// Strictness: a malformed value is an error naming the token, and the
	// target is left unchanged.
	keep := mustParse(t, "5")
	err = keep.UnmarshalText([]byte("1,3,2"))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Token != "2" {
		t.Fatalf("UnmarshalText error = %v", err)
	}
	if keep.String() != "5" {
		t.Fatalf("failed UnmarshalText changed the value to %q", keep)
	}
	if err := json.Unmarshal([]byte(`{"done":"1-x"}`), &out); err == nil {
		t.Fatal("json.Unmarshal accepted a malformed set")
	}
}
