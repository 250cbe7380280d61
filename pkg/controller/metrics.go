package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics counts what the reconciler does, so that "one status write per observed
// change" can be measured, not assumed. A nil *Metrics counts nothing.
type Metrics struct {
	Reconciles     prometheus.Counter
	StatusWrites   prometheus.Counter
	WorkloadWrites prometheus.Counter
	ResultWrites   prometheus.Counter
	PodReleases    prometheus.Counter
}

// NewMetrics creates the counters and registers them with controller-runtime's registry,
// served on the manager's metrics endpoint.
func NewMetrics() *Metrics {
	m := &Metrics{
		Reconciles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "batchledger_account_reconciles_total", Help: "BatchAccount reconciles.",
		}),
		StatusWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "batchledger_account_status_writes_total", Help: "BatchAccount status writes.",
		}),
		WorkloadWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "batchledger_workload_condition_writes_total", Help: "Server-side applies of batchledger conditions on Kueue Workloads.",
		}),
		ResultWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "batchledger_result_chunk_writes_total", Help: "Writes of ShardResults chunks recording captured results.",
		}),
		PodReleases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "batchledger_pod_releases_total", Help: "Result-capture finalizers removed from pods.",
		}),
	}
	metrics.Registry.MustRegister(m.Reconciles, m.StatusWrites, m.WorkloadWrites, m.ResultWrites, m.PodReleases)
	return m
}

func (m *Metrics) reconciled() {
	if m != nil {
		m.Reconciles.Inc()
	}
}

func (m *Metrics) statusWritten() {
	if m != nil {
		m.StatusWrites.Inc()
	}
}

func (m *Metrics) workloadWritten() {
	if m != nil {
		m.WorkloadWrites.Inc()
	}
}

func (m *Metrics) resultsWritten() {
	if m != nil {
		m.ResultWrites.Inc()
	}
}

func (m *Metrics) podReleased() {
	if m != nil {
		m.PodReleases.Inc()
	}
}
