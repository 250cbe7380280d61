package main

// `go run ./hack/bench baseline` rides beside Kueue's scheduler-performance baseline
// (test/performance/scheduler/configs/baseline/generator.yaml of the Kueue module go.mod
// pins): the same cohorts, ClusterQueues, quotas, preemption policies and workload
// classes, scaled down to fit this machine, submitted as Kueue-managed Indexed Jobs whose
// pods request GPUs and finish after the class's runtime (kwok auto-exit). Each run gets a
// fresh local cluster; "with" runs the batchledger controller and creates a BatchAccount
// before every Job, "without" has no batchledger at all. Rounds alternate the order so
// that neither mode always runs on a warmer (or busier) machine.
//
// The measure is Kueue's own: per workload class, the time from the Workload's first
// appearance to its admission (watch arrival times, as Kueue's recorder takes them; the
// last admission counts when a Workload was preempted and admitted again).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// kueueBaselineGenerator is the baseline's generator config, relative to the Kueue module.
const kueueBaselineGenerator = "test/performance/scheduler/configs/baseline/generator.yaml"

const (
	baselineBegin  = "<!-- bench:baseline:begin (written by hack/bench baseline --out) -->"
	baselineEnd    = "<!-- bench:baseline:end -->"
	baselineFlavor = "baseline"
	// jobClassLabel carries the workload class on the Job, for the reader of the cluster.
	jobClassLabel = "bench.batchledger.dev/class"
)

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

// baselineConfig holds the baseline flags.
type baselineConfig struct {
	generator         string
	scale             float64
	cohorts, queues   int
	rounds            int
	gpusPerNode       int
	timeout           time.Duration
	binary            string
	out               string
	command           string
	modes             []string
	generatorRelative string
}

func baselineMain(args []string) int {
	fs := flag.NewFlagSet("baseline", flag.ExitOnError)
	var cfg baselineConfig
	fs.StringVar(&cfg.generator, "generator", "", "generator.yaml (default: Kueue's "+kueueBaselineGenerator+" from the module cache)")
	fs.Float64Var(&cfg.scale, "scale", 0.1, "factor on every workloads-set count (rounded, at least 1)")
	fs.IntVar(&cfg.cohorts, "cohorts", 1, "at most this many cohorts per cohort set (0: as in the config)")
	fs.IntVar(&cfg.queues, "queues", 6, "at most this many ClusterQueues per queue set (0: as in the config)")
	fs.IntVar(&cfg.rounds, "rounds", 2, "rounds of one run without and one with batchledger, order alternating")
	fs.IntVar(&cfg.gpusPerNode, "gpus-per-node", 64, "nvidia.com/gpu per fake node; nodes hold the sum of the nominal quotas")
	fs.DurationVar(&cfg.timeout, "timeout", 6*time.Minute, "limit for one run, cluster start-up included")
	fs.StringVar(&cfg.binary, "binary", "", "batchledger controller binary (default <repo>/bin/batchledger)")
	fs.StringVar(&cfg.out, "out", "", "when set (docs/benchmarks.md), rewrite the baseline section of this Markdown file")
	modes := fs.String("modes", "without,with", "modes of the first round, in order (later rounds alternate); paced is a control: no batchledger, but a ConfigMap created where with creates the BatchAccount")
	_ = fs.Parse(args)
	for m := range strings.SplitSeq(*modes, ",") {
		if m != "with" && m != "without" && m != "paced" {
			fmt.Fprintf(os.Stderr, "bench baseline: mode %q: want with, without or paced\n", m)
			return 2
		}
		cfg.modes = append(cfg.modes, m)
	}
	if cfg.scale <= 0 || cfg.rounds < 1 || cfg.gpusPerNode < 1 {
		fmt.Fprintln(os.Stderr, "bench baseline: --scale, --rounds and --gpus-per-node must be positive")
		return 2
	}
	cfg.command = strings.TrimSpace("go run ./hack/bench baseline " + strings.Join(args, " "))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runBaseline(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench baseline:", err)
		return 1
	}
	return 0
}

// wlRecord is what the Workload watch saw of one workload (keyed by its Job).
type wlRecord struct {
	class                     string
	created                   time.Time // the Job's create call
	first, admitted, finished time.Time // watch arrival times
	wasAdmitted               bool
	admissions                int
}

