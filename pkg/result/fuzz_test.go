package result

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// knownReasons are the reasons Decode may give.
var knownReasons = map[string]bool{
	ReasonMissing: true, ReasonMalformed: true, ReasonOversized: true, ReasonUnknownVersion: true, ReasonMissingField: true,
}

// FuzzDecode checks that Decode never panics and either rejects a message with a known
// reason and a message, or returns a report that Encode writes again and Decode reads
// back equal: what the controller accepts, a worker could have written.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		good,
		`{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d","records":3,"valid":3,"retries":2,"d":812.5,"ok":true,"tags":["x",1,null],"meta":{"k":{"n":1e30}}}`,
		`{"version":"batchledger.dev/v1","shard":"\u2028<&>\"","inputRevision":"i","modelRevision":"m","digest":"d","f":1e5,"g":-0.0,"h":3.0}`,
		"", " ", "{}", "[]", "null", `"x"`, "{", `{"version":"batchledger.dev/v2"}`, `{"version":1}`,
		`{"version":"batchledger.dev/v1","shard":"a","shard":"b"}`,
		`{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d","records":-1}`,
		`{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d","records":1,"valid":2}`,
		`{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m","digest":"d","x":1e999}`,
		"{\"version\":\"batchledger.dev/v1\",\"shard\":\"\xff\"}",
		`{"version":"batchledger.dev/v1","shard":"s","inputRevision":"i","modelRevision":"m","digest":"d","pad":"` + strings.Repeat("\u2028", 1300) + `"}`,
		`{"version":"batchledger.dev/v1","shard":"s","inputRevision":"i","modelRevision":"m","digest":"d","pad":"` + strings.Repeat("x", 4000) + `"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		r, err := Decode(msg)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !knownReasons[e.Reason] || e.Message == "" {
				t.Fatalf("Decode(%q) = %v (%T): not a *Error with a known reason and a message", msg, err, err)
			}
			if r != nil {
				t.Fatalf("Decode(%q) returned a report with its error", msg)
			}
			return
		}
		enc, err := Encode(*r)
		if err != nil {
			t.Fatalf("Decode(%q) accepted %#v, but Encode fails: %v", msg, r, err)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(%q))) = %v; encoded %q", msg, err, enc)
		}
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("round trip of %q changed the report:\n%#v\n%#v", msg, r, again)
		}
	})
}
