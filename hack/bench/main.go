// Command bench is `make bench`, the load benchmark of issue 8: it starts a fresh local
// cluster (Kubernetes, Kueue, JobSet, kwok nodes and the batchledger controller), owned by
// this process and stopped at the end, and for each size runs BatchAccounts over Indexed
// Jobs submitted through a Kueue LocalQueue, their pods finished by kwok's auto-exit stage.
// For each size it measures, over the same window:
//
//   - CPU seconds of the batchledger controller and of kube-controller-manager (utime+stime
//     from /proc/<pid>/stat, pids from the cluster's pid files) and their ratio;
//   - the controller's peak RSS (VmHWM of /proc/<pid>/status; a high-water mark since
//     the controller started, so cumulative over the sizes run so far);
//   - BatchAccount status writes (the controller's metrics endpoint) per Job status change
//     observed by a watch;
//   - the latency from a Job's status.completedIndexes change (watch time) to the first
//     time its Workload's batchledger.dev/ShardsCovered message shows the account's
//     covered count including that change (watch time): p50 and p99.
//
// It prints a table and, with --out, rewrites the load section of docs/benchmarks.md.
//
//	go run ./hack/bench --sizes=5x10,20x50 --exit-delay=1s
//
// `go run ./hack/bench baseline` instead runs Kueue's scheduler-performance baseline,
// scaled, with and without batchledger (see baseline.go).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/internal/testsupport/scrape"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

const (
	queueName  = "bench"
	flavorName = "bench"
	// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on Linux).
	clockTicks = 100
	// settle is how long, after the last Job completed, the benchmark waits for the last
	// coverage changes to show on the Workloads.
	settle = 30 * time.Second
)

// config holds the flags.
type config struct {
	sizes          []size
	jobsPerAccount int
	parallelism    int
	exitDelay      time.Duration
	nodes, gpus    int
	binary         string
	out            string
	timeout        time.Duration
	command        string
	pprofOut       string
	pprofSeconds   int
	modes          []string
}

// Modes of the load benchmark: which Jobs accounts name, and whether they require results.
const (
	// modeCoverage: every Job is named by an account that counts coverage only.
	modeCoverage = "coverage"
	// modeResults: every Job is named by an account requiring results: its pods are
	// held by the pod webhook, their termination messages captured, then released.
	modeResults = "results"
	// modeMixed: only one Job in ten is named by an account (coverage only); the others
	// run as if batchledger were not installed.
	modeMixed = "mixed"
)

// benchResult is the termination message every pod of the results mode reports.
const benchResult = `{"version":"batchledger.dev/v1","shard":"s0","inputRevision":"D","modelRevision":"m-2026-11","output":"s3://bench/s0","digest":"sha256:0","records":1,"valid":1}`

// accounted says whether Job number i is named by an account in mode.
func accounted(mode string, i int) bool { return mode != modeMixed || i%10 == 0 }

// size is one benchmark size: jobs Indexed Jobs of indexes completions each.
type size struct{ jobs, indexes int }

func (s size) String() string { return fmt.Sprintf("%dx%d", s.jobs, s.indexes) }

