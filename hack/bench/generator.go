package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
)

// The baseline's workloads as Kueue's scheduler-performance runner describes them
// (test/performance/scheduler/configs/baseline/generator.yaml of the Kueue module go.mod
// pins), scaled, and planned as the Jobs of a run.

// kueueBaselineGenerator is the baseline's generator config, relative to the Kueue module.
const kueueBaselineGenerator = "test/performance/scheduler/configs/baseline/generator.yaml"

// The generator config: the fields of Kueue's own runner (runner/generator) that the
// baseline uses, without the TAS extensions. Kueue's types are not imported because they
// live in its test tree.

// generatorConfig is a generator.yaml.
type generatorConfig struct {
	Cohorts []cohortSet `json:"cohorts"`
}

// cohortSet is Count cohorts alike.
type cohortSet struct {
	ClassName  string      `json:"className"`
	Count      int         `json:"count"`
	QueuesSets []queuesSet `json:"queuesSets"`
}

// queuesSet is Count ClusterQueues alike in each cohort of the set.
type queuesSet struct {
	ClassName           string                 `json:"className"`
	Count               int                    `json:"count"`
	NominalQuota        string                 `json:"nominalQuota"`
	BorrowingLimit      string                 `json:"borrowingLimit"`
	ReclaimWithinCohort kueue.PreemptionPolicy `json:"reclaimWithinCohort"`
	WithinClusterQueue  kueue.PreemptionPolicy `json:"withinClusterQueue"`
	WorkloadsSets       []workloadsSet         `json:"workloadsSets"`
}

// workloadsSet is Count rounds of its workloads per ClusterQueue, one workload every
// CreationIntervalMs.
type workloadsSet struct {
	Count              int                `json:"count"`
	CreationIntervalMs int                `json:"creationIntervalMs"`
	Workloads          []workloadTemplate `json:"workloads"`
}

// workloadTemplate is one workload class. Request is in Kueue's cpu units; here it is the
// number of GPUs its single pod requests.
type workloadTemplate struct {
	ClassName string `json:"className"`
	RuntimeMs int    `json:"runtimeMs"`
	Priority  int32  `json:"priority"`
	Request   string `json:"request"`
}

// loadGenerator reads and checks a generator.yaml.
func loadGenerator(path string) (*generatorConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var g generatorConfig
	if err := yaml.UnmarshalStrict(data, &g); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(g.Cohorts) == 0 {
		return nil, fmt.Errorf("%s: no cohorts", path)
	}
	for _, cs := range g.Cohorts {
		for _, qs := range cs.QueuesSets {
			for _, q := range []string{qs.NominalQuota, qs.BorrowingLimit} {
				if _, err := resource.ParseQuantity(q); err != nil && q != "" {
					return nil, fmt.Errorf("%s: queue set %s: quota %q: %w", path, qs.ClassName, q, err)
				}
			}
			for _, ws := range qs.WorkloadsSets {
				for _, w := range ws.Workloads {
					if _, err := w.gpus(); err != nil {
						return nil, fmt.Errorf("%s: class %s: %w", path, w.ClassName, err)
					}
				}
			}
		}
	}
	return &g, nil
}

// baselineGeneratorPath is the generator.yaml of the Kueue module in the build list.
func baselineGeneratorPath() (string, error) {
	dir, err := localcluster.ModuleDir("sigs.k8s.io/kueue")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, kueueBaselineGenerator), nil
}

// gpus is the whole number of GPUs a workload's pod requests.
func (w workloadTemplate) gpus() (int, error) {
	q, err := resource.ParseQuantity(w.Request)
	if err != nil {
		return 0, fmt.Errorf("request %q: %w", w.Request, err)
	}
	if q.Value() < 1 || q.MilliValue() != q.Value()*1000 {
		return 0, fmt.Errorf("request %q: want a whole number of GPUs >= 1", w.Request)
	}
	return int(q.Value()), nil
}

// scaleCount scales a workload count, rounding to the nearest and keeping at least one so
// that no class disappears from the run.
func scaleCount(n int, scale float64) int {
	return max(1, int(math.Round(float64(n)*scale)))
}

// scaled returns a copy with every workloads-set count scaled, at most maxCohorts cohorts
// per cohort set and at most maxQueues ClusterQueues per queue set (<= 0: no limit).
// Quotas stay as they are: the scaled run keeps the baseline's contention per queue and
// only runs for a shorter time.
func (g *generatorConfig) scaled(scale float64, maxCohorts, maxQueues int) *generatorConfig {
	limit := func(n, m int) int {
		if m > 0 {
			return min(n, m)
		}
		return n
	}
	out := &generatorConfig{}
	for _, cs := range g.Cohorts {
		cs.Count = limit(cs.Count, maxCohorts)
		qsets := make([]queuesSet, len(cs.QueuesSets))
		for i, qs := range cs.QueuesSets {
			qs.Count = limit(qs.Count, maxQueues)
			wsets := make([]workloadsSet, len(qs.WorkloadsSets))
			for j, ws := range qs.WorkloadsSets {
				ws.Count = scaleCount(ws.Count, scale)
				ws.Workloads = slices.Clone(ws.Workloads)
				wsets[j] = ws
			}
			qs.WorkloadsSets = wsets
			qsets[i] = qs
		}
		cs.QueuesSets = qsets
		out.Cohorts = append(out.Cohorts, cs)
	}
	return out
}

