package indexset

import (
	"fmt"
	"math"
	"strings"
)

// ParseJobStatus parses a Job's status.completedIndexes or
// status.failedIndexes the way the Kubernetes v1.35 Job controller does
// (parseIndexesFromString in pkg/controller/job/indexed_job_utils.go), so
// that batchledger accounts exactly the indexes Kubernetes accounts. It never
// fails; instead the returned []string describes what Kubernetes silently
// ignored or altered, so the controller can surface a corrupt status: an
// entry per affected token (tokens are numbered from 1) plus, when
// out-of-order tokens cost indexes, one entry listing them. It is nil when
// Kubernetes took the string at face value.
//
// Kubernetes' behaviour, replicated here token by token (a token is the text
// between commas; within it, the text is split at every '-'):
//
//   - A token whose first part is not a strconv.Atoi integer (empty, as in
//     "1,,2" or "-1"; spaces; letters; beyond int64) is skipped. Atoi is
//     applied with 64-bit semantics on every platform, as on the 64-bit
//     platforms the Job controller runs on.
//     Atoi-isms are accepted: "+5" and "007" are 5 and 7.
//   - The first token whose first index is >= completions ends parsing: it
//     and every later token are dropped, even later ones that are in range.
//   - A range whose second part is not an Atoi integer ("1-", "1-x") is
//     skipped; a second index >= completions is clamped to completions-1.
//   - Parts after a second '-' are ignored: "1-3-9" means 1-3.
//   - Descending ranges ("5-2") are kept by Kubernetes as malformed
//     intervals. Kubernetes is inconsistent about them (has finds no index
//     in them, total counts them negatively, String writes their first
//     index); here they hold no index.
//   - Tokens are never sorted, and a token is only joined to its
//     predecessor when it starts right after it.
//
// Every caller in the Job controller then passes that interval list through
// orderedIntervals.merge (via withOrderedIndexes) before counting, writing
// back or checking membership, and the result here is the set of indexes
// covered by that merged list. For every input whose tokens are ascending
// and non-overlapping, which includes everything the API server's
// completedIndexes validation accepts, this is exactly the list
// parseIndexesFromString returns. For out-of-order, overlapping or
// descending tokens Kubernetes' list is not a well-formed set, and its
// merge pass drops parts of it (for "5,1" it keeps only 5); the set
// returned is what survives that merge, and the []string says which listed
// indexes were lost.
//
// completions is the Job's spec.completions. Values above math.MaxInt32,
// impossible for an int32 field, are treated as math.MaxInt32, so the result
// always fits in a Set; every returned index is < completions.
func ParseJobStatus(s string, completions int) (Set, []string) {
	if s == "" {
		return Set{}, nil
	}
	limit := int64(min(completions, MaxIndex+1))
	// Upper bound on the number of intervals: one per token.
	out := make([]Interval, 0, strings.Count(s, ",")+1)
	var (
		notes    []string
		cur      Interval // parseIndexesFromString's lastInterval
		haveCur  bool
		odd      bool  // a token was descending, out of order or overlapping
		prevLast int64 = -1
		tokNo    int
	)
	for pos, end := 0, 0; pos <= len(s); pos = end + 1 {
		tokNo++
		first, last, e, _, _, ok := scanPlain(s, pos)
		end = e
		if !ok || first >= limit || last >= limit {
			// Rare: anything but plain in-range digits. Decode exactly as
			// Kubernetes does and say what it did.
			t := scanJobToken(s, pos, limit)
			end = t.end
			if t.kind == tokCorrupt {
				notes = append(notes, t.note(s, pos, tokNo, limit))
				continue
			}
			if t.kind == tokStop {
				notes = append(notes, t.note(s, pos, tokNo, limit))
				break
			}
			if t.clamped || t.extra >= 0 {
				notes = append(notes, t.note(s, pos, tokNo, limit))
			}
			first, last = t.first, t.last
		}
		if last < first || first <= prevLast {
			odd = true
			notes = append(notes, oddNote(s[pos:end], tokNo, first, last, prevLast))
		}
		prevLast = last
		iv := Interval{int(first), int(last)}
		if haveCur && cur.Last == iv.First-1 {
			cur.Last = iv.Last
			continue
		}
		if haveCur {
			out = k8sAppendOrMerge(out, cur)
		}
		cur, haveCur = iv, true
	}
	if haveCur {
		out = k8sAppendOrMerge(out, cur)
	}
	if !odd {
		// Ascending, well-formed tokens: Kubernetes' list is already
		// normalized and identical to out.
		return Set{ivs: trim(out)}, notes
	}
	return oddJobStatus(s, limit, out, notes)
}

