package result

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// good is a typical valid result.
const good = `{"version":"batchledger.dev/v1","shard":"part-00017","inputRevision":"in-1","modelRevision":"m-3",` +
	`"output":"s3://bucket/run/part-00017.parquet","digest":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",` +
	`"records":120000,"valid":119998}`

// padTo returns a valid result padded (through an extra field) to exactly n bytes.
func padTo(t testing.TB, n int) string {
	t.Helper()
	base := `{"version":"batchledger.dev/v1","shard":"s","inputRevision":"i","modelRevision":"m","digest":"d","pad":""}`
	if n < len(base) {
		t.Fatalf("cannot pad to %d bytes", n)
	}
	s := strings.Replace(base, `"pad":""`, `"pad":"`+strings.Repeat("x", n-len(base))+`"`, 1)
	if len(s) != n {
		t.Fatalf("padded to %d bytes, want %d", len(s), n)
	}
	return s
}

// decodeCase is a message and what Decode makes of it: the report, or the rejection's
// reason and what its message says.
type decodeCase struct {
	name   string
	msg    string
	want   *Report
	reason string
	// substrings the rejection message must contain: it has to say what and where.
	say []string
}

// decodeCases are the good and bad messages of pkg/result's tests, shared by TestDecode
// and the JSON Schema's agreement test.
func decodeCases(t testing.TB) []decodeCase {
	return []decodeCase{{
		name: "valid",
		msg:  good,
		want: &Report{Version: SchemaVersion, Shard: "part-00017", InputRevision: "in-1", ModelRevision: "m-3",
			Output: "s3://bucket/run/part-00017.parquet", Digest: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			Records: 120000, Valid: 119998},
	}, {
		name: "valid with whitespace and trailing newline, no output, counts absent",
		msg:  "{\n  \"version\": \"batchledger.dev/v1\",\n  \"shard\": \"a\",\n  \"inputRevision\": \"i\",\n  \"modelRevision\": \"m\",\n  \"digest\": \"d\"\n}\n",
		want: &Report{Version: SchemaVersion, Shard: "a", InputRevision: "i", ModelRevision: "m", Digest: "d"},
	}, {
		name: "unknown extra fields kept in Extra",
		msg:  `{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d","records":3,"valid":3,"retries":2,"durationSeconds":812.5,"approved":true,"tags":["x",1],"meta":{"host":"n1","gpu":null},"big":1e30}`,
		want: &Report{Version: SchemaVersion, Shard: "a", InputRevision: "i", ModelRevision: "m", Digest: "d", Records: 3, Valid: 3,
			Extra: map[string]any{"retries": int64(2), "durationSeconds": 812.5, "approved": true, "tags": []any{"x", int64(1)},
				"meta": map[string]any{"host": "n1", "gpu": nil}, "big": 1e30}},
	}, {
		name: "field names are case-sensitive: Shard is an extra field, shard is missing",
		msg:  `{"version":"batchledger.dev/v1","Shard":"a","inputRevision":"i","modelRevision":"m","digest":"d"}`, reason: ReasonMissingField, say: []string{`"shard"`},
	}, {
		name: "empty", msg: "", reason: ReasonMissing, say: []string{"empty", "/dev/termination-log"},
	}, {
		name: "whitespace only", msg: " \n", reason: ReasonMissing,
	}, {
		name: "malformed JSON", msg: `{"version":"batchledger.dev/v1","shard":"a" "digest":"d"}`, reason: ReasonMalformed, say: []string{"byte 44", `"digest"`},
	}, {
		name: "truncated JSON", msg: `{"version":"batchledger.dev/v1","shard":"a`, reason: ReasonMalformed, say: []string{"truncated", "byte 42"},
	}, {
		name: "not an object", msg: `["version"]`, reason: ReasonMalformed, say: []string{"JSON object"},
	}, {
		name: "two objects", msg: good + `{}`, reason: ReasonMalformed, say: []string{"after the JSON object"},
	}, {
		name: "trailing garbage", msg: good + ` x`, reason: ReasonMalformed, say: []string{"invalid JSON at byte"},
	}, {
		name: "duplicate field", msg: `{"version":"batchledger.dev/v1","shard":"a","shard":"b","inputRevision":"i","modelRevision":"m","digest":"d"}`, reason: ReasonMalformed, say: []string{`"shard" appears more than once`},
	}, {
		name: "invalid UTF-8", msg: "{\"version\":\"batchledger.dev/v1\",\"shard\":\"\xff\"}", reason: ReasonMalformed, say: []string{"UTF-8", "byte 41"},
	}, {
		name: "exactly 4096 bytes", msg: padTo(t, MaxMessageBytes), reason: ReasonOversized, say: []string{"4096 bytes", "truncates"},
	}, {
		name: "more than 4096 bytes", msg: padTo(t, MaxMessageBytes+100), reason: ReasonOversized, say: []string{"4196 bytes"},
	}, {
		name: "4095 bytes is accepted", msg: padTo(t, MaxMessageBytes-1),
		want: &Report{Version: SchemaVersion, Shard: "s", InputRevision: "i", ModelRevision: "m", Digest: "d",
			Extra: map[string]any{"pad": strings.Repeat("x", MaxMessageBytes-1-len(`{"version":"batchledger.dev/v1","shard":"s","inputRevision":"i","modelRevision":"m","digest":"d","pad":""}`))}},
	}, {
		name: "unknown version", msg: `{"version":"batchledger.dev/v2","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d"}`,
		reason: ReasonUnknownVersion, say: []string{`"batchledger.dev/v2"`, `"batchledger.dev/v1"`},
	}, {
		name: "no version", msg: `{"shard":"a","inputRevision":"i","modelRevision":"m","digest":"d"}`, reason: ReasonUnknownVersion, say: []string{`no "version"`, SchemaVersion},
	}, {
		name: "unknown version wins over other problems", msg: `{"version":"v0","records":"many"}`, reason: ReasonUnknownVersion,
	}, {
		name: "version not a string", msg: `{"version":1}`, reason: ReasonMalformed, say: []string{`"version" must be a string`},
	}, {
		name: "missing shard", msg: `{"version":"batchledger.dev/v1","inputRevision":"i","modelRevision":"m","digest":"d"}`, reason: ReasonMissingField, say: []string{`"shard"`},
	}, {
		name: "empty shard", msg: `{"version":"batchledger.dev/v1","shard":"","inputRevision":"i","modelRevision":"m","digest":"d"}`, reason: ReasonMissingField, say: []string{`"shard"`},
	}, {
		name: "null shard", msg: `{"version":"batchledger.dev/v1","shard":null,"inputRevision":"i","modelRevision":"m","digest":"d"}`, reason: ReasonMissingField, say: []string{`"shard"`},
	}, {
		name: "missing inputRevision", msg: `{"version":"batchledger.dev/v1","shard":"a","modelRevision":"m","digest":"d"}`, reason: ReasonMissingField, say: []string{`"inputRevision"`},
	}, {
		name: "missing modelRevision", msg: `{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","digest":"d"}`, reason: ReasonMissingField, say: []string{`"modelRevision"`},
	}, {
		name: "missing digest", msg: `{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m"}`, reason: ReasonMissingField, say: []string{`"digest"`},
	}, {
		name: "several missing", msg: `{"version":"batchledger.dev/v1","shard":"a"}`, reason: ReasonMissingField, say: []string{`"inputRevision", "modelRevision", "digest" fields`},
	}, {
		name: "shard not a string", msg: `{"version":"batchledger.dev/v1","shard":7,"inputRevision":"i","modelRevision":"m","digest":"d"}`, reason: ReasonMalformed, say: []string{`"shard" must be a string, found the number 7`},
	}, {
		name: "negative records", msg: `{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d","records":-1}`, reason: ReasonMalformed, say: []string{"negative", "records is -1"},
	}, {
		name: "negative valid", msg: `{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d","records":1,"valid":-1}`, reason: ReasonMalformed, say: []string{"negative", "valid is -1"},
	}, {
		name: "valid > records", msg: `{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d","records":10,"valid":11}`, reason: ReasonMalformed, say: []string{"valid (11) exceeds records (10)"},
	}, {
		name: "fractional count", msg: `{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d","records":1.5}`, reason: ReasonMalformed, say: []string{`"records" must be an integer`, "1.5"},
	}, {
		name: "count as string", msg: `{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d","records":"10"}`, reason: ReasonMalformed, say: []string{`"records" must be an integer count, found a string`},
	}, {
		name: "count overflows int64", msg: `{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d","records":9223372036854775808}`, reason: ReasonMalformed, say: []string{`"records"`},
	}, {
		name: "extra number out of range", msg: `{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d","x":1e999}`, reason: ReasonMalformed, say: []string{`"x"`, "out of range"},
	}}
}