func main() {
	if len(os.Args) > 1 && os.Args[1] == "baseline" {
		os.Exit(baselineMain(os.Args[2:]))
	}
	var cfg config
	sizes := flag.String("sizes", "5x10,20x50,40x100", "comma-separated sizes JOBSxINDEXES, run in order on one cluster")
	flag.IntVar(&cfg.jobsPerAccount, "jobs-per-account", 5, "Jobs per BatchAccount (N accounts = ceil(jobs / this))")
	flag.IntVar(&cfg.parallelism, "parallelism", 10, "parallelism of each Job (capped at its indexes)")
	flag.DurationVar(&cfg.exitDelay, "exit-delay", time.Second, "how long each pod runs before kwok finishes it (auto-exit-delay)")
	flag.IntVar(&cfg.nodes, "nodes", 4, "fake GPU nodes")
	flag.IntVar(&cfg.gpus, "gpus-per-node", 64, "nvidia.com/gpu per node; the ClusterQueue's GPU quota is nodes x this")
	flag.StringVar(&cfg.binary, "binary", "", "batchledger controller binary (default <repo>/bin/batchledger)")
	flag.StringVar(&cfg.out, "out", "", "when set (docs/benchmarks.md), rewrite the load section of this Markdown file")
	flag.DurationVar(&cfg.timeout, "timeout", 15*time.Minute, "limit for one size")
	flag.StringVar(&cfg.pprofOut, "pprof", "", "when set, run the controller with --pprof-bind-address and write a CPU profile of the last size to this file")
	flag.IntVar(&cfg.pprofSeconds, "pprof-seconds", 60, "length of the --pprof CPU profile, started when the last size's Jobs are created")
	modes := flag.String("modes", modeCoverage, "comma-separated modes, each run at every size: coverage (accounts count coverage), results (accounts require results), mixed (one Job in ten has an account)")
	flag.Parse()
	var err error
	for _, m := range strings.Split(*modes, ",") {
		if m != modeCoverage && m != modeResults && m != modeMixed {
			fmt.Fprintf(os.Stderr, "bench: --modes: unknown mode %q\n", m)
			os.Exit(2)
		}
		cfg.modes = append(cfg.modes, m)
	}
	if cfg.sizes, err = parseSizes(*sizes); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	cfg.command = "go run ./hack/bench " + strings.Join(os.Args[1:], " ")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseSizes(s string) ([]size, error) {
	var out []size
	for f := range strings.SplitSeq(s, ",") {
		j, k, ok := strings.Cut(strings.TrimSpace(f), "x")
		jobs, err1 := strconv.Atoi(j)
		idx, err2 := strconv.Atoi(k)
		if !ok || err1 != nil || err2 != nil || jobs < 1 || idx < 1 {
			return nil, fmt.Errorf("size %q: want JOBSxINDEXES", f)
		}
		out = append(out, size{jobs, idx})
	}
	return out, nil
}

// bench holds the running cluster.
type bench struct {
	cfg     config
	cl      *localcluster.Cluster
	c       client.WithWatch
	metrics string // URL of the controller's metrics endpoint
}

// result is one size's measurements.
type result struct {
	mode                  string
	size                  size
	accounts              int
	pods                  int
	wall                  time.Duration
	blCPU, kcmCPU         float64
	peakRSSMiB            float64
	statusWrites          float64
	workloadWrites        float64
	reconciles            float64
	jobChanges            int
	observed              int
	p50, p99, max         time.Duration
	samples, unmatched    int
	loadBefore, loadAfter string
}

func run(ctx context.Context, cfg config) error {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	if cfg.binary == "" {
		cfg.binary = filepath.Join(root, "bin", "batchledger")
	}
	m, err := localcluster.BatchledgerManager(cfg.binary)
	if err != nil {
		return err
	}
	var nodes []localcluster.NodeSpec
	for i := range cfg.nodes {
		nodes = append(nodes, localcluster.NodeSpec{
			Name: fmt.Sprintf("kwok-bench-%d", i), Labels: map[string]string{localcluster.GPUTypeLabel: flavorName},
			GPUs: cfg.gpus, CPU: "512", Memory: "4Ti",
		})
	}
	fmt.Fprintln(os.Stderr, "starting a fresh local cluster (stopped at the end)")
	if cfg.pprofOut != "" {
		port, err := freePort()
		if err != nil {
			return err
		}
		pprofAddr = fmt.Sprintf("127.0.0.1:%d", port)
		if m, err = localcluster.BatchledgerManager(cfg.binary, "--pprof-bind-address="+pprofAddr); err != nil {
			return err
		}
	}
	cl, err := localcluster.Start(ctx, localcluster.Options{Nodes: nodes, Managers: []localcluster.Manager{m}, Log: os.Stderr})
	if err != nil {
		return err
	}
	defer func() {
		if err := cl.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: stopping the cluster:", err)
		}
	}()
	s := scheme.Must()
	cfg.binary, _ = filepath.Abs(cfg.binary)
	c, err := client.NewWithWatch(cl.RESTConfig, client.Options{Scheme: s})
	if err != nil {
		return err
	}
	env, ok := cl.ManagerEnv(localcluster.BatchledgerName)
	if !ok {
		return errors.New("batchledger is not running")
	}
	b := &bench{cfg: cfg, cl: cl, c: c, metrics: env.MetricsURL()}
	fmt.Fprintf(os.Stderr, "cluster ready in %s\n", cl.StartupDuration.Round(10*time.Millisecond))
	if err := b.queues(ctx); err != nil {
		return err
	}
	var results []result
	for mi, mode := range cfg.modes {
		for i, sz := range cfg.sizes {
			fmt.Fprintf(os.Stderr, "== mode %s, size %s: %d Jobs x %d indexes\n", mode, sz, sz.jobs, sz.indexes)
			last := mi == len(cfg.modes)-1 && i == len(cfg.sizes)-1
			r, err := b.runSize(ctx, mode, sz, last && pprofAddr != "")
			if err != nil {
				printTable(os.Stdout, results)
				return fmt.Errorf("mode %s, size %s: %w", mode, sz, err)
			}
			results = append(results, r)
			printTable(os.Stderr, results[len(results)-1:])
		}
	}
	fmt.Println()
	printTable(os.Stdout, results)
	if cfg.out != "" {
		if err := writeDoc(cfg, root, results); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", cfg.out)
	}
	return nil
}

