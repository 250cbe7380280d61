package indexset

import (
	"fmt"
	"strconv"
	"strings"
)

// String returns s in the format of the Kubernetes Job controller's
// status.completedIndexes: ascending, comma-separated; three or more
// consecutive indexes are written as "first-last", two as "a,b" and a lone
// index as "i"; the empty set is "". For example {1,3,4,5,7} is "1,3-5,7"
// and {3,4} is "3,4". The output is byte-for-byte what Kubernetes writes for
// the same indexes, so it can be compared with a Job's status directly.
func (s Set) String() string {
	if len(s.ivs) == 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(s.textLen())
	var tmp [20]byte
	for k, iv := range s.ivs {
		if k > 0 {
			b.WriteByte(',')
		}
		b.Write(strconv.AppendInt(tmp[:0], int64(iv.First), 10))
		if iv.Last > iv.First {
			if iv.Last == iv.First+1 {
				b.WriteByte(',')
			} else {
				b.WriteByte('-')
			}
			b.Write(strconv.AppendInt(tmp[:0], int64(iv.Last), 10))
		}
	}
	return b.String()
}

// textLen returns len(s.String()) so String and MarshalText allocate once.
func (s Set) textLen() int {
	n := len(s.ivs) - 1 // separators between intervals
	for _, iv := range s.ivs {
		n += decimalLen(iv.First)
		if iv.Last > iv.First {
			n += 1 + decimalLen(iv.Last)
		}
	}
	return n
}

func decimalLen(v int) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// AppendText implements encoding.TextAppender: it appends s.String() to b.
// The error is always nil.
func (s Set) AppendText(b []byte) ([]byte, error) {
	for k, iv := range s.ivs {
		if k > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(iv.First), 10)
		if iv.Last > iv.First {
			if iv.Last == iv.First+1 {
				b = append(b, ',')
			} else {
				b = append(b, '-')
			}
			b = strconv.AppendInt(b, int64(iv.Last), 10)
		}
	}
	return b, nil
}

// MarshalText implements encoding.TextMarshaler with the Kubernetes format
// of String, so a Set field in a JSON struct reads like a Job status field.
// The error is always nil.
func (s Set) MarshalText() ([]byte, error) {
	if len(s.ivs) == 0 {
		return []byte{}, nil
	}
	return s.AppendText(make([]byte, 0, s.textLen()))
}

