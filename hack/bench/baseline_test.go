package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// kueueBaseline reads the real generator.yaml from the Kueue module go.mod pins, so a
// Kueue upgrade that changes the baseline shows up here.
func kueueBaseline(t *testing.T) *generatorConfig {
	t.Helper()
	path, err := baselineGeneratorPath()
	if err != nil {
		t.Fatal(err)
	}
	g, err := loadGenerator(path)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestLoadKueueBaseline(t *testing.T) {
	g := kueueBaseline(t)
	if got := g.workloads(); got != 15000 {
		t.Errorf("full baseline: %d workloads, want 15000", got)
	}
	if len(g.Cohorts) != 1 || g.Cohorts[0].Count != 5 || len(g.Cohorts[0].QueuesSets) != 1 {
		t.Fatalf("cohorts: %+v", g.Cohorts)
	}
	qs := g.Cohorts[0].QueuesSets[0]
	if qs.Count != 6 || qs.NominalQuota != "20" || qs.BorrowingLimit != "100" ||
		qs.ReclaimWithinCohort != kueue.PreemptionPolicyAny || qs.WithinClusterQueue != kueue.PreemptionPolicyLowerPriority {
		t.Errorf("queue set: %+v", qs)
	}
	type class struct {
		name                       string
		count, intervalMs, runtime int
		priority                   int32
		gpus                       int
	}
	want := []class{
		{"small", 350, 100, 200, 50, 1},
		{"medium", 100, 500, 500, 100, 5},
		{"large", 50, 1200, 1000, 200, 20},
	}
	if len(qs.WorkloadsSets) != len(want) {
		t.Fatalf("%d workloads sets, want %d", len(qs.WorkloadsSets), len(want))
	}
	for i, w := range want {
		ws := qs.WorkloadsSets[i]
		if len(ws.Workloads) != 1 {
			t.Fatalf("set %d: %d workloads", i, len(ws.Workloads))
		}
		wl := ws.Workloads[0]
		gpus, err := wl.gpus()
		got := class{wl.ClassName, ws.Count, ws.CreationIntervalMs, wl.RuntimeMs, wl.Priority, gpus}
		if err != nil || got != w {
			t.Errorf("set %d: %+v (%v), want %+v", i, got, err, w)
		}
	}
	if got := strings.Join(g.classes(), ","); got != "small,medium,large" {
		t.Errorf("classes %s", got)
	}
}

func TestScaleKueueBaseline(t *testing.T) {
	full := kueueBaseline(t)
	for _, tc := range []struct {
		name              string
		scale             float64
		cohorts, queues   int
		counts            []int // small, medium, large per ClusterQueue
		workloads         int
		clusterQueues     int
		gpus              int64
		firstQueue, first string
	}{
		{"default", 0.1, 1, 6, []int{35, 10, 5}, 300, 6, 120, "cq-0-0-cohort-0", "small-0-0-0"},
		{"full", 1, 0, 0, []int{350, 100, 50}, 15000, 30, 600, "cq-0-0-cohort-0", "small-0-0-0"},
		{"rounds half up", 0.01, 1, 2, []int{4, 1, 1}, 12, 2, 40, "cq-0-0-cohort-0", "small-0-0-0"},
		{"at least one", 0.001, 2, 1, []int{1, 1, 1}, 6, 2, 40, "cq-0-0-cohort-0", "small-0-0-0"},
		{"limits above the config", 0.1, 9, 9, []int{35, 10, 5}, 1500, 30, 600, "cq-0-0-cohort-0", "small-0-0-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := full.scaled(tc.scale, tc.cohorts, tc.queues)
			var counts []int
			for _, ws := range g.Cohorts[0].QueuesSets[0].WorkloadsSets {
				counts = append(counts, ws.Count)
			}
			if !slices.Equal(counts, tc.counts) {
				t.Errorf("counts %v, want %v", counts, tc.counts)
			}
			if got := g.workloads(); got != tc.workloads {
				t.Errorf("workloads %d, want %d", got, tc.workloads)
			}
			queues := g.queues()
			if len(queues) != tc.clusterQueues || queues[0].name != tc.firstQueue {
				t.Errorf("%d ClusterQueues, first %s; want %d, %s", len(queues), queues[0].name, tc.clusterQueues, tc.firstQueue)
			}
			if got := g.gpuCapacity(); got != tc.gpus {
				t.Errorf("GPU capacity %d, want %d", got, tc.gpus)
			}
			plan := planBaseline(queues)
			if len(plan) != tc.workloads || plan[0].job != tc.first || plan[0].ns != tc.firstQueue {
				t.Fatalf("plan of %d, first %+v", len(plan), plan[0])
			}
			if got := len(streams(plan)); got != 3*tc.clusterQueues {
				t.Errorf("%d streams, want one per ClusterQueue and workloads set (%d)", got, 3*tc.clusterQueues)
			}
		})
	}
	// Scaling must not write through to the loaded config.
	if full.Cohorts[0].QueuesSets[0].WorkloadsSets[0].Count != 350 || full.workloads() != 15000 {
		t.Error("scaled changed the original config")
	}
}

func TestPlanFields(t *testing.T) {
	g := kueueBaseline(t).scaled(0.1, 1, 1)
	byClass := map[string]plannedWorkload{}
	for _, p := range planBaseline(g.queues()) {
		if _, ok := byClass[p.class]; !ok {
			byClass[p.class] = p
		}
	}
	for class, want := range map[string]plannedWorkload{
		"small":  {interval: 100 * time.Millisecond, runtime: 200 * time.Millisecond, priority: 50, gpus: 1},
		"medium": {interval: 500 * time.Millisecond, runtime: 500 * time.Millisecond, priority: 100, gpus: 5},
		"large":  {interval: 1200 * time.Millisecond, runtime: time.Second, priority: 200, gpus: 20},
	} {
		got := byClass[class]
		if got.interval != want.interval || got.runtime != want.runtime || got.priority != want.priority || got.gpus != want.gpus {
			t.Errorf("%s: %+v, want %+v", class, got, want)
		}
	}
}

func TestLoadGeneratorRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"no cohorts":     "cohorts: []\n",
		"unknown field":  "cohorts:\n- className: c\n  count: 1\n  colour: red\n",
		"fraction GPU":   "cohorts:\n- className: c\n  count: 1\n  queuesSets:\n  - className: q\n    count: 1\n    nominalQuota: 20\n    workloadsSets:\n    - count: 1\n      workloads:\n      - className: s\n        request: 500m\n",
		"bad quota":      "cohorts:\n- className: c\n  count: 1\n  queuesSets:\n  - className: q\n    count: 1\n    nominalQuota: lots\n",
		"not a sequence": "cohorts: 3\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "generator.yaml")
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := loadGenerator(path); err == nil {
				t.Error("accepted")
			}
		})
	}
}