// queues creates the ResourceFlavor and a ClusterQueue with the whole GPU capacity.
func (b *bench) queues(ctx context.Context) error {
	gpus := strconv.Itoa(b.cfg.nodes * b.cfg.gpus)
	for _, obj := range []client.Object{
		wrappers.MakeResourceFlavor(flavorName).NodeLabel(localcluster.GPUTypeLabel, flavorName).Obj(),
		wrappers.MakeClusterQueue(queueName).ResourceGroup(wrappers.GPUFlavorQuotas(flavorName, "2000", "16Ti", gpus)).Obj(),
	} {
		if err := b.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return poll(ctx, time.Minute, func() (bool, error) {
		var cq kueue.ClusterQueue
		err := b.c.Get(ctx, client.ObjectKey{Name: queueName}, &cq)
		return err == nil && apimeta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive), client.IgnoreNotFound(err)
	})
}

// snapshot is the cumulative counters at one moment.
type snapshot struct {
	blCPU, kcmCPU, rssMiB              float64
	statusWrites, wlWrites, reconciles float64
}

func (b *bench) snapshot() (snapshot, error) {
	var s snapshot
	blPID, err := pidOf(b.cl.StateDir, localcluster.BatchledgerName)
	if err != nil {
		return s, err
	}
	if s.blCPU, err = cpuSeconds(blPID); err != nil {
		return s, err
	}
	if s.kcmCPU, err = componentCPU(b.cl.StateDir, "kube-controller-manager"); err != nil {
		return s, err
	}
	if s.rssMiB, err = peakRSSMiB(blPID); err != nil {
		return s, err
	}
	c, err := b.controllerCounters()
	if err != nil {
		return s, err
	}
	s.statusWrites, s.wlWrites, s.reconciles = c.statusWrites, c.wlWrites, c.reconciles
	return s, nil
}

// controllerCounters are the batchledger controller's write and reconcile counters.
type controllerCounters struct{ statusWrites, wlWrites, reconciles float64 }

func (b *bench) controllerCounters() (controllerCounters, error) {
	f, err := scrape.Get(context.Background(), b.metrics)
	if err != nil {
		return controllerCounters{}, err
	}
	c := f.Controller()
	return controllerCounters{statusWrites: c.StatusWrites, wlWrites: c.WorkloadWrites, reconciles: c.Reconciles}, nil
}

// componentCPU is the CPU seconds so far of a cluster component, found by its pid file.
func componentCPU(stateDir, name string) (float64, error) {
	pid, err := pidOf(stateDir, name)
	if err != nil {
		return 0, err
	}
	return cpuSeconds(pid)
}

// coverageEvent is a Job's completedIndexes change: at t the account of job had expected
// shards covered, as far as the watch has seen.
type coverageEvent struct {
	job      string
	t        time.Time
	expected int
}

// coverageShown is a change of the covered count in a Workload's ShardsCovered message.
type coverageShown struct {
	t       time.Time
	covered int
}