// workloads is the number of workloads the config generates.
func (g *generatorConfig) workloads() int {
	n := 0
	for _, cs := range g.Cohorts {
		for _, qs := range cs.QueuesSets {
			for _, ws := range qs.WorkloadsSets {
				n += cs.Count * qs.Count * ws.Count * len(ws.Workloads)
			}
		}
	}
	return n
}

// classes are the workload class names in the order the config first names them.
func (g *generatorConfig) classes() []string {
	var out []string
	for _, cs := range g.Cohorts {
		for _, qs := range cs.QueuesSets {
			for _, ws := range qs.WorkloadsSets {
				for _, w := range ws.Workloads {
					if !slices.Contains(out, w.ClassName) {
						out = append(out, w.ClassName)
					}
				}
			}
		}
	}
	return out
}

// plannedQueue is one ClusterQueue of the run, named as Kueue's generator names it; its
// namespace and LocalQueue carry the same name.
type plannedQueue struct {
	name, cohort string
	set          queuesSet
}

// queues lists the ClusterQueues of the config.
func (g *generatorConfig) queues() []plannedQueue {
	var out []plannedQueue
	for _, cs := range g.Cohorts {
		for ci := range cs.Count {
			cohort := fmt.Sprintf("%s-%d", cs.ClassName, ci)
			for qsi, qs := range cs.QueuesSets {
				for qi := range qs.Count {
					out = append(out, plannedQueue{name: fmt.Sprintf("%s-%d-%d-%s", qs.ClassName, qsi, qi, cohort), cohort: cohort, set: qs})
				}
			}
		}
	}
	return out
}

// gpuCapacity is the GPUs the fake nodes need so that quota, not nodes, limits admission:
// the nominal quota of every ClusterQueue (borrowing stays within a cohort's total).
func (g *generatorConfig) gpuCapacity() int64 {
	var n int64
	for _, q := range g.queues() {
		q := resource.MustParse(q.set.NominalQuota)
		n += q.Value()
	}
	return n
}

// countCohorts is the number of cohorts of the config.
func countCohorts(g *generatorConfig) int {
	n := 0
	for _, cs := range g.Cohorts {
		n += cs.Count
	}
	return n
}

// priorityClassName names the WorkloadPriorityClass of a workload priority.
func priorityClassName(p int32) string { return fmt.Sprintf("baseline-%d", p) }

// plannedWorkload is one workload of the run: an Indexed Job of one completion in the
// namespace (and LocalQueue) of its ClusterQueue.
type plannedWorkload struct {
	ns, job, class string
	stream         string // ClusterQueue and workloads set: workloads of a stream are created in order
	interval       time.Duration
	runtime        time.Duration
	priority       int32
	gpus           int
}

// planBaseline lists every workload in creation order within its stream, named as
// Kueue's generator names them (class-set-round-position).
func planBaseline(queues []plannedQueue) []plannedWorkload {
	var out []plannedWorkload
	for _, q := range queues {
		for wsi, ws := range q.set.WorkloadsSets {
			for si := range ws.Count {
				for i, w := range ws.Workloads {
					n, _ := w.gpus() // checked by loadGenerator
					out = append(out, plannedWorkload{
						ns: q.name, job: fmt.Sprintf("%s-%d-%d-%d", w.ClassName, wsi, si, i), class: w.ClassName,
						stream:   fmt.Sprintf("%s/%d", q.name, wsi),
						interval: time.Duration(ws.CreationIntervalMs) * time.Millisecond,
						runtime:  time.Duration(w.RuntimeMs) * time.Millisecond, priority: w.Priority, gpus: n,
					})
				}
			}
		}
	}
	return out
}

// streams groups a plan by stream, keeping the order within each.
func streams(plan []plannedWorkload) [][]plannedWorkload {
	idx := map[string]int{}
	var out [][]plannedWorkload
	for _, p := range plan {
		i, ok := idx[p.stream]
		if !ok {
			i = len(out)
			idx[p.stream] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], p)
	}
	return out
}

// submitBaseline creates the workload's Job, in mode with after its BatchAccount (one

// nodes is how many fake nodes of gpusPerNode GPUs hold gpuCapacity (at least one).
func (g *generatorConfig) nodes(gpusPerNode int) int {
	return max(1, (int(g.gpuCapacity())+gpusPerNode-1)/gpusPerNode)
}
