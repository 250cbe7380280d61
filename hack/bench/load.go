package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

const (
	queueName  = "bench"
	flavorName = "bench"
	// settle is how long, after the last Job completed, the load waits for the last
	// coverage changes to show on the Workloads.
	settle = 30 * time.Second
)

// benchResult is the termination message every pod of the results mode reports.
const benchResult = `{"version":"batchledger.dev/v1","shard":"s0","inputRevision":"D","modelRevision":"m-2026-11","output":"s3://bench/s0","digest":"sha256:0","records":1,"valid":1}`

// accounted says whether Job number i is named by an account in mode.
func accounted(mode string, i int) bool { return mode != modeMixed || i%10 == 0 }

// load is the load benchmark on its one cluster.
type load struct {
	cfg loadConfig
	cl  *cluster
	// pprofAddr is where the controller serves /debug/pprof; "" without --pprof.
	pprofAddr string
}

// loadResult is one mode and size's measurements.
type loadResult struct {
	mode                  string
	size                  size
	accounts              int
	pods                  int
	wall                  time.Duration
	cost                  sample
	jobChanges            int
	observed              int
	p50, p99, max         time.Duration
	samples, unmatched    int
	loadBefore, loadAfter string
}

// runLoad runs every mode at every size on one fresh cluster.
func runLoad(ctx context.Context, cfg loadConfig) error {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	if cfg.binary == "" {
		cfg.binary = filepath.Join(root, "bin", "batchledger")
	}
	l := &load{cfg: cfg}
	args := slices.Clone(cfg.controllerArgs)
	if cfg.pprofOut != "" {
		if l.pprofAddr, err = pprofAddress(); err != nil {
			return err
		}
		args = append(args, "--pprof-bind-address="+l.pprofAddr)
	}
	fmt.Fprintln(os.Stderr, "starting a fresh local cluster (stopped at the end)")
	l.cl, err = startCluster(ctx, clusterSpec{nodePrefix: "kwok-bench", flavor: flavorName, nodes: cfg.nodes, gpusPerNode: cfg.gpus,
		binary: cfg.binary, controllerArgs: args, controllerEnv: cfg.controllerEnv, log: os.Stderr})
	if err != nil {
		return err
	}
	defer l.cl.stop("bench")
	fmt.Fprintf(os.Stderr, "cluster ready in %s\n", l.cl.StartupDuration.Round(10*time.Millisecond))
	if cfg.watchFloor {
		stopFloor, err := startWatchFloor(ctx, l.cl, cfg.controllerEnv)
		if err != nil {
			return err
		}
		defer stopFloor()
	}
	if err := l.queues(ctx); err != nil {
		return err
	}
	var results []loadResult
	for mi, mode := range cfg.modes {
		for i, sz := range cfg.sizes {
			fmt.Fprintf(os.Stderr, "== mode %s, size %s: %d Jobs x %d indexes\n", mode, sz, sz.jobs, sz.indexes)
			last := mi == len(cfg.modes)-1 && i == len(cfg.sizes)-1
			r, err := l.runSize(ctx, mode, sz, last && l.pprofAddr != "")
			if err != nil {
				writeText(os.Stdout, loadTable(results))
				return fmt.Errorf("mode %s, size %s: %w", mode, sz, err)
			}
			results = append(results, r)
			writeText(os.Stderr, loadTable(results[len(results)-1:]))
			writeText(os.Stderr, loadDetailTable(results[len(results)-1:]))
		}
	}
	fmt.Println()
	writeText(os.Stdout, loadTable(results))
	fmt.Println()
	writeText(os.Stdout, loadDetailTable(results))
	if cfg.out != "" {
		if err := writeLoadDoc(cfg, root, results); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", cfg.out)
	}
	return nil
}

// queues creates the ResourceFlavor and a ClusterQueue with the whole GPU capacity.
func (l *load) queues(ctx context.Context) error {
	gpus := strconv.Itoa(l.cfg.nodes * l.cfg.gpus)
	return l.cl.createQueues(ctx,
		wrappers.MakeResourceFlavor(flavorName).NodeLabel(localcluster.GPUTypeLabel, flavorName).Obj(),
		wrappers.MakeClusterQueue(queueName).ResourceGroup(wrappers.GPUFlavorQuotas(flavorName, "2000", "16Ti", gpus)).Obj())
}

// naming is one Job an account names.
type naming struct{ account, job string }