// recorder collects what the watches see during one size.
type recorder struct {
	mu         sync.Mutex
	accountOf  map[string]string         // job name -> account name
	completed  map[string]map[string]int // account -> job -> completed index count
	jobStatus  map[string]batchv1.JobStatus
	jobChanges int
	done       map[string]bool // jobs with a Complete or Failed condition
	events     []coverageEvent
	shown      map[string][]coverageShown // job name -> covered counts its Workload showed
	// Everything else the accounts read, so that writes can be set against every observed
	// change: Workload status changes other than batchledger's own conditions (creation
	// included), and pods turning Succeeded (each is an attempt the account counts).
	wlStatus     map[string]kueue.WorkloadStatus
	wlChanges    int
	podSucceeded map[types.UID]bool
}

var coveredRE = regexp.MustCompile(`: (\d+)/(\d+) shards covered`)

func (r *recorder) job(j *batchv1.Job, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, seen := r.jobStatus[j.Name]
	if seen && equality.Semantic.DeepEqual(prev, j.Status) {
		return
	}
	if seen || !equality.Semantic.DeepEqual(j.Status, batchv1.JobStatus{}) {
		r.jobChanges++
	}
	r.jobStatus[j.Name] = *j.Status.DeepCopy()
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			r.done[j.Name] = true
		}
	}
	if j.Status.CompletedIndexes == prev.CompletedIndexes {
		return
	}
	set, err := indexset.Parse(j.Status.CompletedIndexes)
	if err != nil {
		return
	}
	acct, named := r.accountOf[j.Name]
	if !named {
		return // a Job no account names: no coverage to show
	}
	r.completed[acct][j.Name] = set.Count()
	total := 0
	for _, n := range r.completed[acct] {
		total += n
	}
	r.events = append(r.events, coverageEvent{job: j.Name, t: now, expected: total})
}

