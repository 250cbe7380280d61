package controller

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// ReasonUnsampled labels the rejected results the account's bounded sample of
// rejections (status.results.rejections) no longer holds, so that the rejection series of
// an account always add up to its rejected and conflicting results.
const ReasonUnsampled = "Unsampled"

// Metrics counts what the reconciler does, so that "one status write per observed
// change" can be measured, not assumed, and exports each account's verdict numbers so
// that missing shards and rejected results can be alerted on. A nil *Metrics counts
// nothing.
type Metrics struct {
	Reconciles     prometheus.Counter
	StatusWrites   prometheus.Counter
	WorkloadWrites prometheus.Counter
	ResultWrites   prometheus.Counter
	PodReleases    prometheus.Counter
	// HoldsExpired counts pods released unrecorded after MaxHold (PodReleaser).
	HoldsExpired prometheus.Counter
	// NamespaceReleases counts pods released unrecorded because their namespace was being
	// deleted (PodReleaser): the API server refuses new result chunks, and events, there.
	NamespaceReleases prometheus.Counter
	// ScopeStamps counts pod templates of suspended Jobs and JobSets the controller
	// stamped with the opt-in scope label because their account came after them.
	ScopeStamps prometheus.Counter

	// Per account (labels namespace, account): one series each, deleted with the
	// account, so the series count follows the number of accounts.
	Shards, ShardsCovered, ShardsAccepted, ShardsMissing *prometheus.GaugeVec
	// ResultRejections (labels namespace, account, reason): the account's rejected and
	// conflicting results by reason. Reasons are the fixed CamelCase set of the API's
	// rejection reasons (v1alpha1.Rejection*) plus ReasonUnsampled, so an account has a
	// bounded number of series.
	ResultRejections *prometheus.GaugeVec

	mu sync.Mutex
	// reasons remembers the reasons exported per account, to delete a reason's series
	// once the account no longer has such rejections.
	reasons map[types.NamespacedName]map[string]bool
}

// The names of the counters that the e2e suites, the benchmark and the soak read
// (internal/testsupport/scrape), named once here.
const (
	MetricReconciles     = "batchledger_account_reconciles_total"
	MetricStatusWrites   = "batchledger_account_status_writes_total"
	MetricWorkloadWrites = "batchledger_workload_condition_writes_total"
	MetricResultWrites   = "batchledger_result_chunk_writes_total"
	MetricPodReleases    = "batchledger_pod_releases_total"
	// MetricNamespaceReleases counts pods released unrecorded in a namespace being deleted.
	MetricNamespaceReleases = "batchledger_pod_namespace_deleted_releases_total"
)

// NewMetrics creates the counters and gauges and registers them with controller-runtime's
// registry, served on the manager's metrics endpoint.
func NewMetrics() *Metrics { return newMetrics(metrics.Registry) }

