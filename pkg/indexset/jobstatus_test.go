package indexset

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// checkAgainstKubernetes asserts that ParseJobStatus agrees with the
// verbatim Kubernetes code in k8sref_test.go on s, and returns our result.
func checkAgainstKubernetes(t testing.TB, s string, completions int) (Set, []string) {
	t.Helper()
	got, notes := ParseJobStatus(s, completions)
	checkNormalized(t, got)
	if mx, ok := got.Max(); ok && mx >= completions {
		t.Fatalf("ParseJobStatus(%q, %d) = %q holds %d >= completions", s, completions, got, mx)
	}
	if completions > math.MaxInt32 {
		return got, notes // Kubernetes cannot have such a Job.
	}
	if strconv.IntSize < 64 && hasLongNumber(s) {
		// ParseJobStatus always applies 64-bit strconv.Atoi semantics, as
		// the Job controller runs on 64-bit platforms; the reference copy
		// here would use this platform's 32-bit Atoi.
		return got, notes
	}
	eff := k8sEffective(s, completions)
	// Set semantics of Kubernetes' merged list: descending intervals hold
	// nothing (FromIntervals ignores them).
	want := FromIntervals(fromK8s(eff)...)
	if !got.Equal(want) {
		t.Fatalf("ParseJobStatus(%q, %d) = %q; Kubernetes' merged intervals %v hold %q", s, completions, got, eff, want)
	}
	if k8sWellFormed(eff) {
		// Then Kubernetes' list is normalized and must match exactly,
		// including what it writes back.
		if !slices.Equal(got.Intervals(), fromK8s(eff)) {
			t.Fatalf("ParseJobStatus(%q, %d) intervals %v, Kubernetes %v", s, completions, got.Intervals(), eff)
		}
		if got.String() != eff.String() || got.Count() != eff.total() {
			t.Fatalf("ParseJobStatus(%q, %d): String %q Count %d; Kubernetes %q %d", s, completions, got, got.Count(), eff.String(), eff.total())
		}
		for i := -1; i <= completions && i < 64; i++ {
			if got.Contains(i) != eff.has(i) {
				t.Fatalf("ParseJobStatus(%q, %d).Contains(%d) = %v, Kubernetes has = %v", s, completions, i, got.Contains(i), eff.has(i))
			}
		}
	}
	if notes == nil {
		// Nothing reported means Kubernetes' own, unmerged parse is already
		// exactly our normalized set.
		raw := k8sParseIndexesFromString(s, completions)
		if !slices.Equal(got.Intervals(), fromK8s(raw)) {
			t.Fatalf("ParseJobStatus(%q, %d) reported nothing, but Kubernetes' raw parse %v differs from %v", s, completions, raw, got.Intervals())
		}
	}
	return got, notes
}

