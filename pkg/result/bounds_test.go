package result

import (
	"strings"
	"testing"
)

// TestCanonicalEncodingAtTheLimit: a message under MaxMessageBytes whose canonical
// encoding (U+2028 written as a six-byte escape) is exactly MaxMessageBytes is Oversized;
// one byte less is accepted.
func TestCanonicalEncodingAtTheLimit(t *testing.T) {
	for _, canonical := range []int{MaxMessageBytes - 1, MaxMessageBytes} {
		r := Report{Version: SchemaVersion, Shard: "s", InputRevision: "i", ModelRevision: "m", Digest: "d", Output: strings.Repeat("\u2028", 100)}
		base, err := encodeRaw(r)
		if err != nil {
			t.Fatal(err)
		}
		r.Output += strings.Repeat("x", canonical-len(base))
		enc, err := encodeRaw(r)
		if err != nil || len(enc) != canonical {
			t.Fatalf("canonical encoding of %d bytes, want %d: %v", len(enc), canonical, err)
		}
		// The worker writes U+2028 raw: 3 bytes instead of the escape's 6.
		msg := strings.ReplaceAll(enc, `\u2028`, "\u2028")
		if len(msg) >= MaxMessageBytes {
			t.Fatalf("raw message of %d bytes is oversized by itself", len(msg))
		}
		_, derr := decode(msg)
		switch {
		case canonical < MaxMessageBytes && derr != nil:
			t.Errorf("canonical %d bytes (message %d): %v; want accepted", canonical, len(msg), derr)
		case canonical == MaxMessageBytes && (derr == nil || derr.Reason != ReasonOversized):
			t.Errorf("canonical %d bytes (message %d): %v; want %s", canonical, len(msg), derr, ReasonOversized)
		}
	}
}

// TestTopLevelMembers: the fast path's guard against a repeated name counts the members
// of a valid JSON object exactly, whatever its strings and nesting hold.
func TestTopLevelMembers(t *testing.T) {
	cases := map[string]int{
		`{}`:                                    0,
		` { } `:                                 0,
		`{"a":1}`:                               1,
		`{"a":1,"b":2}`:                         2,
		`{"a":"x,y","b":"}{"}`:                  2,
		`{"a":"\",\"","b":"\\"}`:                2,
		`{"a":{"b":1,"c":[1,2,{"d":3}]},"e":4}`: 2,
		`{"a":[],"b":{},"c":[[],[]]}`:           3,
		`{"a":1,"a":2}`:                         2,
	}
	for msg, want := range cases {
		if got := topLevelMembers(msg); got != want {
			t.Errorf("topLevelMembers(%s) = %d; want %d", msg, got, want)
		}
	}
}

// TestNearStaysInsideTheMessage: the excerpt of a message that starts with bytes no rune
// starts with begins at the message's first byte, never before it.
func TestNearStaysInsideTheMessage(t *testing.T) {
	if got, want := near("\x80\x80{}", 1), `"\x80\x80{}"`; got != want {
		t.Errorf("near = %s; want %s", got, want)
	}
	// An excerpt never splits a rune: both ends move outwards to the rune's boundary.
	if got, want := near(strings.Repeat("é", 20), 17), "`"+strings.Repeat("é", 17)+"`"; got != want {
		t.Errorf("near = %s; want %s", got, want)
	}
	if _, err := decode("\x80\x80{}"); err == nil || err.Reason != ReasonMalformed {
		t.Errorf("decode of a message starting with continuation bytes: %v; want %s", err, ReasonMalformed)
	}
}

// TestEncodeAtTheLimit: Encode refuses a result whose encoding is exactly MaxMessageBytes
// (the kubelet would truncate it) and writes one a byte shorter.
func TestEncodeAtTheLimit(t *testing.T) {
	r := Report{Version: SchemaVersion, Shard: "s", InputRevision: "i", ModelRevision: "m", Digest: "d", Output: "x"}
	base, err := encodeRaw(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{MaxMessageBytes - 1, MaxMessageBytes} {
		r.Output = strings.Repeat("x", 1+n-len(base))
		s, err := Encode(r)
		switch {
		case n < MaxMessageBytes && (err != nil || len(s) != n):
			t.Errorf("%d bytes: %d written, %v; want it written", n, len(s), err)
		case n == MaxMessageBytes && (err == nil || !strings.Contains(err.Error(), "4096 bytes")):
			t.Errorf("%d bytes: %v; want refused", n, err)
		}
	}
}

// TestPlainString: the fast path reads a JSON string without escapes, the empty one
// included, and leaves anything with a backslash to the general decoder.
func TestPlainString(t *testing.T) {
	cases := []struct {
		in   string
		want string
		ok   bool
	}{{`""`, "", true}, {`"a"`, "a", true}, {`"a b"`, "a b", true}, {`"a\"b"`, "", false}, {`"`, "", false}, {``, "", false}}
	for _, tc := range cases {
		if got, ok := plainString([]byte(tc.in)); got != tc.want || ok != tc.ok {
			t.Errorf("plainString(%s) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestFormatFloat: a float is written in the shorter of its plain and exponent forms,
// the plain one on a tie, always exactly.
func TestFormatFloat(t *testing.T) {
	cases := map[float64]string{
		123456: "123456.0", // the exponent form 1.23456e+05 is longer
		1e5:    "1e+05",    // shorter than 100000.0
		0.001:  "0.001",    // a tie with 1e-03: plain
		0.0001: "1e-04",    // shorter than 0.0001
		2.5:    "2.5",
		1:      "1.0",
	}
	for f, want := range cases {
		if got, err := formatFloat(f); err != nil || string(got) != want {
			t.Errorf("formatFloat(%v) = %q, %v; want %q", f, got, err, want)
		}
	}
}
