package controller

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

func TestAccountGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "ij245"}}
	ba.Status.Shards = v1alpha1.ShardSummary{Total: 4, Covered: 3, Accepted: 1}
	ba.Status.Results = v1alpha1.ResultSummary{Rejected: 40, Conflicts: 1, Rejections: []v1alpha1.ResultRejection{
		{Reason: "ForgedClaim"}, {Reason: "ForgedClaim"}, {Reason: "Conflict"},
	}}
	m.accountObserved(ba)
	other := ba.DeepCopy()
	other.Name = "other"
	other.Status.Results = v1alpha1.ResultSummary{}
	m.accountObserved(other)

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
	m.accountObserved(ba)
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
		"batchledger_account_shards_accepted", "batchledger_account_shards_missing", "batchledger_account_result_rejections"} {
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
	m.accountObserved(&v1alpha1.BatchAccount{})
	m.accountDeleted(types.NamespacedName{})
}
