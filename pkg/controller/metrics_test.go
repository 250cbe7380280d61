package controller

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
	"batchledger.dev/batchledger/pkg/version"
)

func TestAccountGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "ij245"}}
	ba.Status.Shards = v1alpha1.ShardSummary{Total: 4, Covered: 3, Accepted: 1}
	ba.Status.Results = v1alpha1.ResultSummary{Rejected: 40, Conflicts: 1, Rejections: []v1alpha1.ResultRejection{
		{Reason: "ForgedClaim"}, {Reason: "ForgedClaim"}, {Reason: "Conflict"},
	}}
	m.accountObserved(ba, nil)
	other := ba.DeepCopy()
	other.Name = "other"
	other.Status.Results = v1alpha1.ResultSummary{}
	m.accountObserved(other, nil)

	want := `
# HELP batchledger_account_result_rejections The BatchAccount's rejected or conflicting shard results, by reason (Unsampled: beyond the recorded sample).
# TYPE batchledger_account_result_rejections gauge
batchledger_account_result_rejections{account="ij245",namespace="ml",reason="Conflict"} 1
batchledger_account_result_rejections{account="ij245",namespace="ml",reason="ForgedClaim"} 2
batchledger_account_result_rejections{account="ij245",namespace="ml",reason="Unsampled"} 38
# HELP batchledger_account_shards_missing Declared shards not covered.
# TYPE batchledger_account_shards_missing gauge
batchledger_account_shards_missing{account="ij245",namespace="ml"} 1
batchledger_account_shards_missing{account="other",namespace="ml"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"batchledger_account_result_rejections", "batchledger_account_shards_missing"); err != nil {
		t.Fatal(err)
	}

	// The rejections are resolved (e.g. the spec's revision was corrected): their series go.
	ba.Status.Results = v1alpha1.ResultSummary{Rejected: 1, Rejections: []v1alpha1.ResultRejection{{Reason: "CriterionNotMet"}}}
	ba.Status.Shards.Covered = 4
	m.accountObserved(ba, nil)
	want = `
# HELP batchledger_account_result_rejections The BatchAccount's rejected or conflicting shard results, by reason (Unsampled: beyond the recorded sample).
# TYPE batchledger_account_result_rejections gauge
batchledger_account_result_rejections{account="ij245",namespace="ml",reason="CriterionNotMet"} 1
# HELP batchledger_account_shards_covered Declared shards whose assigned (Job, completion index) completed.
# TYPE batchledger_account_shards_covered gauge
batchledger_account_shards_covered{account="ij245",namespace="ml"} 4
batchledger_account_shards_covered{account="other",namespace="ml"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"batchledger_account_result_rejections", "batchledger_account_shards_covered"); err != nil {
		t.Fatal(err)
	}

	// A deleted account leaves no series behind; the other account keeps its own.
	m.accountDeleted(types.NamespacedName{Namespace: "ml", Name: "ij245"})
	for _, name := range []string{"batchledger_account_shards", "batchledger_account_shards_covered",
		"batchledger_account_shards_accepted", "batchledger_account_shards_missing", "batchledger_account_terminated",
		"batchledger_account_result_rejections"} {
		n, err := testutil.GatherAndCount(reg, name)
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if name == "batchledger_account_result_rejections" {
			want = 0
		}
		if n != want {
			t.Errorf("%s: %d series after the account was deleted, want %d", name, n, want)
		}
	}
	if len(m.reasons) != 0 {
		t.Errorf("reasons still remembered: %v", m.reasons)
	}
}

func TestNilMetricsCountNothing(t *testing.T) {
	var m *Metrics
	m.accountObserved(&v1alpha1.BatchAccount{}, nil)
	m.podReleased(time.Second)
	m.resultsCaptured(time.Now(), []time.Time{time.Now()})
	m.verdictWritten(nil, &v1alpha1.BatchAccountStatus{}, time.Now())
	m.accountCollected()
	m.accountDeleted(types.NamespacedName{})
}

// TestVerdictsGauge: each account counts once per LocalQueue under its verdict, moves
// when its verdict changes, keeps its queue when its Jobs are gone, and leaves no series
// behind when it is deleted.
func TestVerdictsGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	running := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "a"}}
	accepted := wrappers.MakeBatchAccount("b", "ml").Condition(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "", testNow).Obj()
	rejected := wrappers.MakeBatchAccount("c", "ml").
		Condition(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, "", testNow).
		Condition(v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected, "", testNow).Obj()
	m.accountObserved(running, []string{"team-a"})
	m.accountObserved(accepted, []string{"team-a"})
	m.accountObserved(rejected, []string{"team-b", "team-a", "team-b"})
	m.accountObserved(wrappers.MakeBatchAccount("d", "ml").Obj(), nil)
	compare := func(want string) {
		t.Helper()
		head := "# HELP batchledger_verdicts BatchAccounts by namespace, LocalQueue of their targets and verdict (Accepted, Blocked, InProgress).\n# TYPE batchledger_verdicts gauge\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(head+want), MetricVerdicts); err != nil {
			t.Error(err)
		}
	}
	compare(`batchledger_verdicts{local_queue="",namespace="ml",verdict="InProgress"} 1
batchledger_verdicts{local_queue="team-a",namespace="ml",verdict="Accepted"} 1
batchledger_verdicts{local_queue="team-a",namespace="ml",verdict="Blocked"} 1
batchledger_verdicts{local_queue="team-a",namespace="ml",verdict="InProgress"} 1
batchledger_verdicts{local_queue="team-b",namespace="ml",verdict="Blocked"} 1
`)

	// a is accepted, its Jobs gone (no queue observed): it keeps its queue.
	running.Status = accepted.Status
	m.accountObserved(running, nil)
	m.accountDeleted(types.NamespacedName{Namespace: "ml", Name: "c"})
	m.accountDeleted(types.NamespacedName{Namespace: "ml", Name: "d"})
	compare(`batchledger_verdicts{local_queue="team-a",namespace="ml",verdict="Accepted"} 2
`)
}

