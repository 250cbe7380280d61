package controller

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/version"
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
	// Collected counts accounts deleted by retention (ttlSecondsAfterFinished).
	Collected prometheus.Counter
	// LiveReads (label kind) counts the reads of a target's Job or Workload from the API
	// server, made when the cache does not hold it (MetricLiveReads).
	LiveReads *prometheus.CounterVec
	// ScopeLabels (label kind) counts the Jobs and Workloads the controller labelled so
	// that the cache holds them (MetricScopeLabels).
	ScopeLabels *prometheus.CounterVec
	// Wakeups (label source) counts the accounts each kind of event asked to reconcile
	// (MetricWakeups), before the workqueue merges those of one account.
	Wakeups *prometheus.CounterVec

	// JobEndToVerdict (label condition: Terminated, Accepted) is the time from the last
	// target's terminal condition to the status write that turned the condition True.
	JobEndToVerdict *prometheus.HistogramVec
	// PodHold is how long a pod kept the result-capture finalizer: from its end (or, one
	// that never finished, its creation) to its release.
	PodHold prometheus.Histogram
	// ResultCapture is the time from a pod's end to the write of the ShardResults chunk
	// recording its result.
	ResultCapture prometheus.Histogram
	// Verdicts (labels namespace, local_queue, verdict) counts the accounts of each
	// LocalQueue by verdict (verdictOf): an account with targets in several LocalQueues
	// counts in each, one with none under local_queue="".
	Verdicts *prometheus.GaugeVec
	// BuildInfo is 1, labelled with the binary's version, revision and Go version.
	BuildInfo *prometheus.GaugeVec

	// PerAccount says whether the per-account gauges (batchledger_account_*) are
	// exported; off, they are neither registered nor set, so a cluster of many accounts
	// costs a bounded number of series.
	PerAccount bool

	// Per account (labels namespace, account): one series each, deleted with the
	// account, so the series count follows the number of accounts.
	Shards, ShardsCovered, ShardsAccepted, ShardsMissing *prometheus.GaugeVec
	// Terminated is 1 once every target's Job terminated (Terminated=True), else 0: shards
	// still missing then can only be covered by a repair.
	Terminated *prometheus.GaugeVec
	// ResultRejections (labels namespace, account, reason): the account's rejected and
	// conflicting results by reason. Reasons are the fixed CamelCase set of the API's
	// rejection reasons (v1alpha1.Rejection*) plus ReasonUnsampled, so an account has a
	// bounded number of series.
	ResultRejections *prometheus.GaugeVec

	mu sync.Mutex
	// reasons remembers the reasons exported per account, to delete a reason's series
	// once the account no longer has such rejections.
	reasons map[types.NamespacedName]map[string]bool
	// counted remembers where each account counts in Verdicts, to move it when its
	// verdict or queues change and to uncount it when it is deleted.
	counted map[types.NamespacedName]verdictKey
	// tally is the value of each Verdicts series (namespace, local_queue, verdict).
	tally map[[3]string]int
}

// verdictKey is where an account counts in the Verdicts gauge.
type verdictKey struct {
	verdict string
	// queues are its LocalQueues, sorted ("" for none).
	queues []string
}