// baselineRun is one run's measurements.
type baselineRun struct {
	mode                            string
	round                           int
	startup, wall                   time.Duration
	submitted                       time.Duration // first create to the last Job's create call
	workloads, finished, readmitted int
	accounts                        int
	// admission and jobToFinish are per class.
	admission, jobToFinish          map[string][]time.Duration
	blCPU, kcmCPU, kueueCPU, apiCPU float64
	statusWrites, wlWrites          float64
	loadBefore, loadAfter           string
	timedOut                        bool
}

func runBaseline(ctx context.Context, cfg baselineConfig) error {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	if cfg.generator == "" {
		if cfg.generator, err = baselineGeneratorPath(); err != nil {
			return err
		}
		cfg.generatorRelative = "sigs.k8s.io/kueue/" + kueueBaselineGenerator
	} else {
		cfg.generatorRelative = cfg.generator
	}
	full, err := loadGenerator(cfg.generator)
	if err != nil {
		return err
	}
	g := full.scaled(cfg.scale, cfg.cohorts, cfg.queues)
	if len(g.queues()) == 0 || g.workloads() == 0 {
		return fmt.Errorf("%s: no ClusterQueues or no workloads to run", cfg.generator)
	}
	if cfg.binary == "" {
		cfg.binary = filepath.Join(root, "bin", "batchledger")
	}
	if _, err := os.Stat(cfg.binary); err != nil {
		return fmt.Errorf("batchledger binary: %w (make build)", err)
	}
	fmt.Fprintf(os.Stderr, "baseline: %s scaled by %g to %d of %d workloads, %d ClusterQueues in %d cohort(s), GPU capacity %d\n",
		cfg.generatorRelative, cfg.scale, g.workloads(), full.workloads(), len(g.queues()), countCohorts(g), g.gpuCapacity())
	var runs []baselineRun
	for round := range cfg.rounds {
		order := slices.Clone(cfg.modes)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, mode := range order {
			fmt.Fprintf(os.Stderr, "== round %d, %s batchledger\n", round+1, mode)
			r, err := runBaselineOnce(ctx, cfg, g, mode, round+1)
			if err != nil {
				printBaseline(os.Stdout, g, runs)
				return fmt.Errorf("round %d %s: %w", round+1, mode, err)
			}
			runs = append(runs, r)
			printBaselineRuns(os.Stderr, g.classes(), runs[len(runs)-1:])
		}
	}
	fmt.Println()
	printBaseline(os.Stdout, g, runs)
	if cfg.out != "" {
		if err := writeBaselineDoc(cfg, root, g, full, runs); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", cfg.out)
	}
	return nil
}

func countCohorts(g *generatorConfig) int {
	n := 0
	for _, cs := range g.Cohorts {
		n += cs.Count
	}
	return n
}