// observedWorkload counts a change of what the account reads from a Workload.
func (r *recorder) observedWorkload(wl *kueue.Workload) {
	st := *wl.Status.DeepCopy()
	st.Conditions = slices.DeleteFunc(st.Conditions, func(c metav1.Condition) bool {
		return strings.HasPrefix(c.Type, "batchledger.dev/")
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, seen := r.wlStatus[wl.Name]; seen && equality.Semantic.DeepEqual(prev, st) {
		return
	}
	r.wlStatus[wl.Name] = st
	r.wlChanges++
}

// pod counts a pod's first Succeeded observation.
func (r *recorder) pod(p *corev1.Pod) {
	if p.Status.Phase != corev1.PodSucceeded {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.podSucceeded[p.UID] = true
}

func (r *recorder) workload(wl *kueue.Workload, now time.Time) {
	r.observedWorkload(wl)
	job := ""
	for _, o := range wl.OwnerReferences {
		if o.Kind == "Job" {
			job = o.Name
		}
	}
	c := apimeta.FindStatusCondition(wl.Status.Conditions, v1alpha1.WorkloadConditionShardsCovered)
	if job == "" || c == nil {
		return
	}
	m := coveredRE.FindStringSubmatch(c.Message)
	if m == nil {
		return
	}
	n, _ := strconv.Atoi(m[1])
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.shown[job]; len(s) > 0 && s[len(s)-1].covered == n {
		return
	}
	r.shown[job] = append(r.shown[job], coverageShown{t: now, covered: n})
}

// latencies matches each coverage event with the first Workload observation showing at
// least the expected count; unmatched counts events never shown.
func (r *recorder) latencies() (out []time.Duration, unmatched int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		i := slices.IndexFunc(r.shown[e.job], func(s coverageShown) bool { return s.covered >= e.expected })
		if i < 0 {
			unmatched++
			continue
		}
		out = append(out, max(0, r.shown[e.job][i].t.Sub(e.t)))
	}
	return out, unmatched
}

func (r *recorder) allDone(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.done) == n
}

func (b *bench) runSize(ctx context.Context, mode string, sz size, profile bool) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.timeout)
	defer cancel()
	ns := "bench-" + mode + "-" + sz.String()
	res := result{mode: mode, size: sz, pods: sz.jobs * sz.indexes, loadBefore: loadavg()}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return res, err
	}
	if err := b.c.Create(ctx, wrappers.MakeLocalQueue(queueName, ns).ClusterQueue(queueName).Obj()); err != nil {
		return res, err
	}
	rec := &recorder{
		accountOf: map[string]string{}, completed: map[string]map[string]int{},
		jobStatus: map[string]batchv1.JobStatus{}, done: map[string]bool{}, shown: map[string][]coverageShown{},
		wlStatus: map[string]kueue.WorkloadStatus{}, podSucceeded: map[types.UID]bool{},
	}
	var accounts []*v1alpha1.BatchAccount
	var jobs []*batchv1.Job
	par := min(sz.indexes, b.cfg.parallelism)
	newJob := func(name string) *batchv1.Job {
		w := wrappers.MakeJob(name, ns).Indexed(int32(sz.indexes)).Parallelism(int32(par)).
			Queue(queueName).GPU(1).
			PodAnnotation(kwok.AutoExitCodeAnnotation, "0").
			PodAnnotation(kwok.AutoExitDelayAnnotation, b.cfg.exitDelay.String())
		if mode == modeResults {
			// One message for every pod (a pod template cannot vary it by index): each is
			// captured and judged, most as a claim of another shard, which costs the same.
			w.PodAnnotation(kwok.TerminationMessageAnnotation, benchResult)
		}
		return w.Obj()
	}
	var named []string
	for i := range sz.jobs {
		job := fmt.Sprintf("j-%03d", i)
		jobs = append(jobs, newJob(job))
		if accounted(mode, i) {
			named = append(named, job)
		}
	}
	for first := 0; first < len(named); first += b.cfg.jobsPerAccount {
		n := min(b.cfg.jobsPerAccount, len(named)-first)
		name := fmt.Sprintf("a-%03d", len(accounts))
		ba := wrappers.MakeBatchAccount(name, ns).ShardCount("s", int32(n*sz.indexes))
		rec.completed[name] = map[string]int{}
		for k, job := range named[first : first+n] {
			rec.accountOf[job] = name
			off := k * sz.indexes
			ba.AssignJobOrdinals(job, fmt.Sprintf("0-%d", sz.indexes-1), fmt.Sprintf("%d-%d", off, off+sz.indexes-1))
		}
		if mode == modeResults {
			ba.RequireResults("result.records >= 0")
		}
		accounts = append(accounts, ba.Obj())
	}
	res.accounts = len(accounts)

	wctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, w := range []struct {
		list client.ObjectList
		fn   func(runtime.Object, time.Time)
	}{
		{&batchv1.JobList{}, func(o runtime.Object, t time.Time) {
			if j, ok := o.(*batchv1.Job); ok {
				rec.job(j, t)
			}
		}},
		{&kueue.WorkloadList{}, func(o runtime.Object, t time.Time) {
			if wl, ok := o.(*kueue.Workload); ok {
				rec.workload(wl, t)
			}
		}},
		{&corev1.PodList{}, func(o runtime.Object, _ time.Time) {
			if p, ok := o.(*corev1.Pod); ok {
				rec.pod(p)
			}
		}},
	} {
		ready := make(chan struct{})
		wg.Go(func() {
			if err := b.watch(wctx, ns, w.list, ready, w.fn); err != nil && wctx.Err() == nil {
				errs <- err
			}
		})
		<-ready
	}

	before, err := b.snapshot()
	if err != nil {
		return res, err
	}
	start := time.Now()
	for _, ba := range accounts {
		if err := b.c.Create(ctx, ba); err != nil {
			return res, fmt.Errorf("BatchAccount %s: %w", ba.Name, err)
		}
	}
	for _, j := range jobs {
		if err := b.c.Create(ctx, j); err != nil {
			return res, fmt.Errorf("Job %s: %w", j.Name, err)
		}
	}
	var profiled sync.WaitGroup
	defer profiled.Wait()
	if profile {
		profiled.Go(func() {
			if err := b.cpuProfile(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "bench: CPU profile:", err)
			}
		})
	}
	lastReport := time.Now()
	err = poll(ctx, b.cfg.timeout, func() (bool, error) {
		select {
		case err := <-errs:
			return false, err
		default:
		}
		if time.Since(lastReport) > 30*time.Second {
			rec.mu.Lock()
			fmt.Fprintf(os.Stderr, "  %s: %d/%d Jobs finished, %d Job status changes\n", time.Since(start).Round(time.Second), len(rec.done), len(jobs), rec.jobChanges)
			rec.mu.Unlock()
			lastReport = time.Now()
		}
		return rec.allDone(len(jobs)), nil
	})
	if err != nil {
		return res, fmt.Errorf("waiting for the Jobs to finish: %w (pods by phase: %s)", err, b.podPhases(ns))
	}
	res.wall = time.Since(start)
	// Let the last coverage changes reach the Workloads, then let the controller go idle.
	_ = poll(ctx, settle, func() (bool, error) {
		_, unmatched := rec.latencies()
		return unmatched == 0, nil
	})
	time.Sleep(2 * time.Second)
	after, err := b.snapshot()
	if err != nil {
		return res, err
	}
	stopWatches()
	wg.Wait()
	res.blCPU = after.blCPU - before.blCPU
	res.kcmCPU = after.kcmCPU - before.kcmCPU
	res.peakRSSMiB = after.rssMiB
	res.statusWrites = after.statusWrites - before.statusWrites
	res.workloadWrites = after.wlWrites - before.wlWrites
	res.reconciles = after.reconciles - before.reconciles
	rec.mu.Lock()
	res.jobChanges = rec.jobChanges
	// Every account's creation, Job status change, Workload change and pod success.
	res.observed = len(accounts) + rec.jobChanges + rec.wlChanges + len(rec.podSucceeded)
	rec.mu.Unlock()
	lat, unmatched := rec.latencies()
	res.samples, res.unmatched = len(lat), unmatched
	res.p50, res.p99, res.max = percentile(lat, 0.50), percentile(lat, 0.99), percentile(lat, 1)
	res.loadAfter = loadavg()
	return res, nil
}

