package indexset

import (
	"strconv"
	"strings"
	"testing"
)

// TestTextLenIsTheStringsLength: textLen is exactly len(String()) of a non-empty set,
// whatever the digits and the shape of the intervals (String and MarshalText allocate by
// it; they return the empty set's "" before asking).
func TestTextLenIsTheStringsLength(t *testing.T) {
	for _, s := range []Set{
		Of(0),
		Of(7, 9),
		Range(3, 4),
		Range(0, 9),
		Of(1, 3, 5).Union(Range(10, 99)).Union(Range(1000, 1001)),
		Range(123456789, 1234567890),
	} {
		if got, want := s.textLen(), len(s.String()); got != want {
			t.Errorf("textLen(%q) = %d; want %d", s, got, want)
		}
	}
}

// TestQuoteTokenBound: a token of 48 bytes is quoted whole, a longer one cut to 48 and
// marked.
func TestQuoteTokenBound(t *testing.T) {
	at := strings.Repeat("9", 48)
	if got := quoteToken(at); got != strconv.Quote(at) {
		t.Errorf("48 bytes: %s", got)
	}
	if got := quoteToken(at + "9"); got != strconv.Quote(at)+"..." {
		t.Errorf("49 bytes: %s", got)
	}
}

// TestNegativeIndexAtTheDigitBounds: "-0" and "-9" are negative indexes, not ranges
// missing their first index.
func TestNegativeIndexAtTheDigitBounds(t *testing.T) {
	for _, s := range []string{"-0", "-9"} {
		_, err := Parse(s)
		if pe, ok := err.(*ParseError); !ok || pe.Reason != "negative index" {
			t.Errorf("Parse(%q) = %v; want negative index", s, err)
		}
	}
	if _, err := Parse("-x"); err == nil || !strings.Contains(err.Error(), "missing first index of range") {
		t.Errorf(`Parse("-x") = %v; want missing first index of range`, err)
	}
}

// TestScanPlain pins the fast path both parsers share: plain tokens of up to ten digits
// are read exactly; anything else is left to the slow, precise path (ok false).
func TestScanPlain(t *testing.T) {
	type res struct {
		first, last        int64
		end                int
		isRange, zeros, ok bool
	}
	cases := []struct {
		s    string
		pos  int
		want res
	}{
		{"0", 0, res{0, 0, 1, false, false, true}},
		{"9", 0, res{9, 9, 1, false, false, true}},
		{"1234567890", 0, res{1234567890, 1234567890, 10, false, false, true}},
		{"1,2", 2, res{2, 2, 3, false, false, true}},
		{"1,0", 2, res{0, 0, 3, false, false, true}}, // "0" is no leading zero, wherever it starts
		{"3-9,1", 0, res{3, 9, 3, true, false, true}},
		{"0-9999999999", 0, res{0, 9999999999, 12, true, false, true}},
		{"09", 0, res{9, 9, 2, false, true, true}},
		{"1-09", 0, res{1, 9, 4, true, true, true}},
		{"1-0", 0, res{1, 0, 3, true, false, true}}, // descending is the caller's business; "0" is no leading zero
		{"12345678901", 0, res{0, 0, 11, false, false, false}},
		{"1-12345678901", 0, res{0, 0, 13, false, false, false}},
		{"1-", 0, res{0, 0, 2, false, false, false}},
		{"1-2-3", 0, res{0, 0, 3, false, false, false}},
		{"-1", 0, res{0, 0, 0, false, false, false}},
		{"1x", 0, res{0, 0, 1, false, false, false}},
	}
	for _, tc := range cases {
		var got res
		got.first, got.last, got.end, got.isRange, got.zeros, got.ok = scanPlain(tc.s, tc.pos)
		if got != tc.want {
			t.Errorf("scanPlain(%q, %d) = %+v; want %+v", tc.s, tc.pos, got, tc.want)
		}
	}
}

// TestTrimPolicy: a slice keeps its backing array, cut to its length, unless its capacity
// is over 16 and more than twice its length: then it is copied into a small one.
func TestTrimPolicy(t *testing.T) {
	for _, tc := range []struct {
		len, cap int
		copied   bool
	}{{1, 16, false}, {1, 17, true}, {17, 34, false}, {17, 35, true}} {
		ivs := make([]Interval, tc.len, tc.cap)
		got := trim(ivs)
		copied := &got[0] != &ivs[0]
		if copied != tc.copied || len(got) != tc.len || (!copied && cap(got) != tc.len) || (copied && cap(got) > 2*tc.len) {
			t.Errorf("trim(len %d, cap %d): copied %v, len %d, cap %d; want copied %v", tc.len, tc.cap, copied, len(got), cap(got), tc.copied)
		}
	}
}

// TestIntervalCountAtItsBounds: one index counts one, a descending interval none.
func TestIntervalCountAtItsBounds(t *testing.T) {
	for iv, want := range map[Interval]int{{3, 3}: 1, {3, 4}: 2, {3, 2}: 0, {0, 0}: 1} {
		if got := iv.Count(); got != want {
			t.Errorf("%+v.Count() = %d; want %d", iv, got, want)
		}
	}
}

// TestParseBoundsOfATokenValue: "3-3" is no range (i-j needs i < j), and one digit past
// MaxIndex is out of range even when the prefix is MaxIndex itself.
func TestParseBoundsOfATokenValue(t *testing.T) {
	for _, s := range []string{"3-3", strconv.Itoa(MaxIndex) + "0", "0-" + strconv.Itoa(MaxIndex) + "0"} {
		if got, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %q; want an error", s, got)
		}
	}
	if got, err := Parse(strconv.Itoa(MaxIndex)); err != nil || got.String() != strconv.Itoa(MaxIndex) {
		t.Errorf("Parse(MaxIndex) = %q, %v", got, err)
	}
}
