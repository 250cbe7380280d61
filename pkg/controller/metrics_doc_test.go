package controller

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// describedLabels records the variable labels of each metric registered on it.
type describedLabels map[string][]string

// descString reads a Desc's String form: Desc{fqName: "NAME", help: "...",
// constLabels: {...}, variableLabels: {a,b}}.
var descString = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}\}$`)

func (l describedLabels) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := descString.FindStringSubmatch(d.String()); m != nil {
			var labels []string
			if m[2] != "" {
				labels = strings.Split(m[2], ",")
			}
			l[m[1]] = labels
		}
	}
	return nil
}

func (l describedLabels) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = l.Register(c)
	}
}

func (l describedLabels) Unregister(prometheus.Collector) bool { return false }

// documentedMetrics are the rows of docs/operations.md's metric tables: each metric's
// label names (the backticked words of its labels column outside parentheses, which
// give label values).
func documentedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `(batchledger_[a-z_]+)` \\|([^|]*)\\|")
	word := regexp.MustCompile("`([a-z_]+)`")
	remark := regexp.MustCompile(`\([^)]*\)`)
	out := map[string][]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := []string{}
		for _, w := range word.FindAllStringSubmatch(remark.ReplaceAllString(m[2], ""), -1) {
			labels = append(labels, w[1])
		}
		out[m[1]] = labels
	}
	if len(out) == 0 {
		t.Fatal("docs/operations.md has no metric table rows")
	}
	return out
}

// TestOperationsDocumentsEveryMetric: docs/operations.md has a row for every metric the
// manager registers (as exportedMetrics registers them), with its labels, and names no
// metric of this package's that is not registered. The webhook's counters are
// registered by pkg/webhook and not seen here.
func TestOperationsDocumentsEveryMetric(t *testing.T) {
	registered := describedLabels{}
	newMetricsWith(registered, true)
	newJobRecordMetrics(registered)
	registered.MustRegister(chunksIgnored)
	if err := (&ServedAPIs{}).Report(logr.Discard(), registered); err != nil {
		t.Fatal(err)
	}
	if len(registered) == 0 {
		t.Fatal("no metric was collected")
	}
	documented := documentedMetrics(t)
	for name, labels := range registered {
		t.Run(name, func(t *testing.T) {
			doc, ok := documented[name]
			if !ok {
				t.Fatalf("docs/operations.md has no row for %s", name)
			}
			want := slices.Sorted(slices.Values(labels))
			if got := slices.Sorted(slices.Values(doc)); !slices.Equal(got, want) {
				t.Errorf("docs/operations.md gives %s the labels %v; it has %v", name, got, want)
			}
		})
	}
	for name := range documented {
		if _, ok := registered[name]; !ok && !strings.HasPrefix(name, "batchledger_webhook_") {
			t.Errorf("docs/operations.md documents %s; the manager registers no such metric", name)
		}
	}
}
