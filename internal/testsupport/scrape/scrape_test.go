package scrape

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// exposition is a slice of what the controller serves: batchledger's counters,
// controller-runtime's leader gauge and labelled webhook counters, a histogram, and a
// metric without TYPE (untyped).
const exposition = `# HELP batchledger_account_status_writes_total BatchAccount status writes.
# TYPE batchledger_account_status_writes_total counter
batchledger_account_status_writes_total 42
# HELP leader_election_master_status Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.
# TYPE leader_election_master_status gauge
leader_election_master_status{name="batchledger.dev"} 1
# TYPE controller_runtime_webhook_requests_total counter
controller_runtime_webhook_requests_total{code="200",webhook="/mutate--v1-pod"} 7
controller_runtime_webhook_requests_total{code="500",webhook="/mutate--v1-pod"} 2
controller_runtime_webhook_requests_total{code="200",webhook="/validate-batchaccount"} 5
# TYPE workqueue_work_duration_seconds histogram
workqueue_work_duration_seconds_bucket{name="batchaccount",le="0.1"} 3
workqueue_work_duration_seconds_bucket{name="batchaccount",le="+Inf"} 4
workqueue_work_duration_seconds_sum{name="batchaccount"} 0.5
workqueue_work_duration_seconds_count{name="batchaccount"} 4
process_open_fds 12
`

func TestValueAndSum(t *testing.T) {
	f, err := Parse(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		metric string
		match  map[string]string
		want   float64
	}{
		{name: "counter", metric: "batchledger_account_status_writes_total", want: 42},
		{name: "gauge with a label", metric: "leader_election_master_status", want: 1},
		{name: "untyped", metric: "process_open_fds", want: 12},
		{name: "absent metric is 0", metric: "batchledger_pod_releases_total", want: 0},
		{name: "every series summed", metric: "controller_runtime_webhook_requests_total", want: 14},
		{name: "one label", metric: "controller_runtime_webhook_requests_total", match: map[string]string{"code": "200"}, want: 12},
		{name: "two labels", metric: "controller_runtime_webhook_requests_total",
			match: map[string]string{"code": "200", "webhook": "/mutate--v1-pod"}, want: 7},
		{name: "a label no series has", metric: "controller_runtime_webhook_requests_total", match: map[string]string{"code": "404"}, want: 0},
		{name: "a label name no series has", metric: "batchledger_account_status_writes_total", match: map[string]string{"code": "200"}, want: 0},
		{name: "histogram is not a value", metric: "workqueue_work_duration_seconds", want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.Sum(tc.metric, tc.match); got != tc.want {
				t.Errorf("Sum(%s, %v) = %v, want %v", tc.metric, tc.match, got, tc.want)
			}
			if tc.match == nil {
				if got := f.Value(tc.metric); got != tc.want {
					t.Errorf("Value(%s) = %v, want %v", tc.metric, got, tc.want)
				}
			}
		})
	}
}

func TestController(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       Controller
	}{
		{"counters and the leader", exposition + `# TYPE batchledger_account_reconciles_total counter
batchledger_account_reconciles_total 9
# TYPE batchledger_workload_condition_writes_total counter
batchledger_workload_condition_writes_total 3
# TYPE batchledger_result_chunk_writes_total counter
batchledger_result_chunk_writes_total 2
# TYPE batchledger_pod_releases_total counter
batchledger_pod_releases_total 5
`, Controller{Reconciles: 9, StatusWrites: 42, WorkloadWrites: 3, ResultWrites: 2, PodReleases: 5, Leader: true}},
		{"a standby replica", "# TYPE leader_election_master_status gauge\nleader_election_master_status{name=\"batchledger.dev\"} 0\n",
			Controller{}},
		{"no leader election", "", Controller{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Controller(); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestHistogram: a histogram's series that match are summed, bucket by bucket; Above
// finds a bound computed in floating point (1e-8 * 10^8 is not exactly 1).
func TestHistogram(t *testing.T) {
	text := exposition + `workqueue_work_duration_seconds_bucket{name="other",le="0.1"} 100
workqueue_work_duration_seconds_bucket{name="other",le="+Inf"} 100
workqueue_work_duration_seconds_sum{name="other"} 1
workqueue_work_duration_seconds_count{name="other"} 100
`
	f, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	one := f.Histogram("workqueue_work_duration_seconds", map[string]string{"name": "batchaccount"})
	if one.Count != 4 || one.Sum != 0.5 {
		t.Errorf("batchaccount's series: count %v, sum %v; want 4, 0.5", one.Count, one.Sum)
	}
	if got := one.Above(0.1 + 1e-17); got != 1 {
		t.Errorf("Above(0.1) = %v, want 1 (4 observations, 3 at or below 0.1)", got)
	}
	if got := one.Above(0.2); got != 4 {
		t.Errorf("Above a bound no bucket has = %v, want the count, 4", got)
	}
	if all := f.Histogram("workqueue_work_duration_seconds", nil); all.Count != 104 || all.Above(0.1) != 1 {
		t.Errorf("every series: count %v, above 0.1 %v; want 104, 1", all.Count, all.Above(0.1))
	}
	if none := f.Histogram("absent_seconds", nil); none.Count != 0 || none.Sum != 0 || none.Above(1) != 0 {
		t.Errorf("absent histogram: %+v", none)
	}
}

func TestParseRejectsMalformedText(t *testing.T) {
	if _, err := Parse(strings.NewReader("batchledger_account_status_writes_total forty-two\n")); err == nil {
		t.Fatal("a non-numeric value parsed")
	}
}

func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(exposition))
	}))
	defer srv.Close()
	f, err := Get(t.Context(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Value("batchledger_account_status_writes_total"); got != 42 {
		t.Errorf("status writes = %v, want 42", got)
	}
	if _, err := Get(t.Context(), srv.URL+"/nothing"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a 404 scraped without the status in its error: %v", err)
	}
}