// runBaselineOnce starts a fresh cluster, runs the whole scaled config once and stops the
// cluster.
func runBaselineOnce(parent context.Context, cfg baselineConfig, g *generatorConfig, mode string, round int) (baselineRun, error) {
	ctx, cancel := context.WithTimeout(parent, cfg.timeout)
	defer cancel()
	res := baselineRun{mode: mode, round: round, loadBefore: loadavg(),
		admission: map[string][]time.Duration{}, jobToFinish: map[string][]time.Duration{}}
	with := mode == "with"

	capacity := int(g.gpuCapacity())
	var nodes []localcluster.NodeSpec
	for i := range max(1, (capacity+cfg.gpusPerNode-1)/cfg.gpusPerNode) {
		nodes = append(nodes, localcluster.NodeSpec{
			Name: fmt.Sprintf("kwok-baseline-%d", i), Labels: map[string]string{localcluster.GPUTypeLabel: baselineFlavor},
			GPUs: cfg.gpusPerNode, CPU: "512", Memory: "4Ti",
		})
	}
	opts := localcluster.Options{Nodes: nodes, Log: prefixWriter{os.Stderr, "  "}}
	if with {
		m, err := localcluster.BatchledgerManager(cfg.binary)
		if err != nil {
			return res, err
		}
		opts.Managers = []localcluster.Manager{m}
	}
	cl, err := localcluster.Start(ctx, opts)
	if err != nil {
		return res, err
	}
	defer func() {
		if err := cl.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench baseline: stopping the cluster:", err)
		}
	}()
	res.startup = cl.StartupDuration
	c, err := client.NewWithWatch(cl.RESTConfig, client.Options{Scheme: scheme.Must()})
	if err != nil {
		return res, err
	}
	b := &bench{cl: cl, c: c}
	if with {
		env, ok := cl.ManagerEnv(localcluster.BatchledgerName)
		if !ok {
			return res, errors.New("batchledger is not running")
		}
		b.metrics = env.MetricsURL()
	}
	queues := g.queues()
	if err := baselineQueues(ctx, c, queues); err != nil {
		return res, err
	}

	// Every Workload of the run, keyed by "<namespace>/<job>".
	var mu sync.Mutex
	recs := map[string]*wlRecord{}
	finished := 0
	var lastFinish time.Time
	onWorkload := func(o runtime.Object, now time.Time) {
		wl, ok := o.(*kueue.Workload)
		if !ok {
			return
		}
		job := ""
		for _, ref := range wl.OwnerReferences {
			if ref.Kind == "Job" {
				job = ref.Name
			}
		}
		if job == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		r := recs[wl.Namespace+"/"+job]
		if r == nil {
			return // not one of ours
		}
		if r.first.IsZero() {
			r.first = now
		}
		admitted := apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
		if admitted && !r.wasAdmitted {
			r.admitted = now
			r.admissions++
		}
		r.wasAdmitted = admitted
		if r.finished.IsZero() && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
			r.finished = now
			finished++
			lastFinish = now
		}
	}
	plan := planBaseline(queues)
	for _, p := range plan {
		recs[p.ns+"/"+p.job] = &wlRecord{class: p.class}
	}
	res.workloads = len(plan)
	if with {
		res.accounts = len(plan)
	}

	wctx, stopWatch := context.WithCancel(ctx)
	watchErr := make(chan error, 1)
	ready := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		stopWatch()
		wg.Wait()
	}()
	wg.Go(func() {
		if err := b.watch(wctx, "", &kueue.WorkloadList{}, ready, onWorkload); err != nil && wctx.Err() == nil {
			watchErr <- err
		}
	})
	<-ready

	before, err := baselineSnapshot(b, with)
	if err != nil {
		return res, err
	}
	start := time.Now()
	// One generator per (ClusterQueue, workloads set), all at once, as Kueue's runner does.
	genErr := make(chan error, len(plan))
	var gen sync.WaitGroup
	for _, stream := range streams(plan) {
		gen.Go(func() {
			for _, p := range stream {
				select {
				case <-ctx.Done():
					return
				case <-time.After(p.interval):
				}
				if err := submitBaseline(ctx, c, p, mode, func(t time.Time) {
					mu.Lock()
					recs[p.ns+"/"+p.job].created = t
					mu.Unlock()
				}); err != nil {
					genErr <- err
					return
				}
			}
		})
	}
	lastReport := time.Now()
	err = poll(ctx, cfg.timeout, func() (bool, error) {
		select {
		case err := <-watchErr:
			return false, err
		case err := <-genErr:
			return false, err
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		if time.Since(lastReport) > 30*time.Second {
			admitted := 0
			for _, r := range recs {
				if r.admissions > 0 {
					admitted++
				}
			}
			fmt.Fprintf(os.Stderr, "  %s: %d admitted, %d/%d finished\n", time.Since(start).Round(time.Second), admitted, finished, len(plan))
			lastReport = time.Now()
		}
		return finished == len(plan), nil
	})
	gen.Wait()
	if err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			return res, err
		}
		// A run cut by --timeout still reports what it measured, marked as such.
		res.timedOut = true
		fmt.Fprintf(os.Stderr, "  timed out after %s with %d/%d finished\n", time.Since(start).Round(time.Second), finished, len(plan))
	}
	mu.Lock()
	res.wall = lastFinish.Sub(start)
	mu.Unlock()
	if res.timedOut {
		res.wall = time.Since(start)
	}
	// Let the controller write the final verdicts before reading its counters, so that the
	// run's cost includes the accounts' last writes; a fixed short pause without it.
	settleCtx, cancelSettle := context.WithTimeout(parent, 30*time.Second)
	if with {
		prev := -1.0
		_ = poll(settleCtx, 30*time.Second, func() (bool, error) {
			time.Sleep(3 * time.Second)
			s, err := baselineSnapshot(b, true)
			if err != nil {
				return false, err
			}
			done := s.statusWrites == prev
			prev = s.statusWrites
			return done, nil
		})
	} else {
		time.Sleep(3 * time.Second)
	}
	cancelSettle()
	after, err := baselineSnapshot(b, with)
	if err != nil {
		return res, err
	}
	stopWatch()
	res.blCPU = after.blCPU - before.blCPU
	res.kcmCPU = after.kcmCPU - before.kcmCPU
	res.kueueCPU = after.kueueCPU - before.kueueCPU
	res.apiCPU = after.apiCPU - before.apiCPU
	res.statusWrites = after.statusWrites - before.statusWrites
	res.wlWrites = after.wlWrites - before.wlWrites
	mu.Lock()
	for _, r := range recs {
		if d := r.created.Sub(start); !r.created.IsZero() && d > res.submitted {
			res.submitted = d
		}
		if r.admissions > 1 {
			res.readmitted++
		}
		if !r.finished.IsZero() {
			res.finished++
		}
		if r.admissions > 0 && !r.first.IsZero() {
			res.admission[r.class] = append(res.admission[r.class], r.admitted.Sub(r.first))
		}
		if !r.finished.IsZero() && !r.created.IsZero() {
			res.jobToFinish[r.class] = append(res.jobToFinish[r.class], r.finished.Sub(r.created))
		}
	}
	mu.Unlock()
	res.loadAfter = loadavg()
	return res, nil
}