// watch lists then watches list's kind in ns, handing every object to fn with the time
// it arrived, and resumes from the last resourceVersion when the server ends the watch.
func (b *bench) watch(ctx context.Context, ns string, list client.ObjectList, ready chan<- struct{}, fn func(runtime.Object, time.Time)) error {
	if err := b.c.List(ctx, list, client.InNamespace(ns)); err != nil {
		close(ready)
		return err
	}
	rv := list.(metav1.ListInterface).GetResourceVersion()
	first := true
	for ctx.Err() == nil {
		w, err := b.c.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if first {
			close(ready)
			first = false
		}
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			now := time.Now()
			if ev.Type == watch.Error {
				w.Stop()
				return fmt.Errorf("watch: %v", apierrors.FromObject(ev.Object))
			}
			if o, ok := ev.Object.(metav1.Object); ok {
				rv = o.GetResourceVersion()
			}
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				fn(ev.Object, now)
			}
		}
		w.Stop()
	}
	return nil
}

func poll(ctx context.Context, limit time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// pidOf reads a component's pid from the cluster's pid file (<state>/pids/<name>.json).
func pidOf(stateDir, name string) (int, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, "pids", name+".json"))
	if err != nil {
		return 0, err
	}
	var rec struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(data, &rec); err != nil || rec.PID <= 0 {
		return 0, fmt.Errorf("pid file of %s: %v", name, err)
	}
	return rec.PID, nil
}

// cpuSeconds is utime+stime of a process, in seconds.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64) // field 14
	stime, err2 := strconv.ParseFloat(f[12], 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime", pid)
	}
	return (utime + stime) / clockTicks, nil
}