// k8sAppendOrMerge is orderedIntervals.merge's appendOrMergeWithLastInterval:
// r extends the last interval if it starts no later than right after it,
// which silently drops whatever part of an out-of-order r lies below.
func k8sAppendOrMerge(out []Interval, r Interval) []Interval {
	if n := len(out); n > 0 && r.First <= out[n-1].Last+1 {
		out[n-1].Last = max(out[n-1].Last, r.Last)
		return out
	}
	return append(out, r)
}

// oddNote describes a descending, out-of-order or overlapping token.
func oddNote(tok string, tokNo int, first, last, prevLast int64) string {
	if last < first {
		return fmt.Sprintf("token %d %s: descending range holds no index", tokNo, quoteToken(tok))
	}
	return fmt.Sprintf("token %d %s: index %d is not above the previous token's last index %d (out of order or overlapping)", tokNo, quoteToken(tok), first, prevLast)
}

// scanPlain decodes the common token forms "123" and "123-456" at s[pos:]:
// 1 to 10 ASCII digits per part, ended by ',' or the end of s. It is the
// fast path of both parsers; ok is false for anything else (signs, spaces,
// empty or longer parts, a second '-'), which the callers then decode on
// their slow, precise paths. isRange reports the second form and zeros a
// part with a leading zero. end is the index of the terminating ',' or
// len(s) (meaningful only when ok).
func scanPlain(s string, pos int) (first, last int64, end int, isRange, zeros, ok bool) {
	i := pos
	for i < len(s) && s[i]-'0' <= 9 {
		first = first*10 + int64(s[i]-'0')
		i++
	}
	if n := i - pos; n == 0 || n > 10 {
		return 0, 0, i, false, false, false
	}
	zeros = s[pos] == '0' && i-pos > 1
	if i == len(s) || s[i] == ',' {
		return first, first, i, false, zeros, true
	}
	if s[i] != '-' {
		return 0, 0, i, false, false, false
	}
	i++
	j := i
	for i < len(s) && s[i]-'0' <= 9 {
		last = last*10 + int64(s[i]-'0')
		i++
	}
	if n := i - j; n == 0 || n > 10 || (i < len(s) && s[i] != ',') {
		return 0, 0, i, false, false, false
	}
	zeros = zeros || (s[j] == '0' && i-j > 1)
	return first, last, i, true, zeros, true
}

// oddJobStatus turns Kubernetes' merged interval list for an input with
// descending, out-of-order or overlapping tokens into a Set, and reports the
// indexes the string lists that Kubernetes' merge lost.
func oddJobStatus(s string, limit int64, merged []Interval, notes []string) (Set, []string) {
	// Kubernetes' merged list may hold descending intervals (no index) and,
	// after one, be unsorted.
	kept := merged[:0]
	for _, iv := range merged {
		if iv.First <= iv.Last {
			kept = append(kept, iv)
		}
	}
	got := Set{ivs: trim(normalize(kept))}

	// What a reader of the string would expect: the union of the in-range
	// tokens up to where Kubernetes stops.
	var listed []Interval
	for pos, end := 0, 0; pos <= len(s); pos = end + 1 {
		t := scanJobToken(s, pos, limit)
		end = t.end
		if t.kind == tokStop {
			break
		}
		if t.kind == tokOK && t.first <= t.last {
			listed = append(listed, Interval{int(t.first), int(t.last)})
		}
	}
	if lost := (Set{ivs: normalize(listed)}).Difference(got); !lost.IsEmpty() {
		notes = append(notes, fmt.Sprintf("indexes %s are listed but lost by Kubernetes' merge of the out-of-order, overlapping or descending tokens", quoteToken(lost.String())))
	}
	return got, notes
}

// trim drops the spare capacity of a preallocated slice when it is mostly
// unused, so long-lived Sets do not pin memory sized for the token count.
func trim(ivs []Interval) []Interval {
	if len(ivs) == 0 {
		return nil
	}
	if c := cap(ivs); c > 16 && c > 2*len(ivs) {
		return append([]Interval(nil), ivs...)
	}
	return ivs[:len(ivs):len(ivs)]
}

type tokenKind uint8