func newMetrics(reg prometheus.Registerer) *Metrics {
	account := []string{"namespace", "account"}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	m := &Metrics{
		Reconciles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricReconciles, Help: "BatchAccount reconciles.",
		}),
		StatusWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricStatusWrites, Help: "BatchAccount status writes.",
		}),
		WorkloadWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricWorkloadWrites, Help: "Server-side applies of batchledger conditions on Kueue Workloads.",
		}),
		ResultWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricResultWrites, Help: "Writes of ShardResults chunks recording captured results.",
		}),
		PodReleases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricPodReleases, Help: "Result-capture finalizers removed from pods.",
		}),
		HoldsExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "batchledger_pod_hold_expired_total", Help: "Pods released unrecorded after the maximum result hold: succeeded, or deleted and never finished.",
		}),
		NamespaceReleases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricNamespaceReleases, Help: "Held pods released unrecorded because their namespace was being deleted.",
		}),
		ScopeStamps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "batchledger_scope_stamps_total", Help: "Pod templates of suspended Jobs and JobSets stamped with the opt-in scope label by the controller.",
		}),
		Shards:         gauge("batchledger_account_shards", "Shards the BatchAccount declares.", account...),
		ShardsCovered:  gauge("batchledger_account_shards_covered", "Declared shards whose assigned (Job, completion index) completed.", account...),
		ShardsAccepted: gauge("batchledger_account_shards_accepted", "Declared shards with an accepted result.", account...),
		ShardsMissing:  gauge("batchledger_account_shards_missing", "Declared shards not covered.", account...),
		ResultRejections: gauge("batchledger_account_result_rejections",
			"The BatchAccount's rejected or conflicting shard results, by reason (Unsampled: beyond the recorded sample).",
			append(account, "reason")...),
		reasons: map[types.NamespacedName]map[string]bool{},
	}
	reg.MustRegister(m.Reconciles, m.StatusWrites, m.WorkloadWrites, m.ResultWrites, m.PodReleases,
		m.HoldsExpired, m.NamespaceReleases, m.ScopeStamps, m.Shards, m.ShardsCovered, m.ShardsAccepted, m.ShardsMissing, m.ResultRejections)
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

func (m *Metrics) holdExpired() {
	if m != nil {
		m.HoldsExpired.Inc()
	}
}

func (m *Metrics) namespaceReleased() {
	if m != nil {
		m.NamespaceReleases.Inc()
	}
}

func (m *Metrics) scopeStamped() {
	if m != nil {
		m.ScopeStamps.Inc()
	}
}

// accountObserved exports an account's numbers from its (written) status.
func (m *Metrics) accountObserved(ba *v1alpha1.BatchAccount) {
	if m == nil {
		return
	}
	s := ba.Status
	l := prometheus.Labels{"namespace": ba.Namespace, "account": ba.Name}
	m.Shards.With(l).Set(float64(s.Shards.Total))
	m.ShardsCovered.With(l).Set(float64(s.Shards.Covered))
	m.ShardsAccepted.With(l).Set(float64(s.Shards.Accepted))
	m.ShardsMissing.With(l).Set(float64(s.Shards.Total - s.Shards.Covered))

	counts := rejectionsByReason(s.Results)
	key := types.NamespacedName{Namespace: ba.Namespace, Name: ba.Name}
	m.mu.Lock()
	defer m.mu.Unlock()
	for reason := range m.reasons[key] {
		if _, still := counts[reason]; !still {
			m.ResultRejections.DeleteLabelValues(ba.Namespace, ba.Name, reason)
		}
	}
	seen := make(map[string]bool, len(counts))
	for reason, n := range counts {
		m.ResultRejections.WithLabelValues(ba.Namespace, ba.Name, reason).Set(float64(n))
		seen[reason] = true
	}
	if len(seen) == 0 {
		delete(m.reasons, key)
	} else {
		m.reasons[key] = seen
	}
}

// accountDeleted drops every series of a deleted account.
func (m *Metrics) accountDeleted(key types.NamespacedName) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"namespace": key.Namespace, "account": key.Name}
	for _, g := range []*prometheus.GaugeVec{m.Shards, m.ShardsCovered, m.ShardsAccepted, m.ShardsMissing, m.ResultRejections} {
		g.DeletePartialMatch(l)
	}
	m.mu.Lock()
	delete(m.reasons, key)
	m.mu.Unlock()
}

// rejectionsByReason counts an account's rejected and conflicting results by reason. The
// status keeps only a bounded sample of rejections; the part of the total it no longer
// holds is counted under ReasonUnsampled, so the counts add up to Rejected + Conflicts.
func rejectionsByReason(r v1alpha1.ResultSummary) map[string]int {
	counts := map[string]int{}
	for _, rj := range r.Rejections {
		counts[rj.Reason]++
	}
	if rest := int(r.Rejected+r.Conflicts) - len(r.Rejections); rest > 0 {
		counts[ReasonUnsampled] += rest
	}
	return counts
}