// baselineQueues creates the ResourceFlavor, a WorkloadPriorityClass per priority, and for
// every ClusterQueue its namespace and LocalQueue, then waits for the queues to be active.
func baselineQueues(ctx context.Context, c client.Client, queues []plannedQueue) error {
	objs := []client.Object{wrappers.MakeResourceFlavor(baselineFlavor).NodeLabel(localcluster.GPUTypeLabel, baselineFlavor).Obj()}
	prios := map[int32]bool{}
	for _, q := range queues {
		for _, ws := range q.set.WorkloadsSets {
			for _, w := range ws.Workloads {
				if !prios[w.Priority] {
					prios[w.Priority] = true
					objs = append(objs, wrappers.MakeWorkloadPriorityClass(priorityClassName(w.Priority)).PriorityValue(w.Priority).Obj())
				}
			}
		}
	}
	for _, q := range queues {
		quota := wrappers.MakeFlavorQuotas(baselineFlavor).Resource(wrappers.GPU, q.set.NominalQuota, q.set.BorrowingLimit).Obj()
		objs = append(objs,
			wrappers.MakeClusterQueue(q.name).Cohort(q.cohort).ResourceGroup(quota).
				ReclaimWithinCohort(q.set.ReclaimWithinCohort).WithinClusterQueue(q.set.WithinClusterQueue).Obj(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: q.name}},
			wrappers.MakeLocalQueue(q.name, q.name).ClusterQueue(q.name).Obj())
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%T %s: %w", o, o.GetName(), err)
		}
	}
	return poll(ctx, time.Minute, func() (bool, error) {
		for _, q := range queues {
			var cq kueue.ClusterQueue
			if err := c.Get(ctx, client.ObjectKey{Name: q.name}, &cq); err != nil || !apimeta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive) {
				return false, client.IgnoreNotFound(err)
			}
		}
		return true, nil
	})
}

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
// shard for the Job's one index); created gets the time of the Job's create call. Mode
// paced creates a ConfigMap instead of the account: the same extra request before each
// Job, which slows the submission streams as much, without batchledger.
func submitBaseline(ctx context.Context, c client.Client, p plannedWorkload, mode string, created func(time.Time)) error {
	switch mode {
	case "with":
		ba := wrappers.MakeBatchAccount(p.job, p.ns).ShardCount("s", 1).AssignJobOrdinals(p.job, "0", "0").Obj()
		if err := c.Create(ctx, ba); err != nil {
			return fmt.Errorf("BatchAccount %s/%s: %w", p.ns, p.job, err)
		}
	case "paced":
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: p.job, Namespace: p.ns}, Data: map[string]string{"shards": "s0"}}
		if err := c.Create(ctx, cm); err != nil {
			return fmt.Errorf("ConfigMap %s/%s: %w", p.ns, p.job, err)
		}
	}
	job := wrappers.MakeJob(p.job, p.ns).Indexed(1).Queue(p.ns).PriorityClass(priorityClassName(p.priority)).
		Label(jobClassLabel, p.class).GPU(p.gpus).
		PodAnnotation(kwok.AutoExitCodeAnnotation, "0").
		PodAnnotation(kwok.AutoExitDelayAnnotation, p.runtime.String()).Obj()
	created(time.Now())
	if err := c.Create(ctx, job); err != nil {
		return fmt.Errorf("Job %s/%s: %w", p.ns, p.job, err)
	}
	return nil
}

// baselineCounters is the cumulative cost counters at one moment.
type baselineCounters struct {
	blCPU, kcmCPU, kueueCPU, apiCPU float64
	statusWrites, wlWrites          float64
}

