package main

// `go run ./hack/bench baseline` rides beside Kueue's scheduler-performance baseline
// (generator.go): the same cohorts, ClusterQueues, quotas, preemption policies and workload
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
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

const (
	baselineFlavor = "baseline"
	// jobClassLabel carries the workload class on the Job, for the reader of the cluster.
	jobClassLabel = "bench.batchledger.dev/class"
)

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
	mode          string
	round         int
	startup, wall time.Duration
	// window is how long the cost was measured: from just before the first create to
	// the last sample, after the settle (with batchledger: until its writes stop).
	window                          time.Duration
	submitted                       time.Duration // first create to the last Job's create call
	workloads, finished, readmitted int
	accounts                        int
	// admission and jobToFinish are per class.
	admission, jobToFinish map[string][]time.Duration
	// cost is the run's CPU seconds and, with batchledger, the controller's writes.
	cost                  sample
	loadBefore, loadAfter string
	timedOut              bool
	// floored: the watch floor ran beside the controller (cost.floorCPU is its CPU).
	floored bool
}

// runBaseline runs the scaled config cfg.rounds times in each mode, each run on a fresh
// cluster, and reports the admission times by class and the cost of each run.
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
	for i := range cfg.warmups {
		fmt.Fprintf(os.Stderr, "== warm-up %d, %s batchledger (not counted)\n", i+1, cfg.modes[0])
		r, err := runBaselineOnce(ctx, cfg, g, cfg.modes[0], 0)
		if err != nil {
			return fmt.Errorf("warm-up %d %s: %w", i+1, cfg.modes[0], err)
		}
		writeText(os.Stderr, baselineRunTable(g.classes(), []baselineRun{r}))
	}
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
			writeText(os.Stderr, baselineRunTable(g.classes(), runs[len(runs)-1:]))
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

// runBaselineOnce starts a fresh cluster, runs the whole scaled config once and stops the
// cluster.
func runBaselineOnce(parent context.Context, cfg baselineConfig, g *generatorConfig, mode string, round int) (baselineRun, error) {
	ctx, cancel := context.WithTimeout(parent, cfg.timeout)
	defer cancel()
	res := baselineRun{mode: mode, round: round, loadBefore: loadavg(),
		admission: map[string][]time.Duration{}, jobToFinish: map[string][]time.Duration{}}
	with := mode == modeWith
	spec := clusterSpec{nodePrefix: "kwok-baseline", flavor: baselineFlavor, nodes: g.nodes(cfg.gpusPerNode), gpusPerNode: cfg.gpusPerNode,
		log: prefixWriter{os.Stderr, "  "}, apiserverProfiling: cfg.apiPprof != ""}
	pprofAddr := ""
	if with {
		spec.binary = cfg.binary
		if cfg.pprof != "" {
			var err error
			if pprofAddr, err = pprofAddress(); err != nil {
				return res, err
			}
			spec.controllerArgs = []string{"--pprof-bind-address=" + pprofAddr}
		}
	}
	cl, err := startCluster(ctx, spec)
	if err != nil {
		return res, err
	}
	defer cl.stop("bench baseline")
	if with && cfg.watchFloor {
		stopFloor, err := startWatchFloor(ctx, cl, nil)
		if err != nil {
			return res, err
		}
		defer stopFloor()
		res.floored = true
	}
	res.startup = cl.StartupDuration
	c := cl.c
	queues := g.queues()
	if err := cl.createQueues(ctx, baselineQueues(queues)...); err != nil {
		return res, err
	}

	// Every Workload of the run, keyed by "<namespace>/<job>".
	var mu sync.Mutex
	recs := map[string]*wlRecord{}
	finished := 0
	var lastFinish time.Time
	onWorkload := func(wl *kueue.Workload, now time.Time) {
		job := ownerJob(wl)
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
	var wg sync.WaitGroup
	defer func() {
		stopWatch()
		wg.Wait()
	}()
	startWatch(wctx, &wg, watchErr, cl, "", &kueue.WorkloadList{}, onWorkload)

	before, err := cl.sampler.take()
	if err != nil {
		return res, err
	}
	start := time.Now()
	var profiled sync.WaitGroup
	defer profiled.Wait()
	if cfg.apiPprof != "" {
		profiled.Go(func() {
			path := fmt.Sprintf("%s-%s-r%d.pprof", cfg.apiPprof, mode, round)
			if err := cl.profileAPIServer(ctx, cfg.apiPprofSeconds, path); err != nil {
				fmt.Fprintln(os.Stderr, "bench: kube-apiserver CPU profile:", err)
			}
		})
	}
	if pprofAddr != "" {
		profiled.Go(func() {
			path := fmt.Sprintf("%s-r%d.pprof", cfg.pprof, round)
			if err := cpuProfile(ctx, http.DefaultClient, "http://"+pprofAddr, "the controller", cfg.pprofSeconds, path); err != nil {
				fmt.Fprintln(os.Stderr, "bench: controller CPU profile:", err)
			}
		})
	}
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
			s, err := cl.sampler.take()
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
	after, err := cl.sampler.take()
	if err != nil {
		return res, err
	}
	res.window = time.Since(start)
	stopWatch()
	res.cost = after.minus(before)
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

// baselineQueues are the ResourceFlavor, a WorkloadPriorityClass per priority, and every
// ClusterQueue with its namespace and LocalQueue.
func baselineQueues(queues []plannedQueue) []client.Object {
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
	return objs
}

// submitBaseline creates the workload's Job, in mode with after its BatchAccount (one
// shard for the Job's one index); created gets the time of the Job's create call. Mode
// paced creates a ConfigMap instead of the account: the same extra request before each
// Job, which slows the submission streams as much, without batchledger.
func submitBaseline(ctx context.Context, c client.Client, p plannedWorkload, mode string, created func(time.Time)) error {
	switch mode {
	case modeWith:
		ba := wrappers.MakeBatchAccount(p.job, p.ns).ShardCount("s", 1).AssignJobOrdinals(p.job, "0", "0").Obj()
		if err := c.Create(ctx, ba); err != nil {
			return fmt.Errorf("BatchAccount %s/%s: %w", p.ns, p.job, err)
		}
	case modePaced:
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