// TestPerAccountMetricsOff: with --per-account-metrics=false no series is labelled with
// an account (the batchledger_account_* gauges), and the verdict gauge still counts.
func TestPerAccountMetricsOff(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetricsWith(reg, false)
	ba := wrappers.MakeBatchAccount("a", "ml").Obj()
	ba.Status.Shards = v1alpha1.ShardSummary{Total: 4, Covered: 3}
	ba.Status.Results = v1alpha1.ResultSummary{Rejected: 1, Rejections: []v1alpha1.ResultRejection{{Reason: "Malformed"}}}
	m.accountObserved(ba, []string{"q"})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, series := range f.GetMetric() {
			for _, l := range series.GetLabel() {
				if l.GetName() == "account" {
					t.Errorf("per-account series of %s exported with per-account metrics off", f.GetName())
				}
			}
		}
	}
	if n, err := testutil.GatherAndCount(reg, MetricVerdicts); err != nil || n != 1 {
		t.Errorf("%s: %d series (%v), want 1", MetricVerdicts, n, err)
	}
	m.accountDeleted(types.NamespacedName{Namespace: "ml", Name: "a"})
}

// TestBuildInfo: one series of value 1 naming this binary's version.
func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(reg)
	v := version.Get()
	want := fmt.Sprintf(`# HELP batchledger_build_info 1, labelled with the manager's version, source revision and Go version.
# TYPE batchledger_build_info gauge
batchledger_build_info{goversion=%q,revision=%q,version=%q} 1
`, v.GoVersion, v.Revision, v.Version)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "batchledger_build_info"); err != nil {
		t.Error(err)
	}
}

// TestLatencyHistograms: a Job's end to the write that turned Terminated and Accepted
// True, a pod's end to its recorded result, and a pod's hold, each observed once.
func TestLatencyHistograms(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	st := wrappers.MakeBatchAccount("a", "ml").
		Condition(v1alpha1.ConditionTerminated, metav1.ConditionTrue, v1alpha1.ReasonComplete, "", testNow).
		Condition(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultsPending, "", testNow).
		TargetStatus(v1alpha1.TargetStatus{Name: "j", TerminalObservedAt: &metav1.Time{Time: testNow.Add(-3 * time.Second)}}).
		TargetStatus(v1alpha1.TargetStatus{Name: "k", TerminalObservedAt: &metav1.Time{Time: testNow.Add(-2 * time.Second)}}).Obj().Status
	m.verdictWritten(nil, &st, testNow)
	// The next write turns Accepted True; Terminated was True already.
	prev := slices.Clone(st.Conditions)
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAccepted})
	m.verdictWritten(prev, &st, testNow.Add(3*time.Second))
	m.resultsCaptured(testNow, []time.Time{testNow.Add(-300 * time.Millisecond), testNow.Add(-7 * time.Second)})

	pod := wrappers.MakeIndexPod(wrappers.MakeJob("j", "ml").Indexed(1).Obj(), "j-0", 0).Succeeded(testNow.Add(-40*time.Second), "").Obj()
	m.podReleased(testNow.Sub(holdStart(pod)))
	pending := wrappers.MakeIndexPod(wrappers.MakeJob("j", "ml").Indexed(1).Obj(), "j-1", 0).Obj()
	pending.CreationTimestamp = metav1.NewTime(testNow.Add(-2 * time.Hour))
	m.podReleased(testNow.Sub(holdStart(pending)))

	for _, tc := range []struct {
		name      string
		collector prometheus.Collector
		count     int
		sum       float64
	}{
		{"job end to Terminated", m.JobEndToVerdict.WithLabelValues(v1alpha1.ConditionTerminated).(prometheus.Histogram), 1, 2},
		{"job end to Accepted", m.JobEndToVerdict.WithLabelValues(v1alpha1.ConditionAccepted).(prometheus.Histogram), 1, 5},
		{"result capture", m.ResultCapture, 2, 7.3},
		{"pod hold", m.PodHold, 2, 40 + 7200},
	} {
		var out dto.Metric
		if err := tc.collector.(prometheus.Metric).Write(&out); err != nil {
			t.Fatal(err)
		}
		h := out.GetHistogram()
		if int(h.GetSampleCount()) != tc.count || math.Abs(h.GetSampleSum()-tc.sum) > 1e-9 {
			t.Errorf("%s: %d samples summing to %v, want %d summing to %v", tc.name, h.GetSampleCount(), h.GetSampleSum(), tc.count, tc.sum)
		}
	}
}

// TestReconcileExportsVerdictAndLatency: a reconcile that finds Job j (in LocalQueue
// team-a) Complete counts its account Accepted under team-a and observes the time from
// the Job's end to the verdict.
func TestReconcileExportsVerdictAndLatency(t *testing.T) {
	job := jobJ(v1alpha1.ScopeCoverage).Queue("team-a").Completed("0-1", 2).Complete(testNow.Add(-4 * time.Second)).Obj()
	f := newFixture(t, hooks{}, accountOfJ().Obj(), job)
	reg := prometheus.NewRegistry()
	r := f.reconciler()
	r.Metrics = newMetrics(reg)
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(r.Metrics.Verdicts.WithLabelValues("ns", "team-a", VerdictAccepted)); got != 1 {
		t.Errorf("accepted accounts of team-a = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(r.Metrics.JobEndToVerdict); n != 2 {
		t.Errorf("%d job-end-to-verdict series, want 2 (Terminated, Accepted)", n)
	}
}