// The names of the counters that the e2e suites, the benchmark and the soak read
// (internal/testsupport/scrape), named once here.
const (
	MetricReconciles     = "batchledger_account_reconciles_total"
	MetricStatusWrites   = "batchledger_account_status_writes_total"
	MetricWorkloadWrites = "batchledger_workload_condition_writes_total"
	MetricResultWrites   = "batchledger_result_chunk_writes_total"
	MetricPodReleases    = "batchledger_pod_releases_total"
	// MetricVerdicts counts accounts by namespace, LocalQueue and verdict.
	MetricVerdicts = "batchledger_verdicts"
	// MetricNamespaceReleases counts pods released unrecorded in a namespace being deleted.
	MetricNamespaceReleases = "batchledger_pod_namespace_deleted_releases_total"
	// MetricLiveReads counts reads from the API server of a target's Job or Workload
	// that the manager's cache did not hold (label kind: Job, Workload).
	MetricLiveReads = "batchledger_live_reads_total"
	// MetricScopeLabels counts Jobs and Workloads the controller labelled with the
	// opt-in scope on their own metadata, bringing them into the manager's cache (label
	// kind: Job, Workload).
	MetricScopeLabels = "batchledger_scope_labels_total"
	// MetricWakeups counts the account reconciles asked for, by what asked (label
	// source: a watched kind, or WakeupRequeue), before the workqueue merges the
	// requests of one account: set against MetricReconciles it says which events the
	// reconciles come from.
	MetricWakeups = "batchledger_account_wakeups_total"
)

// WakeupRequeue is the MetricWakeups source of an account's own requeue: progress it
// deferred (a Workload message, a waiting status), its retention, a worker recheck.
const WakeupRequeue = "Requeue"

// Verdicts an account counts under in batchledger_verdicts (verdictOf).
const (
	VerdictAccepted   = "Accepted"
	VerdictBlocked    = "Blocked"
	VerdictInProgress = "InProgress"
)

// Buckets of the latency histograms, in seconds. A verdict follows a Job's end within a
// reconcile or two (sub-second) unless results are still being captured or a Job
// controller is slow to count; a pod is held seconds normally, up to MaxHold (24h by
// default) when its result never comes.
var (
	verdictBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
	holdBuckets    = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 24 * 3600}
)

// NewMetrics creates the counters, gauges and histograms and registers them with
// controller-runtime's registry, served on the manager's metrics endpoint; perAccount
// says whether the per-account gauges are exported (--per-account-metrics).
func NewMetrics(perAccount bool) *Metrics { return newMetricsWith(metrics.Registry, perAccount) }

func newMetrics(reg prometheus.Registerer) *Metrics { return newMetricsWith(reg, true) }

func newMetricsWith(reg prometheus.Registerer, perAccount bool) *Metrics {
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
		Collected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "batchledger_accounts_collected_total", Help: "BatchAccounts deleted because their batch finished longer ago than their TTL.",
		}),
		LiveReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricLiveReads, Help: "Reads from the API server of a target's Job or Workload that the cache did not hold (it lacked the opt-in scope label).",
		}, []string{"kind"}),
		ScopeLabels: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricScopeLabels, Help: "Jobs and Workloads the controller labelled with the opt-in scope, so that its cache holds them.",
		}, []string{"kind"}),
		Wakeups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricWakeups, Help: "Account reconciles asked for, by source (the watched kind, or Requeue), before the workqueue merges those of one account.",
		}, []string{"source"}),
		JobEndToVerdict: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "batchledger_job_end_to_verdict_seconds",
			Help:    "Time from the last target Job's terminal condition to the account status write turning the condition (Terminated, Accepted) True.",
			Buckets: verdictBuckets,
		}, []string{"condition"}),
		PodHold: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "batchledger_pod_hold_seconds",
			Help:    "Time a pod kept the result-capture finalizer: from its end (or its creation, if it never finished) to its release.",
			Buckets: holdBuckets,
		}),
		ResultCapture: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "batchledger_result_capture_seconds",
			Help:    "Time from a pod's end to the ShardResults chunk write recording its result.",
			Buckets: verdictBuckets,
		}),
		Verdicts: gauge(MetricVerdicts, "BatchAccounts by namespace, LocalQueue of their targets and verdict (Accepted, Blocked, InProgress).",
			"namespace", "local_queue", "verdict"),
		BuildInfo: gauge("batchledger_build_info", "1, labelled with the manager's version, source revision and Go version.",
			"version", "revision", "goversion"),
		PerAccount:     perAccount,
		Shards:         gauge("batchledger_account_shards", "Shards the BatchAccount declares.", account...),
		ShardsCovered:  gauge("batchledger_account_shards_covered", "Declared shards whose assigned (Job, completion index) completed.", account...),
		ShardsAccepted: gauge("batchledger_account_shards_accepted", "Declared shards with an accepted result.", account...),
		ShardsMissing:  gauge("batchledger_account_shards_missing", "Declared shards not covered.", account...),
		Terminated:     gauge("batchledger_account_terminated", "1 once every target Job of the BatchAccount terminated (Terminated=True), else 0.", account...),
		ResultRejections: gauge("batchledger_account_result_rejections",
			"The BatchAccount's rejected or conflicting shard results, by reason (Unsampled: beyond the recorded sample).",
			append(account, "reason")...),
		reasons: map[types.NamespacedName]map[string]bool{},
		counted: map[types.NamespacedName]verdictKey{},
		tally:   map[[3]string]int{},
	}
	v := version.Get()
	m.BuildInfo.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	reg.MustRegister(m.Reconciles, m.StatusWrites, m.WorkloadWrites, m.ResultWrites, m.PodReleases,
		m.HoldsExpired, m.NamespaceReleases, m.ScopeStamps, m.Collected, m.LiveReads, m.ScopeLabels, m.Wakeups,
		m.JobEndToVerdict, m.PodHold, m.ResultCapture, m.Verdicts, m.BuildInfo)
	if perAccount {
		reg.MustRegister(m.Shards, m.ShardsCovered, m.ShardsAccepted, m.ShardsMissing, m.Terminated, m.ResultRejections)
	}
	return m
}