func TestDecode(t *testing.T) {
	for _, tc := range decodeCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.msg)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("Decode =\n%#v\nwant\n%#v", got, tc.want)
				}
				return
			}
			if got != nil {
				t.Errorf("Decode returned a report with an error: %#v", got)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode error = %v (%T), want *Error %s", err, err, tc.reason)
			}
			if e.Reason != tc.reason {
				t.Fatalf("reason = %s (%s), want %s", e.Reason, e.Message, tc.reason)
			}
			for _, s := range tc.say {
				if !strings.Contains(e.Message, s) {
					t.Errorf("message %q does not say %q", e.Message, s)
				}
			}
		})
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	reports := []Report{
		{Shard: "part-1", InputRevision: "in", ModelRevision: "m", Digest: "sha256:00", Records: 10, Valid: 9},
		{Shard: "p", InputRevision: "in", ModelRevision: "m", Output: "s3://b/<k>&v", Digest: "d"},
		{Version: SchemaVersion, Shard: "ünïcode \u2028 \"quoted\"", InputRevision: "i", ModelRevision: "m", Digest: "d",
			Extra: map[string]any{"f": 3.0, "g": 0.1, "h": math.Copysign(0, -1), "n": int64(-4), "s": "x", "b": false, "z": nil,
				"l": []any{1.0, int64(2), "3", []any{}}, "m": map[string]any{"k": 1e21, "e": map[string]any{}}}},
	}
	for _, r := range reports {
		msg, err := Encode(r)
		if err != nil {
			t.Fatalf("Encode(%+v): %v", r, err)
		}
		got, err := Decode(msg)
		if err != nil {
			t.Fatalf("Decode(Encode(%+v)) = %v; message %s", r, err, msg)
		}
		want := r
		want.Version = SchemaVersion
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("round trip of %s:\n got %#v\nwant %#v", msg, *got, want)
		}
		again, err := Encode(*got)
		if err != nil || again != msg {
			t.Errorf("re-encoding is not stable:\n%s\n%s (%v)", msg, again, err)
		}
	}
}