func baselineSnapshot(b *bench, with bool) (baselineCounters, error) {
	var s baselineCounters
	type component struct {
		name string
		dst  *float64
	}
	components := []component{{"kube-controller-manager", &s.kcmCPU}, {"kueue", &s.kueueCPU}, {"kube-apiserver", &s.apiCPU}}
	if with {
		components = append(components, component{localcluster.BatchledgerName, &s.blCPU})
	}
	for _, p := range components {
		var err error
		if *p.dst, err = componentCPU(b.cl.StateDir, p.name); err != nil {
			return s, err
		}
	}
	if !with {
		return s, nil
	}
	c, err := b.controllerCounters()
	if err != nil {
		return s, err
	}
	s.statusWrites, s.wlWrites = c.statusWrites, c.wlWrites
	return s, nil
}

func avg(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var s time.Duration
	for _, x := range d {
		s += x
	}
	return s / time.Duration(len(d))
}

// classRow is one class's admission times over every run of a mode.
type classRow struct {
	class, mode      string
	n                int
	avg, p90, finish time.Duration
}

func classRows(g *generatorConfig, runs []baselineRun) []classRow {
	var out []classRow
	for _, class := range g.classes() {
		for _, mode := range []string{"without", "paced", "with"} {
			var adm, fin []time.Duration
			for _, r := range runs {
				if r.mode == mode {
					adm = append(adm, r.admission[class]...)
					fin = append(fin, r.jobToFinish[class]...)
				}
			}
			if len(adm) == 0 {
				continue
			}
			out = append(out, classRow{class: class, mode: mode, n: len(adm), avg: avg(adm), p90: percentile(adm, 0.9), finish: avg(fin)})
		}
	}
	return out
}

var (
	baselineClassHeader = []string{"class", "batchledger", "workloads", "admission avg ms", "admission p90 ms", "Job create → finished avg ms"}
	baselineRunHeader   = []string{"round", "batchledger", "cluster start s", "submitted s", "wall s", "finished", "re-admitted", "admission avg ms (%s)", "batchledger CPU s", "kcm CPU s", "Kueue CPU s", "apiserver CPU s", "status writes", "writes/account", "Workload condition writes", "load avg (before → after)"}
)

// runHeader is baselineRunHeader with the class names in its per-class column.
func runHeader(classes []string) []string {
	h := slices.Clone(baselineRunHeader)
	for i := range h {
		if strings.Contains(h[i], "%s") {
			h[i] = fmt.Sprintf(h[i], strings.Join(classes, " / "))
		}
	}
	return h
}

func (r classRow) cells() []string {
	return []string{r.class, r.mode, strconv.Itoa(r.n), ms(r.avg), ms(r.p90), ms(r.finish)}
}

// cells are the run's row; its per-class admission averages show how much two runs of the
// same mode differ, the yardstick for any difference between the modes.
func (r baselineRun) cells(classes []string) []string {
	var perClass []string
	for _, c := range classes {
		perClass = append(perClass, ms(avg(r.admission[c])))
	}
	bl, writes, perAccount, wl := "-", "-", "-", "-"
	if r.mode == "with" {
		bl = fmt.Sprintf("%.2f", r.blCPU)
		writes = fmt.Sprintf("%.0f", r.statusWrites)
		wl = fmt.Sprintf("%.0f", r.wlWrites)
		if r.accounts > 0 {
			perAccount = fmt.Sprintf("%.2f", r.statusWrites/float64(r.accounts))
		}
	}
	wall := fmt.Sprintf("%.1f", r.wall.Seconds())
	if r.timedOut {
		wall += " (timed out)"
	}
	return []string{strconv.Itoa(r.round), r.mode, fmt.Sprintf("%.1f", r.startup.Seconds()), fmt.Sprintf("%.1f", r.submitted.Seconds()), wall,
		fmt.Sprintf("%d/%d", r.finished, r.workloads), strconv.Itoa(r.readmitted), strings.Join(perClass, " / "),
		bl, fmt.Sprintf("%.2f", r.kcmCPU), fmt.Sprintf("%.2f", r.kueueCPU), fmt.Sprintf("%.2f", r.apiCPU),
		writes, perAccount, wl, r.loadBefore + " → " + r.loadAfter}
}

func printBaselineRuns(w io.Writer, classes []string, runs []baselineRun) {
	if len(runs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(runHeader(classes), "\t"))
	for _, r := range runs {
		fmt.Fprintln(tw, strings.Join(r.cells(classes), "\t"))
	}
	_ = tw.Flush()
}

