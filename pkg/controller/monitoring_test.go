package controller

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"
)

// monitoringDir holds the shipped dashboard and alert rules (the chart copies them).
var monitoringDir = filepath.Join("..", "..", "config", "monitoring")

// controllerRuntimeMetrics are the metrics of controller-runtime and client-go the
// shipped queries may use: the manager serves them beside its own (registered by those
// libraries' init functions, so not collected below).
var controllerRuntimeMetrics = []string{
	"controller_runtime_reconcile_total",
	"controller_runtime_reconcile_errors_total",
	"controller_runtime_reconcile_time_seconds",
	"controller_runtime_active_workers",
	"workqueue_depth",
	"workqueue_adds_total",
	"workqueue_queue_duration_seconds",
	"workqueue_retries_total",
	"leader_election_master_status",
	"rest_client_requests_total",
}

// describedNames records the names of the metrics registered on it.
type describedNames map[string]bool

func (n describedNames) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		// A Desc tells its name only in its String form: Desc{fqName: "NAME", ...}.
		s := d.String()
		const key = `fqName: "`
		if i := strings.Index(s, key); i >= 0 {
			rest := s[i+len(key):]
			n[rest[:strings.IndexByte(rest, '"')]] = true
		}
	}
	return nil
}

func (n describedNames) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = n.Register(c)
	}
}

func (n describedNames) Unregister(prometheus.Collector) bool { return false }

// exportedMetrics are the names of every metric the manager serves: its own, registered
// as the manager registers them, and controller-runtime's.
func exportedMetrics(t *testing.T) describedNames {
	t.Helper()
	names := describedNames{}
	newMetricsWith(names, true)
	newJobRecordMetrics(names)
	names.MustRegister(chunksIgnored)
	if err := (&ServedAPIs{}).Report(logr.Discard(), names); err != nil {
		t.Fatal(err)
	}
	for _, n := range controllerRuntimeMetrics {
		names[n] = true
	}
	if !names[MetricVerdicts] || !names["batchledger_pod_hold_seconds"] {
		t.Fatalf("the manager's metrics were not collected: %v", names)
	}
	return names
}

// TestMonitoringQueriesNameExportedMetrics: every metric named in a PromQL expression of
// the shipped Grafana dashboard and PrometheusRule is one the manager exports, so that
// renaming a metric breaks this test instead of a dashboard panel or an alert silently.
func TestMonitoringQueriesNameExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	queries := map[string][]string{}

	raw, err := os.ReadFile(filepath.Join(monitoringDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard any
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	queries["grafana-dashboard.json"] = dashboardQueries(dashboard)

	raw, err = os.ReadFile(filepath.Join(monitoringDir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert, Record, Expr string
				}
			}
		}
	}
	if err := yaml.Unmarshal(raw, &rule); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Expr == "" {
				t.Errorf("rule %s%s has no expr", r.Alert, r.Record)
			}
			queries["prometheusrule.yaml"] = append(queries["prometheusrule.yaml"], r.Expr)
		}
	}

	for file, qs := range queries {
		if len(qs) < 5 {
			t.Errorf("%s: only %d queries found", file, len(qs))
		}
		for _, q := range qs {
			names, err := metricNames(q)
			if err != nil {
				t.Errorf("%s: %q: %v", file, q, err)
				continue
			}
			if len(names) == 0 {
				t.Errorf("%s: %q names no metric", file, q)
			}
			for _, n := range names {
				if !exported[n] && !exported[histogramBase(n, exported)] {
					t.Errorf("%s: %q names %s, which the manager does not export", file, q, n)
				}
			}
		}
	}
}

// dashboardQueries are the PromQL expressions of a Grafana dashboard: every panel
// target's expr, and the metric of each label_values(...) variable query.
func dashboardQueries(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			s, isString := x.(string)
			switch {
			case k == "expr" && isString:
				out = append(out, s)
			case k == "query" && isString && strings.HasPrefix(s, "label_values("):
				// label_values(METRIC, LABEL): the metric is a query, the label is not.
				args := strings.TrimSuffix(strings.TrimPrefix(s, "label_values("), ")")
				if i := strings.LastIndexByte(args, ','); i >= 0 {
					args = args[:i]
				}
				out = append(out, args)
			default:
				out = append(out, dashboardQueries(x)...)
			}
		}
	case []any:
		for _, x := range v {
			out = append(out, dashboardQueries(x)...)
		}
	}
	return out
}