// peakRSSMiB is VmHWM of a process, in MiB.
func peakRSSMiB(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// tableHeader and tableRow are shared by the terminal and the Markdown table.
var tableHeader = []string{"mode", "size", "accounts", "jobs", "indexes", "pods/s", "batchledger CPU s", "kcm CPU s",
	"ratio", "peak RSS MiB", "status writes", "Job status changes", "writes/change", "observed changes", "writes/observed", "latency p50/p99 ms", "load avg (before → after)"}

func tableRow(r result) []string {
	ratio, perChange, perObserved := "-", "-", "-"
	if r.kcmCPU > 0 {
		ratio = fmt.Sprintf("%.1f%%", 100*r.blCPU/r.kcmCPU)
	}
	if r.jobChanges > 0 {
		perChange = fmt.Sprintf("%.2f", r.statusWrites/float64(r.jobChanges))
	}
	if r.observed > 0 {
		perObserved = fmt.Sprintf("%.2f", r.statusWrites/float64(r.observed))
	}
	lat := ms(r.p50) + " / " + ms(r.p99)
	if r.unmatched > 0 {
		lat += fmt.Sprintf(" (%d of %d never shown)", r.unmatched, r.unmatched+r.samples)
	}
	return []string{r.mode, r.size.String(), strconv.Itoa(r.accounts), strconv.Itoa(r.size.jobs), strconv.Itoa(r.size.indexes),
		fmt.Sprintf("%.1f", float64(r.pods)/r.wall.Seconds()),
		fmt.Sprintf("%.2f", r.blCPU), fmt.Sprintf("%.2f", r.kcmCPU), ratio, fmt.Sprintf("%.1f", r.peakRSSMiB),
		fmt.Sprintf("%.0f", r.statusWrites), strconv.Itoa(r.jobChanges), perChange, strconv.Itoa(r.observed), perObserved, lat,
		r.loadBefore + " → " + r.loadAfter}
}

func printTable(w io.Writer, results []result) {
	if len(results) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(tableHeader, "\t"))
	for _, r := range results {
		fmt.Fprintln(tw, strings.Join(tableRow(r), "\t"))
	}
	_ = tw.Flush()
}

const (
	beginMarker = "<!-- bench:load:begin (written by hack/bench --out) -->"
	endMarker   = "<!-- bench:load:end -->"
)

// writeDoc replaces the load section of cfg.out (between the markers), creating the file
// when it does not exist.
func writeDoc(cfg config, root string, results []result) error {
	var b strings.Builder
	fmt.Fprintln(&b, beginMarker)
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
	fmt.Fprintf(&b, "| load | %d fake nodes x %d GPUs, ClusterQueue quota %d GPUs; %d Jobs per BatchAccount; Job parallelism %d; pods request 1 GPU and exit 0 after %s (kwok auto-exit) |\n",
		cfg.nodes, cfg.gpus, cfg.nodes*cfg.gpus, cfg.jobsPerAccount, cfg.parallelism, cfg.exitDelay)
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| "+strings.Join(tableHeader, " | ")+" |")
	fmt.Fprintln(&b, "|"+strings.Repeat("---|", len(tableHeader)))
	for _, r := range results {
		fmt.Fprintln(&b, "| "+strings.Join(tableRow(r), " | ")+" |")
	}
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| size | reconciles | Workload condition writes | latency samples | latency max ms | wall s |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %d | %s | %.1f |\n", r.size, r.reconciles, r.workloadWrites, r.samples, ms(r.max), r.wall.Seconds())
	}
	fmt.Fprintln(&b, endMarker)

	path := cfg.out
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	old, err := os.ReadFile(path)
	var doc string
	switch {
	case errors.Is(err, os.ErrNotExist):
		doc = "# Benchmarks\n\n## Load benchmark (`make bench`)\n\n" + b.String()
	case err != nil:
		return err
	default:
		s := string(old)
		i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
		if i < 0 || j < i {
			doc = strings.TrimRight(s, "\n") + "\n\n## Load benchmark (`make bench`)\n\n" + b.String()
		} else {
			doc = s[:i] + strings.TrimSuffix(b.String(), "\n") + s[j+len(endMarker):]
		}
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// machineFacts are the machine facts of localcluster.MachineFacts, naming the
// batchledger binary the benchmark ran too.
func machineFacts(root string) [][2]string {
	facts := localcluster.MachineFacts(root)
	facts[len(facts)-1][1] += "; batchledger " + filepath.Join("bin", "batchledger")
	return facts
}

// pprofAddr is where the controller serves /debug/pprof (--pprof-bind-address); empty
// without --pprof.
var pprofAddr string

// cpuProfile writes a CPU profile of the controller to --pprof.
func (b *bench) cpuProfile(ctx context.Context) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, b.cfg.pprofSeconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(b.cfg.pprofOut)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote a %ds CPU profile of the controller to %s (go tool pprof -top %s)\n", b.cfg.pprofSeconds, b.cfg.pprofOut, b.cfg.pprofOut)
	return f.Close()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// podPhases counts a namespace's pods by phase, for the error of a size that never ends.
func (b *bench) podPhases(ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := b.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	n := map[corev1.PodPhase]int{}
	for _, p := range pods.Items {
		n[p.Status.Phase]++
	}
	return fmt.Sprint(n)
}