func TestEncodeFormat(t *testing.T) {
	msg, err := Encode(Report{Shard: "a", InputRevision: "i", ModelRevision: "m", Digest: "d", Records: 2, Valid: 1,
		Extra: map[string]any{"z": 1, "a": 2.0, "html": "<&>"}})
	if err != nil {
		t.Fatal(err)
	}
	// Schema fields first in schema order, then extras by name; floats stay floats; no
	// HTML escaping (it would only grow the message).
	want := `{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d","records":2,"valid":1,"a":2.0,"html":"<&>","z":1}`
	if msg != want {
		t.Errorf("Encode =\n%s\nwant\n%s", msg, want)
	}
}

func TestEncodeErrors(t *testing.T) {
	ok := Report{Shard: "a", InputRevision: "i", ModelRevision: "m", Digest: "d"}
	with := func(f func(*Report)) Report { r := ok; f(&r); return r }
	tests := []struct {
		name string
		r    Report
		say  string
	}{
		{"too large", with(func(r *Report) { r.Output = strings.Repeat("x", MaxMessageBytes) }), "truncates"},
		{"large once escaped", with(func(r *Report) { r.Output = strings.Repeat("\n", MaxMessageBytes/2) }), "truncates"},
		{"other version", with(func(r *Report) { r.Version = "batchledger.dev/v2" }), `"batchledger.dev/v2"`},
		{"missing digest", with(func(r *Report) { r.Digest = "" }), `"digest"`},
		{"valid > records", with(func(r *Report) { r.Records, r.Valid = 1, 2 }), "exceeds"},
		{"extra shadows schema field", with(func(r *Report) { r.Extra = map[string]any{"shard": "b"} }), `"shard" collides`},
		{"NaN", with(func(r *Report) { r.Extra = map[string]any{"x": []any{nanValue()}} }), "NaN"},
		{"unencodable", with(func(r *Report) { r.Extra = map[string]any{"c": make(chan int)} }), `"c"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := Encode(tc.r)
			if err == nil {
				t.Fatalf("Encode succeeded: %.80s", msg)
			}
			if !strings.Contains(err.Error(), tc.say) {
				t.Errorf("error %q does not say %q", err, tc.say)
			}
		})
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

// TestDecodeCanonicalSizeGuard covers the rare message that fits the limit but whose
// canonical encoding does not (U+2028 is escaped to six bytes): accepting it would give
// a report Encode cannot write.
func TestDecodeCanonicalSizeGuard(t *testing.T) {
	base := `{"version":"batchledger.dev/v1","shard":"s","inputRevision":"i","modelRevision":"m","digest":"d","pad":"`
	n := (MaxMessageBytes - 1 - len(base) - 2) / 3
	msg := base + strings.Repeat("\u2028", n) + `"}`
	if len(msg) >= MaxMessageBytes {
		t.Fatalf("test message is %d bytes", len(msg))
	}
	_, err := Decode(msg)
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonOversized || !strings.Contains(e.Message, "canonical") {
		t.Fatalf("Decode = %v, want Oversized (canonical encoding)", err)
	}
}
