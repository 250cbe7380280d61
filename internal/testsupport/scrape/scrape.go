// Package scrape reads a Prometheus text endpoint, the batchledger controller's /metrics
// above all: the e2e framework, the load benchmark and the soak read the controller's
// counters (writes, reconciles, pod releases) and controller-runtime's gauges (who holds
// the leader Lease) through it, parsed by Prometheus' own text parser (expfmt) rather
// than by a split on the first space of each line.
package scrape

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"batchledger.dev/batchledger/pkg/controller"
)

// The batchledger controller's counters, under the names pkg/controller registers.
const (
	ReconcilesTotal     = controller.MetricReconciles
	StatusWritesTotal   = controller.MetricStatusWrites
	WorkloadWritesTotal = controller.MetricWorkloadWrites
	ResultWritesTotal   = controller.MetricResultWrites
	PodReleasesTotal    = controller.MetricPodReleases
	// NamespaceReleasesTotal counts held pods released unrecorded in a namespace being
	// deleted.
	NamespaceReleasesTotal = controller.MetricNamespaceReleases
	// QueueWaitSeconds is controller-runtime's histogram of how long a workqueue item
	// waited, ready, before a worker took it (label "name": the controller).
	QueueWaitSeconds = "workqueue_queue_duration_seconds"
	// ReconcileSeconds is controller-runtime's histogram of reconcile durations (label
	// "controller").
	ReconcileSeconds = "controller_runtime_reconcile_time_seconds"
	// LeaderGauge is controller-runtime's leader_election_master_status: 1 while the
	// process holds the leader Lease.
	LeaderGauge = "leader_election_master_status"
)

// Controller is what the e2e suites, the benchmark and the soak read of a batchledger
// process: its own counters and whether it holds the leader Lease.
type Controller struct {
	Reconciles, StatusWrites, WorkloadWrites, ResultWrites, PodReleases float64
	// Leader is whether the process holds the leader Lease.
	Leader bool
}

// Controller reads a batchledger process's counters from its scrape.
func (f Families) Controller() Controller {
	return Controller{
		Reconciles:     f.Value(ReconcilesTotal),
		StatusWrites:   f.Value(StatusWritesTotal),
		WorkloadWrites: f.Value(WorkloadWritesTotal),
		ResultWrites:   f.Value(ResultWritesTotal),
		PodReleases:    f.Value(PodReleasesTotal),
		Leader:         f.Value(LeaderGauge) == 1,
	}
}

// Families are the metric families of one scrape, by metric name.
type Families map[string]*dto.MetricFamily

// Get scrapes url (http://host:port/metrics); ctx bounds the request.
func Get(ctx context.Context, url string) (Families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return Parse(resp.Body)
}

// Parse reads the Prometheus text exposition format.
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	f, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	return Families(f), nil
}

// Value is the value of the named counter, gauge or untyped metric, summed over its
// series; 0 when the metric is absent (a counter no event has touched yet).
func (f Families) Value(name string) float64 { return f.Sum(name, nil) }

// Sum is the sum of the named metric's series whose labels include every name and value
// of match (nil: every series).
func (f Families) Sum(name string, match map[string]string) float64 {
	fam, ok := f[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, m := range fam.GetMetric() {
		if hasLabels(m, match) {
			sum += value(m)
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, match map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := match[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(match)
}

// value is a sample's value whatever its type: counter, gauge or untyped.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// Histogram is a histogram summed over the series a scrape holds of it.
type Histogram struct {
	// Count and Sum are the observations and their sum.
	Count, Sum float64
	// Cumulative maps each bucket's upper bound to the observations at or below it.
	Cumulative map[float64]float64
}

// Histogram sums the buckets, count and sum of the named histogram's series whose labels
// include every name and value of match (nil: every series); zero when it is absent.
func (f Families) Histogram(name string, match map[string]string) Histogram {
	h := Histogram{Cumulative: map[float64]float64{}}
	fam, ok := f[name]
	if !ok {
		return h
	}
	for _, m := range fam.GetMetric() {
		hist := m.GetHistogram()
		if hist == nil || !hasLabels(m, match) {
			continue
		}
		h.Count += float64(hist.GetSampleCount())
		h.Sum += hist.GetSampleSum()
		for _, b := range hist.GetBucket() {
			h.Cumulative[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		}
	}
	return h
}

// Above is how many observations exceeded bound, which must be one of the bucket bounds
// (to within one part in a million: exponential bounds are computed in floating point);
// it is the count when no bucket has that bound.
func (h Histogram) Above(bound float64) float64 {
	for ub, n := range h.Cumulative {
		if math.Abs(ub-bound) <= 1e-6*bound {
			return h.Count - n
		}
	}
	return h.Count
}