const (
	tokOK      tokenKind = iota
	tokCorrupt           // Kubernetes logs "Corrupted indexes interval, ignoring" and continues
	tokStop              // first index >= completions: Kubernetes breaks out of the loop
)

// jobToken is one comma-separated token as parseIndexesFromString sees it.
type jobToken struct {
	end         int // index of the ',' ending the token, or len(s)
	kind        tokenKind
	first, last int64 // last is clamped to completions-1, and may be < first
	rawLast     int64 // last before clamping
	clamped     bool
	extra       int    // index in s of a second '-' (text Kubernetes ignores), or -1
	bad         string // for tokCorrupt: the part strconv.Atoi rejects
	badWhy      string // for tokCorrupt: why
}

// scanJobToken decodes the token starting at s[pos] in a single pass,
// following parseIndexesFromString's order of checks exactly: parse the
// first part, stop if it is >= completions, then parse the second part and
// clamp it.
func scanJobToken(s string, pos int, limit int64) jobToken {
	t := jobToken{extra: -1}
	first, why, j := atoiPart(s, pos)
	secondAt := -1
	if j < len(s) && s[j] == '-' {
		secondAt = j + 1
	}
	// Find the end of the token regardless of what happens below.
	var last int64
	var lastWhy string
	k := j
	if secondAt >= 0 {
		last, lastWhy, k = atoiPart(s, secondAt)
		if k < len(s) && s[k] == '-' {
			t.extra = k
		}
	}
	if e := strings.IndexByte(s[k:], ','); e >= 0 {
		t.end = k + e
	} else {
		t.end = len(s)
	}
	switch {
	case why != "":
		t.kind, t.bad, t.badWhy = tokCorrupt, s[pos:j], why
	case first >= limit:
		t.kind, t.first = tokStop, first
	case secondAt < 0:
		t.first, t.last, t.rawLast = first, first, first
	case lastWhy != "":
		t.kind, t.bad, t.badWhy = tokCorrupt, s[secondAt:k], lastWhy
	default:
		t.first, t.last, t.rawLast = first, last, last
		if last >= limit {
			t.last, t.clamped = limit-1, true
		}
	}
	return t
}

// note describes what Kubernetes did with a token that was not taken at
// face value.
func (t jobToken) note(s string, pos, tokNo int, limit int64) string {
	tok := quoteToken(s[pos:t.end])
	switch t.kind {
	case tokCorrupt:
		return fmt.Sprintf("token %d %s: %s is not an integer (%s); Kubernetes ignores the token", tokNo, tok, quoteToken(t.bad), t.badWhy)
	case tokStop:
		rest := strings.Count(s[t.end:], ",")
		return fmt.Sprintf("token %d %s: index %d >= completions %d; Kubernetes stops parsing here, ignoring this token and the %d after it", tokNo, tok, t.first, limit, rest)
	}
	var msg string
	if t.clamped {
		msg = fmt.Sprintf("token %d %s: index %d >= completions %d; Kubernetes truncates the range to end at %d", tokNo, tok, t.rawLast, limit, t.last)
	}
	if t.extra >= 0 {
		if msg == "" {
			msg = fmt.Sprintf("token %d %s: ", tokNo, tok)
		} else {
			msg += "; "
		}
		msg += fmt.Sprintf("Kubernetes ignores %s after the second index", quoteToken(s[t.extra:t.end]))
	}
	return msg
}

// atoiPart parses s[i:] up to the next ',' or '-' (or the end) with the
// semantics of strconv.Atoi on a 64-bit platform, which is what Kubernetes
// applies to each '-'-separated part: an optional '+', at least one decimal
// digit, value <= math.MaxInt64. ('-' cannot occur inside a part because
// Kubernetes splits on it, so no part is negative.) It returns the value, a
// non-empty reason if Atoi would fail, and the index of the terminator.
func atoiPart(s string, i int) (int64, string, int) {
	j := i
	if j < len(s) && s[j] == '+' {
		j++
	}
	start := j
	var v uint64
	why := ""
	for ; j < len(s); j++ {
		c := s[j]
		if c == ',' || c == '-' {
			break
		}
		d := uint64(c) - '0'
		switch {
		case why != "":
		case d > 9:
			why = "invalid syntax"
		case v >= math.MaxInt64/10 && (v > math.MaxInt64/10 || d > math.MaxInt64%10):
			why = "value out of range"
		default:
			v = v*10 + d
		}
	}
	if j == start && why == "" {
		why = "invalid syntax"
	}
	return int64(v), why, j
}