// UnmarshalText implements encoding.TextUnmarshaler with the strict Parse:
// text batchledger stored itself must never be silently repaired. On error
// *s is left unchanged.
func (s *Set) UnmarshalText(text []byte) error {
	v, err := Parse(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseError describes why Parse rejected its input. It names the offending
// comma-separated token so that a corrupt stored value can be located.
type ParseError struct {
	// Token is the offending token, verbatim (possibly empty, as in "1,,2").
	Token string
	// Offset is the byte offset of Token within the input.
	Offset int
	// Reason says what is wrong with Token.
	Reason string
}

// Error implements error.
func (e *ParseError) Error() string {
	return fmt.Sprintf("indexset: invalid token %s at offset %d: %s", quoteToken(e.Token), e.Offset, e.Reason)
}

// quoteToken quotes a token for a message, truncating huge ones: status
// strings can be megabytes long and messages end up in Events and logs.
func quoteToken(tok string) string {
	const maxLen = 48
	if len(tok) > maxLen {
		return strconv.Quote(tok[:maxLen]) + "..."
	}
	return strconv.Quote(tok)
}

// Parse parses the Kubernetes completedIndexes format strictly: any
// malformed token (empty, signs, leading zeros, spaces, more than one '-'),
// an index above MaxIndex, a negative index, a descending or single-index
// range ("5-3", "3-3"), and out-of-order or overlapping tokens are errors of
// type *ParseError naming the token. "" is the empty set.
//
// It accepts exactly what String produces, plus any other ascending,
// non-overlapping spelling of a set, which it normalizes: "1-2" and "1,2"
// both give {1,2}, "1,2,3" gives "1-3". Everything it accepts is also
// accepted by the Kubernetes API server's completedIndexes validation (for a
// Job whose completions exceed the largest index), and ParseJobStatus reads
// it as the same set without notes.
//
// Use ParseJobStatus, not Parse, for strings read from a Job's status.
func Parse(s string) (Set, error) {
	if s == "" {
		return Set{}, nil
	}
	ivs := make([]Interval, 0, strings.Count(s, ",")+1)
	for pos, end := 0, 0; pos <= len(s); pos = end + 1 {
		first, last, e, isRange, zeros, ok := scanPlain(s, pos)
		end = e
		var iv Interval
		var reason string
		if ok && !zeros && last <= MaxIndex && (!isRange || first < last) {
			iv = Interval{int(first), int(last)}
		} else {
			// Rare: decode the token again, slowly, to say what is wrong.
			end = strings.IndexByte(s[pos:], ',')
			if end < 0 {
				end = len(s)
			} else {
				end += pos
			}
			iv, reason = parseStrictToken(s[pos:end])
		}
		if reason == "" && len(ivs) > 0 {
			last := &ivs[len(ivs)-1]
			switch {
			case iv.First <= last.Last:
				reason = fmt.Sprintf("not above the previous index %d (out of order or overlapping)", last.Last)
			case iv.First == last.Last+1:
				last.Last = iv.Last
				continue
			}
		}
		if reason != "" {
			return Set{}, &ParseError{Token: s[pos:end], Offset: pos, Reason: reason}
		}
		ivs = append(ivs, iv)
	}
	return Set{ivs: ivs}, nil
}

// parseStrictToken parses "i" or "i-j" (i < j) for Parse. It returns a
// non-empty reason if tok is not one of those forms.
func parseStrictToken(tok string) (Interval, string) {
	if tok == "" {
		return Interval{}, "empty token"
	}
	d := strings.IndexByte(tok, '-')
	if d < 0 {
		i, reason := parseStrictIndex(tok)
		return Interval{i, i}, reason
	}
	if d == 0 {
		if len(tok) > 1 && tok[1] >= '0' && tok[1] <= '9' {
			return Interval{}, "negative index"
		}
		return Interval{}, "missing first index of range"
	}
	firstStr, lastStr := tok[:d], tok[d+1:]
	if strings.IndexByte(lastStr, '-') >= 0 {
		return Interval{}, "more than one '-'"
	}
	first, reason := parseStrictIndex(firstStr)
	if reason != "" {
		return Interval{}, reason
	}
	if lastStr == "" {
		return Interval{}, "missing last index of range"
	}
	last, reason := parseStrictIndex(lastStr)
	if reason != "" {
		return Interval{}, reason
	}
	switch {
	case first > last:
		return Interval{}, "descending range"
	case first == last:
		// Kubernetes' API validation rejects "i-i" too.
		return Interval{}, fmt.Sprintf("range of a single index (write %d)", first)
	}
	return Interval{first, last}, ""
}

// parseStrictIndex parses a canonical non-negative decimal <= MaxIndex: no
// sign, no leading zeros, no spaces.
func parseStrictIndex(str string) (int, string) {
	if str == "" {
		return 0, "missing index"
	}
	var v int64 // int64 so v*10+9 cannot overflow where int is 32 bits
	for k := 0; k < len(str); k++ {
		c := str[k]
		if c < '0' || c > '9' {
			return 0, fmt.Sprintf("%s is not a decimal index", quoteToken(str))
		}
		if v <= MaxIndex { // once above MaxIndex, stop accumulating: no overflow
			v = v*10 + int64(c-'0')
		}
	}
	switch {
	case len(str) > 1 && str[0] == '0':
		return 0, fmt.Sprintf("%s has a leading zero", quoteToken(str))
	case v > MaxIndex:
		return 0, fmt.Sprintf("index %s exceeds the maximum %d", quoteToken(str), MaxIndex)
	}
	return int(v), ""
}