// hasLongNumber reports whether s has a run of 10 or more digits, the only
// inputs on which strconv.Atoi differs between 32- and 64-bit platforms.
func hasLongNumber(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			if run++; run >= 10 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

func TestParseJobStatus(t *testing.T) {
	cases := []struct {
		name        string
		in          string
		completions int
		want        string
		// wantNotes holds one substring per expected note, in order.
		wantNotes []string
	}{
		// Status strings from Kubernetes' TestCalculateSucceededIndexes
		// (prevSucceeded -> wantStatusIntervals) and
		// TestCalculateFailedIndexes (the prev failed indexes cases).
		{"k8s: empty", "", 2, "", nil},
		{"k8s: prev interval out of range", "0-5,8-10", 8, "0-5",
			[]string{`token 2 "8-10": index 8 >= completions 8; Kubernetes stops parsing here, ignoring this token and the 0 after it`}},
		{"k8s: prev interval partially out of range", "0-5,8-10", 10, "0-5,8,9",
			[]string{`token 2 "8-10": index 10 >= completions 10; Kubernetes truncates the range to end at 9`}},
		{"k8s: prev and new separate", "0,4,5,10-12", 13, "0,4,5,10-12", nil},
		{"k8s: prev between new", "3,4,6", 9, "3,4,6", nil},
		{"k8s: new between prev", "2,7,8", 9, "2,7,8", nil},
		{"k8s: new within prev", "2-7", 10, "2-7", nil},
		{"k8s: corrupted interval", "0,1-foo,bar", 4, "0", []string{
			`token 2 "1-foo": "foo" is not an integer (invalid syntax); Kubernetes ignores the token`,
			`token 3 "bar": "bar" is not an integer`}},
		{"k8s: extend the failed indexes", "0", 2, "0", nil},
		{"k8s: prev failed indexes outside the completions", "9", 2, "", []string{`token 1 "9": index 9 >= completions 2`}},
		// The inputs of Kubernetes' TestValidateIndexesString, which the API
		// server rejects but the Job controller parses leniently.
		{"validation: mixed intervals valid", "0,1-3,5,7-10", 12, "0-3,5,7-10", nil},
		{"validation: extra space", "0,1-3, 5", 6, "0-3", []string{`token 3 " 5": " 5" is not an integer`}},
		{"validation: too large index", "0,1-3,5", 5, "0-3", []string{`token 3 "5": index 5 >= completions 5`}},
		{"validation: non-increasing order of intervals", "1-3,0,5", 6, "1-3,5", []string{
			`token 2 "0": index 0 is not above the previous token's last index 3`,
			`indexes "0" are listed but lost`}},
		{"validation: non-increasing order between intervals", "0,0,5", 6, "0,5", []string{
			`token 2 "0": index 0 is not above the previous token's last index 0`}},
		{"validation: single-index range is accepted", "0,1-1,5", 6, "0,1,5", nil},
		{"validation: starting with '-'", "-1,0", 6, "0", []string{`token 1 "-1": "" is not an integer`}},
		{"validation: ending with '-'", "0,1-", 6, "0", []string{`token 2 "1-": "" is not an integer`}},
		{"validation: repeated '-'", "0,1--3", 6, "0", []string{`token 2 "1--3": "" is not an integer`}},
		{"validation: repeated ','", "0,,1,3", 6, "0,1,3", []string{`token 2 "": "" is not an integer`}},
		// Quirks of parseIndexesFromString.
		{"parts after a second '-' are ignored", "1-3-9", 10, "1-3", []string{`token 1 "1-3-9": Kubernetes ignores "-9" after the second index`}},
		{"garbage after a second '-' is ignored", "0,2-4-x,6", 10, "0,2-4,6", []string{`Kubernetes ignores "-x"`}},
		{"clamp and extra on one token", "2-12-1", 10, "2-9", []string{`truncates the range to end at 9; Kubernetes ignores "-1"`}},
		{"Atoi accepts '+' and leading zeros", "+5,007,+0008-+10", 20, "5,7-10", nil},
		{"long leading zeros", "00000000000000000000000005", 10, "5", nil},
		{"lone '+'", "+,1", 10, "1", []string{`token 1 "+": "+" is not an integer`}},
		{"'+-'", "+-1,2", 10, "2", []string{`"+" is not an integer`}},
		{"stop drops later in-range tokens", "12,3", 10, "", []string{`token 1 "12": index 12 >= completions 10; Kubernetes stops parsing here, ignoring this token and the 1 after it`}},
		{"stop in the middle", "3,12,4,5", 10, "3", []string{`token 2 "12": index 12 >= completions 10; Kubernetes stops parsing here, ignoring this token and the 2 after it`}},
		{"stop ignores a corrupt second part", "12-x,1", 10, "", []string{`token 1 "12-x": index 12 >= completions 10`}},
		{"int64 overflow is corrupt, not a stop", "99999999999999999999,3", 10, "3", []string{`"99999999999999999999" is not an integer (value out of range)`}},
		{"MaxInt64 is a stop", "9223372036854775807,3", 10, "", []string{`index 9223372036854775807 >= completions 10`}},
		{"MaxInt64+1 is corrupt", "9223372036854775808,3", 10, "3", []string{`value out of range`}},
		{"overflowing second part is corrupt", "2-99999999999999999999,4", 10, "4", []string{`token 1 "2-99999999999999999999": "99999999999999999999" is not an integer (value out of range)`}},
		{"MaxInt64 second part is clamped", "2-9223372036854775807", 10, "2-9", []string{`index 9223372036854775807 >= completions 10; Kubernetes truncates the range to end at 9`}},
		{"completions 0", "0,1", 0, "", []string{`token 1 "0": index 0 >= completions 0`}},
		{"negative completions", "0", -3, "", []string{`index 0 >= completions -3`}},
		{"corrupt before stop", "abc,0-2", 0, "", []string{`token 1 "abc"`, `token 2 "0-2": index 0 >= completions 0`}},
		{"only commas", ",", 5, "", []string{`token 1 ""`, `token 2 ""`}},
		{"whitespace", "1,\t2", 5, "1", []string{`token 2 "\t2"`}},
		{"single-index range", "3-3", 10, "3", nil},
		{"adjacent tokens merge", "0-2,3-5", 10, "0-5", nil},
		{"adjacent singles merge", "0,1,2,3", 10, "0-3", nil},
		{"clamp to completions-1 from the first index", "9-15", 10, "9", []string{`truncates the range to end at 9`}},
		{"large job", "0-99998", 100000, "0-99998", nil},
		{"max completions", "0-4,2147483646", math.MaxInt32, "0-4,2147483646", nil},
		{"completions beyond int32 act as MaxInt32", "2147483646,2147483647,5", math.MaxInt, "2147483646", []string{`token 2 "2147483647": index 2147483647 >= completions 2147483647; Kubernetes stops parsing here, ignoring this token and the 1 after it`}},
		// Out-of-order, overlapping and descending tokens: Kubernetes keeps
		// its raw list unsorted; the merge pass every caller applies then
		// drops what it cannot place.
		{"out of order single", "5,1", 10, "5", []string{
			`token 2 "1": index 1 is not above the previous token's last index 5`,
			`indexes "1" are listed but lost`}},
		{"out of order range is partly kept", "5,1-9", 10, "5-9", []string{
			`token 2 "1-9": index 1 is not above`,
			`indexes "1-4" are listed but lost`}},
		{"overlap loses nothing", "1-5,3-7", 10, "1-7", []string{`token 2 "3-7": index 3 is not above the previous token's last index 5 (out of order or overlapping)`}},
		{"duplicate", "4,4", 10, "4", []string{`token 2 "4"`}},
		{"descending range", "5-2", 10, "", []string{`token 1 "5-2": descending range holds no index`}},
		{"descending range truncates its predecessor", "1-5,6-2", 10, "1,2", []string{
			`token 2 "6-2": descending range holds no index`,
			`indexes "3-5" are listed but lost`}},
		{"tokens joined to a descending range", "5-2,3,4,5,6", 10, "5,6", []string{
			`token 1 "5-2": descending range`,
			`indexes "3,4" are listed but lost`}},
		{"unsorted after a descending range", "0-10,20-1,5", 30, "0-10", []string{`token 2 "20-1": descending range`}},
		{"descending range swallows a later lower token", "9-7,3", 10, "", []string{
			`token 1 "9-7": descending range`,
			`token 2 "3": index 3 is not above the previous token's last index 7`,
			`indexes "3" are listed but lost`}},
		{"descending at the end", "0,3-1", 10, "0", []string{`token 2 "3-1": descending`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, notes := checkAgainstKubernetes(t, tc.in, tc.completions)
			if got.String() != tc.want {
				t.Errorf("ParseJobStatus(%q, %d) = %q, want %q", tc.in, tc.completions, got, tc.want)
			}
			if len(notes) != len(tc.wantNotes) {
				t.Fatalf("notes = %q, want %d matching %q", notes, len(tc.wantNotes), tc.wantNotes)
			}
			for i, want := range tc.wantNotes {
				if !strings.Contains(notes[i], want) {
					t.Errorf("note %d = %q, want it to contain %q", i, notes[i], want)
				}
			}
			// Whatever the strict parser accepts, the lenient one must read
			// identically and without complaint.
			if strict, err := Parse(tc.in); err == nil && tc.completions == math.MaxInt32 {
				if !strict.Equal(got) || notes != nil {
					t.Errorf("strict %q vs lenient %q, notes %q", strict, got, notes)
				}
			}
		})
	}
}

// TestParseJobStatusHugeNotes checks that notes stay short however large the
// offending token, because they end up in Events.
func TestParseJobStatusHugeNotes(t *testing.T) {
	huge := strings.Repeat("7", 100000)
	_, notes := ParseJobStatus("0,"+huge+"-x,"+huge, 10)
	if len(notes) != 2 {
		t.Fatalf("notes = %d", len(notes))
	}
	for _, n := range notes {
		if len(n) > 300 {
			t.Errorf("note of %d bytes", len(n))
		}
	}
}

// TestParseJobStatusAgreesWithStrict checks a spread of canonical strings:
// the lenient parser reads them exactly like the strict one, with no notes.
func TestParseJobStatusAgreesWithStrict(t *testing.T) {
	for _, s := range []string{"", "0", "3,4", "0-2", "1,3-5,7", "0-99999", "0,2,4,6", "0-5,7-12,14-19"} {
		strict := mustParse(t, s)
		lenient, notes := checkAgainstKubernetes(t, s, 100000)
		if !strict.Equal(lenient) || notes != nil {
			t.Errorf("%q: strict %q, lenient %q %q", s, strict, lenient, notes)
		}
	}
}

// TestParseJobStatusTrimsCapacity checks that a Set parsed from a string of
// many tokens that collapse into few intervals does not pin a slice sized
// for the tokens.
func TestParseJobStatusTrimsCapacity(t *testing.T) {
	var b strings.Builder
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(Of(i).String())
	}
	got, notes := ParseJobStatus(b.String(), 1000)
	if notes != nil || got.String() != "0-999" {
		t.Fatalf("got %q %q", got, notes)
	}
	if c := cap(got.ivs); c != 1 {
		t.Errorf("cap = %d", c)
	}
}
