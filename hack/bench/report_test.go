package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"batchledger.dev/batchledger/internal/testsupport/report"
)

// TestDocSectionsLeaveEachOther: the load, its late mode and the baseline each rewrite their own section
// of one document, whatever order they run in.
func TestDocSectionsLeaveEachOther(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "benchmarks.md")
	if err := os.WriteFile(path, []byte("# Benchmarks\n\nIntro.\n\n## Micro\n\nkept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(mode string) {
		t.Helper()
		cfg := loadConfig{command: "go run ./hack/bench", out: path, nodes: 1, gpus: 1, jobsPerAccount: 1, parallelism: 1}
		if err := writeLoadDoc(cfg, dir, []loadResult{{mode: mode, size: size{1, 1}, pods: 1, wall: time.Second}}); err != nil {
			t.Fatal(err)
		}
	}
	baseline := func(mode string) {
		t.Helper()
		g := &generatorConfig{Cohorts: []cohortSet{{ClassName: "cohort", Count: 1, QueuesSets: []queuesSet{{ClassName: "cq", Count: 1, NominalQuota: "1",
			WorkloadsSets: []workloadsSet{{Count: 1, Workloads: []workloadTemplate{{ClassName: "small", Request: "1"}}}}}}}}}
		cfg := baselineConfig{command: "go run ./hack/bench baseline", out: path, scale: 1, gpusPerNode: 1}
		runs := []baselineRun{{mode: mode, round: 1, admission: map[string][]time.Duration{"small": {time.Second}}}}
		if err := writeBaselineDoc(cfg, dir, g, g, runs); err != nil {
			t.Fatal(err)
		}
	}
	load("first")
	baseline("without")
	load("second")
	load(modeLate)
	baseline("with")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, want := range []string{"Intro.", "## Micro\n\nkept", loadHeading, "| second | 1x1 |", lateHeading, "| late | 1x1 |", baselineHeading, "| small | with | 1 |"} {
		if !strings.Contains(doc, want) {
			t.Errorf("document lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(doc, "| first |") || strings.Count(doc, loadBegin) != 1 || strings.Count(doc, loadHeading) != 1 {
		t.Errorf("the second load did not replace the first's section:\n%s", doc)
	}
	if strings.Contains(doc, "| small | without |") || strings.Count(doc, baselineBegin) != 1 || strings.Count(doc, baselineHeading) != 1 {
		t.Errorf("the second baseline did not replace the first's section:\n%s", doc)
	}
}

func TestLoadTableDerivedCells(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    loadResult
		// want maps column headers to cells.
		want map[string]string
	}{
		{"ratios and rates", loadResult{size: size{5, 10}, pods: 50, wall: 10 * time.Second, jobChanges: 40, observed: 80,
			cost: sample{blCPU: 1.5, kcmCPU: 3, statusWrites: 20}, p50: 120 * time.Millisecond, p99: 900 * time.Millisecond, samples: 9},
			map[string]string{"pods/s": "5.0", "ratio": "50.0%", "writes/change": "0.50", "writes/observed": "0.25", "latency p50/p99 ms": "120 / 900"}},
		{"nothing to divide by", loadResult{size: size{1, 1}, pods: 1, wall: time.Second},
			map[string]string{"ratio": "-", "writes/change": "-", "writes/observed": "-"}},
		{"coverage never shown", loadResult{size: size{1, 1}, pods: 1, wall: time.Second, samples: 8, unmatched: 2, p50: time.Millisecond, p99: 2 * time.Millisecond},
			map[string]string{"latency p50/p99 ms": "1 / 2 (2 of 10 never shown)"}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCells(t, loadTable([]loadResult{tc.r}), tc.want) })
	}
}

func TestLoadDetailTableDerivedCells(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    loadResult
		want map[string]string
	}{
		{"floor, queue waits and reconciles", loadResult{size: size{1, 1}, pods: 40, cost: sample{blCPU: 3, kcmCPU: 10, floorCPU: 1,
			queueWaits: 200, queueWaitSum: 50, queueWaitsOver1s: 7, reconcileCount: 100, reconcileSum: 2.5, releaserReconciles: 90}},
			map[string]string{"floor / kcm": "10.0%", "batchledger above floor / kcm": "20.0%", "queue wait mean ms": "250",
				"queue waits > 1 s": "7 of 200", "reconcile mean ms": "25.0", "pod releaser reconciles / pod": "2.25"}},
		{"no floor, no metrics", loadResult{size: size{1, 1}},
			map[string]string{"floor / kcm": "-", "queue wait mean ms": "-", "queue waits > 1 s": "-", "reconcile mean ms": "-",
				"pod releaser reconciles / pod": "-"}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCells(t, loadDetailTable([]loadResult{tc.r}), tc.want) })
	}
}

func TestBaselineRunTableDerivedCells(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    baselineRun
		want map[string]string
	}{
		{"with, floored", baselineRun{mode: modeWith, accounts: 4, floored: true, cost: sample{blCPU: 3, floorCPU: 1.25, statusWrites: 14}},
			map[string]string{"batchledger CPU s": "3.00", "watch floor CPU s": "1.25", "writes/account": "3.50"}},
		{"with, no floor", baselineRun{mode: modeWith, accounts: 4, cost: sample{blCPU: 3}},
			map[string]string{"batchledger CPU s": "3.00", "watch floor CPU s": "-"}},
		{"without", baselineRun{mode: modeWithout},
			map[string]string{"batchledger CPU s": "-", "watch floor CPU s": "-", "writes/account": "-"}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCells(t, baselineRunTable([]string{"small"}, []baselineRun{tc.r}), tc.want) })
	}
}

// wantCells checks the first row of tb: want maps column headers to cells.
func wantCells(t *testing.T, tb report.Table, want map[string]string) {
	t.Helper()
	column := map[string]int{}
	for i, h := range tb.Header {
		column[h] = i
	}
	for col, w := range want {
		i, ok := column[col]
		if !ok {
			t.Fatalf("no column %q", col)
		}
		if got := tb.Rows[0][i]; got != w {
			t.Errorf("%s = %q, want %q", col, got, w)
		}
	}
}

// TestWakeupsPerAccount: each source's wakeups per account, the largest first, ties by
// name, and "-" when there is nothing to divide.
func TestWakeupsPerAccount(t *testing.T) {
	cases := []struct {
		name     string
		wakeups  map[string]float64
		accounts int
		want     string
	}{
		{"none", nil, 5, "-"},
		{"no accounts", map[string]float64{"Job": 3}, 0, "-"},
		{"largest first", map[string]float64{"Pod": 20, "Job": 45, "Workload": 20, "Requeue": 2}, 10, "Job 4.5, Pod 2.0, Workload 2.0, Requeue 0.2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := wakeupsPerAccount(tc.wakeups, tc.accounts); got != tc.want {
				t.Errorf("wakeupsPerAccount = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestWakeupsMinus: a window's wakeups are the later sample's minus the earlier's, per
// source, sources new in the window included and those without any left out.
func TestWakeupsMinus(t *testing.T) {
	got := wakeupsMinus(map[string]float64{"Job": 10, "Pod": 4, "Requeue": 1}, map[string]float64{"Job": 3, "Pod": 4})
	want := map[string]float64{"Job": 7, "Requeue": 1}
	if len(got) != len(want) || got["Job"] != 7 || got["Requeue"] != 1 {
		t.Errorf("wakeupsMinus = %v, want %v", got, want)
	}
}