// histogramBase is the histogram a _bucket, _sum or _count series belongs to, when the
// manager exports it; "" otherwise.
func histogramBase(name string, exported describedNames) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && exported[base] {
			return base
		}
	}
	return ""
}

// promqlWords are the identifiers of PromQL that are not metric names: aggregation
// operators, keywords, binary set operators and the special float literals.
var promqlWords = map[string]bool{
	"sum": true, "avg": true, "min": true, "max": true, "count": true, "group": true, "stddev": true,
	"stdvar": true, "topk": true, "bottomk": true, "quantile": true, "count_values": true, "limitk": true,
	"limit_ratio": true, "by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
	"group_right": true, "bool": true, "and": true, "or": true, "unless": true, "offset": true,
	"atan2": true, "inf": true, "nan": true,
}

// labelListWords are followed by a parenthesised list of label names.
var labelListWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// metricNames are the metric names a PromQL expression selects, found by a small
// tokenizer (the Prometheus parser would pull the whole Prometheus module into the
// build): an identifier is a metric name unless it is a keyword or operator word, calls
// a function (is followed by "("), is a label name (inside {...} or a by/on/... list),
// or sits in a string, a range or subquery [...], or a Grafana variable ($name).
func metricNames(q string) ([]string, error) {
	var out []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
	isPart := func(c byte) bool { return isStart(c) || (c >= '0' && c <= '9') }
	nextNonSpace := func(i int) int {
		for i < len(q) && strings.IndexByte(" \t\r\n", q[i]) >= 0 {
			i++
		}
		return i
	}
	// skipTo returns the index just past the first closing c from i, skipping strings.
	skipTo := func(i int, c byte) (int, error) {
		for i < len(q) {
			switch q[i] {
			case '"', '\'', '`':
				end := strings.IndexByte(q[i+1:], q[i])
				if end < 0 {
					return 0, fmt.Errorf("unterminated string at %d", i)
				}
				i += end + 2
				continue
			case c:
				return i + 1, nil
			}
			i++
		}
		return 0, fmt.Errorf("no closing %c", c)
	}
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end := strings.IndexByte(q[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			i += end + 2
		case c == '{':
			j, err := skipTo(i+1, '}')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '[':
			j, err := skipTo(i+1, ']')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '$':
			// A Grafana variable ($namespace, $__rate_interval, ${x}).
			i++
			for i < len(q) && (isPart(q[i]) || q[i] == '{' || q[i] == '}') {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			// A number (1e3, 0x1f, 43200, 0.95) or a duration: no metric name starts so.
			for i < len(q) && (isPart(q[i]) || q[i] == '.') {
				i++
			}
		case isStart(c):
			j := i
			for j < len(q) && isPart(q[j]) {
				j++
			}
			word := q[i:j]
			next := nextNonSpace(j)
			switch {
			case labelListWords[strings.ToLower(word)] && next < len(q) && q[next] == '(':
				k, err := skipTo(next+1, ')')
				if err != nil {
					return nil, err
				}
				j = k
			case promqlWords[strings.ToLower(word)]:
			case next < len(q) && q[next] == '(':
				// A function call.
			default:
				if !slices.Contains(out, word) {
					out = append(out, word)
				}
			}
			i = j
		default:
			i++
		}
	}
	return out, nil
}

// TestMetricNames: the tokenizer finds the metrics, and only them.
func TestMetricNames(t *testing.T) {
	cases := map[string][]string{
		`sum by (namespace, local_queue) (batchledger_verdicts{verdict="Blocked"}) > 0`:      {"batchledger_verdicts"},
		`histogram_quantile(0.95, sum by (le) (rate(x_bucket{a=~"$ns"}[$__rate_interval])))`: {"x_bucket"},
		`a > 0 and on (namespace, account) b == 1`:                                           {"a", "b"},
		`(sum(leader{name="x,y}"}) or vector(0)) < 1`:                                        {"leader"},
		`topk(10, m offset 5m) / ignoring(x) group_left(y) n`:                                {"m", "n"},
		`rate(c[5m:1m]) * 1e3 + Inf`:                                                         {"c"},
	}
	for q, want := range cases {
		got, err := metricNames(q)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %v, %v; want %v", q, got, err, want)
		}
	}
	if _, err := metricNames(`m{a="b}`); err == nil {
		t.Error("an unterminated string was accepted")
	}
}
