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