// plan is the Jobs of one mode and size, the accounts naming them (jobsPerAccount each)
// and which Job each names.
func (l *load) plan(mode string, sz size, ns string) (accounts []*v1alpha1.BatchAccount, jobs []*batchv1.Job, names []naming) {
	par := min(sz.indexes, l.cfg.parallelism)
	newJob := func(name string) *batchv1.Job {
		w := wrappers.MakeJob(name, ns).Indexed(int32(sz.indexes)).Parallelism(int32(par)).
			Queue(queueName).GPU(1).
			PodAnnotation(kwok.AutoExitCodeAnnotation, "0").
			PodAnnotation(kwok.AutoExitDelayAnnotation, l.cfg.exitDelay.String())
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
	for first := 0; first < len(named); first += l.cfg.jobsPerAccount {
		n := min(l.cfg.jobsPerAccount, len(named)-first)
		name := fmt.Sprintf("a-%03d", len(accounts))
		ba := wrappers.MakeBatchAccount(name, ns).ShardCount("s", int32(n*sz.indexes))
		for k, job := range named[first : first+n] {
			names = append(names, naming{name, job})
			off := k * sz.indexes
			// indexset formats a single index as "3", never "3-3", which the
			// validating webhook refuses.
			ba.AssignJobOrdinals(job, indexset.Range(0, sz.indexes-1).String(), indexset.Range(off, off+sz.indexes-1).String())
		}
		if mode == modeResults {
			ba.RequireResults("result.records >= 0")
		}
		accounts = append(accounts, ba.Obj())
	}
	return accounts, jobs, names
}

// runSize runs one mode and size in a namespace of its own: watches first, then the
// accounts and Jobs, until every Job finished and its coverage showed (or settle passed).
func (l *load) runSize(ctx context.Context, mode string, sz size, profile bool) (loadResult, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.timeout)
	defer cancel()
	c := l.cl.c
	ns := "bench-" + mode + "-" + sz.String()
	res := loadResult{mode: mode, size: sz, pods: sz.jobs * sz.indexes, loadBefore: loadavg()}
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, wrappers.MakeLocalQueue(queueName, ns).ClusterQueue(queueName).Obj()} {
		if err := c.Create(ctx, o); err != nil {
			return res, err
		}
	}
	rec := newRecorder()
	accounts, jobs, names := l.plan(mode, sz, ns)
	res.accounts = len(accounts)
	nameAll := func() {
		for _, n := range names {
			rec.name(n.account, n.job)
		}
	}

	wctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	startWatch(wctx, &wg, errs, l.cl, ns, &batchv1.JobList{}, rec.job)
	startWatch(wctx, &wg, errs, l.cl, ns, &kueue.WorkloadList{}, rec.workload)
	startWatch(wctx, &wg, errs, l.cl, ns, &v1alpha1.BatchAccountList{}, rec.account)
	startWatch(wctx, &wg, errs, l.cl, ns, &corev1.PodList{}, func(p *corev1.Pod, _ time.Time) { rec.pod(p) })

	before, err := l.cl.sampler.take()
	if err != nil {
		return res, err
	}
	// The profile covers the window from its start: the creates, and the webhook calls
	// they make, are part of what the controller costs.
	var profiled sync.WaitGroup
	defer profiled.Wait()
	if profile {
		profiled.Go(func() {
			if err := cpuProfile(ctx, http.DefaultClient, "http://"+l.pprofAddr, "the controller", l.cfg.pprofSeconds, l.cfg.pprofOut); err != nil {
				fmt.Fprintln(os.Stderr, "bench: CPU profile:", err)
			}
		})
	}
	start := time.Now()
	createAccounts := func() error {
		for _, ba := range accounts {
			if err := c.Create(ctx, ba); err != nil {
				return fmt.Errorf("BatchAccount %s: %w", ba.Name, err)
			}
		}
		return nil
	}
	if mode != modeLate {
		nameAll()
		if err := createAccounts(); err != nil {
			return res, err
		}
	}
	for _, j := range jobs {
		if err := c.Create(ctx, j); err != nil {
			return res, fmt.Errorf("Job %s: %w", j.Name, err)
		}
	}
	if mode == modeLate {
		// Each account comes once its Jobs completed an index: they run unlabelled, and
		// the latency counts only the changes after the account exists.
		if err := poll(ctx, l.cfg.timeout, func() (bool, error) { return rec.started() == len(jobs), nil }); err != nil {
			return res, fmt.Errorf("waiting for the Jobs to complete an index: %w", err)
		}
		if err := createAccounts(); err != nil {
			return res, err
		}
		nameAll()
	}
	lastReport := time.Now()
	err = poll(ctx, l.cfg.timeout, func() (bool, error) {
		select {
		case err := <-errs:
			return false, err
		default:
		}
		if time.Since(lastReport) > 30*time.Second {
			done, changes := rec.progress()
			fmt.Fprintf(os.Stderr, "  %s: %d/%d Jobs finished, %d Job status changes\n", time.Since(start).Round(time.Second), done, len(jobs), changes)
			lastReport = time.Now()
		}
		return rec.allDone(len(jobs)), nil
	})
	if err != nil {
		return res, fmt.Errorf("waiting for the Jobs to finish: %w (pods by phase: %s)", err, l.cl.podPhases(ns))
	}
	res.wall = time.Since(start)
	// Let the last coverage changes reach the Workloads, then let the controller go idle.
	_ = poll(ctx, settle, func() (bool, error) {
		_, unmatched := rec.latencies()
		return unmatched == 0, nil
	})
	time.Sleep(2 * time.Second)
	after, err := l.cl.sampler.take()
	if err != nil {
		return res, err
	}
	stopWatches()
	wg.Wait()
	res.cost = after.minus(before)
	res.jobChanges, res.observed = rec.observed(len(accounts))
	lat, unmatched := rec.latencies()
	res.samples, res.unmatched = len(lat), unmatched
	res.p50, res.p99, res.max = percentile(lat, 0.50), percentile(lat, 0.99), percentile(lat, 1)
	res.loadAfter = loadavg()
	return res, nil
}