func printBaseline(w io.Writer, g *generatorConfig, runs []baselineRun) {
	if len(runs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(baselineClassHeader, "\t"))
	for _, r := range classRows(g, runs) {
		fmt.Fprintln(tw, strings.Join(r.cells(), "\t"))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	printBaselineRuns(w, g.classes(), runs)
}

// markdownTable writes a header and rows as a Markdown table.
func markdownTable(b *strings.Builder, header []string, rows [][]string) {
	fmt.Fprintln(b, "| "+strings.Join(header, " | ")+" |")
	fmt.Fprintln(b, "|"+strings.Repeat("---|", len(header)))
	for _, r := range rows {
		fmt.Fprintln(b, "| "+strings.Join(r, " | ")+" |")
	}
}

// writeBaselineDoc replaces the baseline section of cfg.out (between its markers), leaving
// every other section alone; without the markers the section is appended.
func writeBaselineDoc(cfg baselineConfig, root string, g, full *generatorConfig, runs []baselineRun) error {
	var b strings.Builder
	fmt.Fprintln(&b, baselineBegin)
	fmt.Fprintf(&b, "Run on %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintln(&b, "```sh")
	fmt.Fprintln(&b, cfg.command)
	fmt.Fprintln(&b, "```")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| machine | |")
	fmt.Fprintln(&b, "|---|---|")
	for _, kv := range machineFacts(root) {
		fmt.Fprintf(&b, "| %s | %s |\n", kv[0], kv[1])
	}
	var sets []string
	for _, q := range g.queues()[:1] {
		for _, ws := range q.set.WorkloadsSets {
			for _, w := range ws.Workloads {
				sets = append(sets, fmt.Sprintf("%d × %s (%s GPU, %d ms, priority %d, every %d ms)", ws.Count, w.ClassName, w.Request, w.RuntimeMs, w.Priority, ws.CreationIntervalMs))
			}
		}
	}
	q0 := g.queues()[0].set
	fmt.Fprintf(&b, "| load | %s scaled by %g: %d of %d workloads; %d cohort(s) × %d ClusterQueues (nominal %s, borrowing limit %s GPUs, reclaimWithinCohort %s, withinClusterQueue %s); per ClusterQueue %s; %d fake nodes × %d GPUs |\n",
		cfg.generatorRelative, cfg.scale, g.workloads(), full.workloads(), countCohorts(g), len(g.queues())/max(1, countCohorts(g)),
		q0.NominalQuota, q0.BorrowingLimit, q0.ReclaimWithinCohort, q0.WithinClusterQueue, strings.Join(sets, ", "),
		max(1, (int(g.gpuCapacity())+cfg.gpusPerNode-1)/cfg.gpusPerNode), cfg.gpusPerNode)
	fmt.Fprintln(&b)
	var rows [][]string
	for _, r := range classRows(g, runs) {
		rows = append(rows, r.cells())
	}
	markdownTable(&b, baselineClassHeader, rows)
	fmt.Fprintln(&b)
	rows = nil
	for _, r := range runs {
		rows = append(rows, r.cells(g.classes()))
	}
	markdownTable(&b, runHeader(g.classes()), rows)
	fmt.Fprintln(&b, baselineEnd)

	path := cfg.out
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(path, []byte(replaceSection(string(old), baselineBegin, baselineEnd, b.String(),
		"## Kueue scheduler-performance baseline (`make bench-baseline`)")), 0o644)
}

// replaceSection puts section (which starts with begin and ends with end) in place of the
// text between the markers of doc; the begin marker matches without its parenthesized
// note, so that a hand-written "<!-- bench:baseline:begin -->" matches too. Without the markers the section is
// appended under heading.
func replaceSection(doc, begin, end, section, heading string) string {
	key, _, _ := strings.Cut(begin, " (")
	i := strings.Index(doc, key)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		if doc == "" {
			doc = "# Benchmarks\n"
		}
		return strings.TrimRight(doc, "\n") + "\n\n" + heading + "\n\n" + section
	}
	return doc[:i] + strings.TrimSuffix(section, "\n") + doc[j+len(end):]
}

// prefixWriter indents the cluster's start-up log under the run's heading.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	lines := strings.SplitAfter(string(b), "\n")
	var s strings.Builder
	for _, l := range lines {
		if l != "" {
			s.WriteString(p.prefix + l)
		}
	}
	if _, err := io.WriteString(p.w, s.String()); err != nil {
		return 0, err
	}
	return len(b), nil
}
