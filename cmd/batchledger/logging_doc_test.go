package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestReferenceStatesTheLogTimeEncoding: docs/reference.md gives the default of
// --zap-time-encoding; the manager's log must write its timestamps so when the flag is
// not given. controller-runtime's own help text says epoch, but its default is RFC 3339.
func TestReferenceStatesTheLogTimeEncoding(t *testing.T) {
	doc, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^\\| `--zap-log-level`.*`--zap-time-encoding` \\| [^|]*, (\\w+) \\|").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/reference.md has no row of the zap flags ending with the time encoding's default")
	}
	documented := string(m[1])

	var buf bytes.Buffer
	opts := zap.Options{DestWriter: &buf}
	fs := flag.NewFlagSet("batchledger", flag.ContinueOnError)
	opts.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	newLogger(&opts).Info("hello")
	var entry map[string]any
	if err := json.Unmarshal(buf.Bytes(), &entry); err != nil {
		t.Fatalf("%s: %v", buf.String(), err)
	}
	actual := "epoch"
	if s, ok := entry["ts"].(string); ok {
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			t.Fatalf("ts %q is neither epoch nor RFC 3339", s)
		}
		actual = "rfc3339"
	}
	if documented != actual {
		t.Errorf("docs/reference.md says the time encoding defaults to %s; the log writes %v (%s)", documented, entry["ts"], actual)
	}
}