func (m *Metrics) reconciled() {
	if m != nil {
		m.Reconciles.Inc()
	}
}

// wokeUp counts n accounts asked to reconcile by source.
func (m *Metrics) wokeUp(source string, n int) {
	if m != nil && n > 0 {
		m.Wakeups.WithLabelValues(source).Add(float64(n))
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

// podReleased counts a release of a pod held for held.
func (m *Metrics) podReleased(held time.Duration) {
	if m != nil {
		m.PodReleases.Inc()
		m.PodHold.Observe(max(held, 0).Seconds())
	}
}

// resultsCaptured observes the capture latency of results recorded at now, of pods that
// ended at ended.
func (m *Metrics) resultsCaptured(now time.Time, ended []time.Time) {
	if m == nil {
		return
	}
	for _, t := range ended {
		m.ResultCapture.Observe(max(now.Sub(t), 0).Seconds())
	}
}

// verdictWritten observes, for a status write at now that turned Terminated or Accepted
// True, the time since the last of the account's targets ended.
func (m *Metrics) verdictWritten(prev []metav1.Condition, st *v1alpha1.BatchAccountStatus, now time.Time) {
	if m == nil {
		return
	}
	ended, ok := lastTargetEnd(st)
	if !ok {
		return
	}
	for _, typ := range []string{v1alpha1.ConditionTerminated, v1alpha1.ConditionAccepted} {
		if apimeta.IsStatusConditionTrue(st.Conditions, typ) && !apimeta.IsStatusConditionTrue(prev, typ) {
			m.JobEndToVerdict.WithLabelValues(typ).Observe(max(now.Sub(ended), 0).Seconds())
		}
	}
}

// lastTargetEnd is when the last of the status's targets recorded its terminal
// condition; false when one has none recorded.
func lastTargetEnd(st *v1alpha1.BatchAccountStatus) (time.Time, bool) {
	var last time.Time
	for i := range st.Targets {
		t := st.Targets[i].TerminalObservedAt
		if t == nil {
			return time.Time{}, false
		}
		if t.After(last) {
			last = t.Time
		}
	}
	return last, !last.IsZero()
}

func (m *Metrics) accountCollected() {
	if m != nil {
		m.Collected.Inc()
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

// Kinds of object counted by LiveReads and ScopeLabels.
const (
	cachedJob      = "Job"
	cachedWorkload = "Workload"
)

func (m *Metrics) liveRead(kind string) {
	if m != nil {
		m.LiveReads.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) scopeLabelled(kind string) {
	if m != nil {
		m.ScopeLabels.WithLabelValues(kind).Inc()
	}
}

// accountObserved exports an account's numbers from its (written) status, and counts it
// under its verdict in each of its LocalQueues (queues; none: the ones it was counted
// under before, so that an account whose Jobs are gone keeps its queue).
func (m *Metrics) accountObserved(ba *v1alpha1.BatchAccount, queues []string) {
	if m == nil {
		return
	}
	m.countVerdict(types.NamespacedName{Namespace: ba.Namespace, Name: ba.Name}, verdictOf(ba), queues)
	if !m.PerAccount {
		return
	}
	s := ba.Status
	l := prometheus.Labels{"namespace": ba.Namespace, "account": ba.Name}
	m.Shards.With(l).Set(float64(s.Shards.Total))
	m.ShardsCovered.With(l).Set(float64(s.Shards.Covered))
	m.ShardsAccepted.With(l).Set(float64(s.Shards.Accepted))
	m.ShardsMissing.With(l).Set(float64(s.Shards.Total - s.Shards.Covered))
	terminated := 0.0
	if apimeta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionTerminated) {
		terminated = 1
	}
	m.Terminated.With(l).Set(terminated)

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

// countVerdict moves the account to verdict in queues in the Verdicts gauge.
func (m *Metrics) countVerdict(key types.NamespacedName, verdict string, queues []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, had := m.counted[key]
	if len(queues) == 0 {
		queues = old.queues
	}
	if len(queues) == 0 {
		queues = []string{""}
	}
	queues = slices.Compact(slices.Sorted(slices.Values(queues)))
	next := verdictKey{verdict: verdict, queues: queues}
	if had && old.verdict == next.verdict && slices.Equal(old.queues, next.queues) {
		return
	}
	if had {
		m.uncount(key.Namespace, old)
	}
	for _, q := range next.queues {
		l := [3]string{key.Namespace, q, verdict}
		m.tally[l]++
		m.Verdicts.WithLabelValues(l[:]...).Set(float64(m.tally[l]))
	}
	m.counted[key] = next
}

// uncount takes an account out of the Verdicts gauge, dropping the series it leaves at 0
// so that a namespace or LocalQueue that is gone leaves no series behind. Holds mu.
func (m *Metrics) uncount(namespace string, k verdictKey) {
	for _, q := range k.queues {
		l := [3]string{namespace, q, k.verdict}
		if m.tally[l]--; m.tally[l] <= 0 {
			delete(m.tally, l)
			m.Verdicts.DeleteLabelValues(l[:]...)
		} else {
			m.Verdicts.WithLabelValues(l[:]...).Set(float64(m.tally[l]))
		}
	}
}

// verdictOf is an account's verdict as batchledger_verdicts counts it: Accepted when
// Accepted is True; Blocked when it can no longer be accepted without a repair
// (account.Blocker, or its batch finished unaccepted: batchFinished); InProgress
// otherwise, including before its first status.
func verdictOf(ba *v1alpha1.BatchAccount) string {
	st := &ba.Status
	if apimeta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionAccepted) {
		return VerdictAccepted
	}
	if account.Blocker(st) != nil {
		return VerdictBlocked
	}
	if _, finished := batchFinished(ba); finished {
		return VerdictBlocked
	}
	return VerdictInProgress
}

// accountDeleted drops every series of a deleted account, and uncounts it.
func (m *Metrics) accountDeleted(key types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if k, had := m.counted[key]; had {
		m.uncount(key.Namespace, k)
		delete(m.counted, key)
	}
	m.mu.Unlock()
	l := prometheus.Labels{"namespace": key.Namespace, "account": key.Name}
	for _, g := range []*prometheus.GaugeVec{m.Shards, m.ShardsCovered, m.ShardsAccepted, m.ShardsMissing, m.Terminated, m.ResultRejections} {
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
