package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/internal/testsupport/scrape"
	"batchledger.dev/batchledger/pkg/controller"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on Linux).
const clockTicks = 100

// sample is the cumulative cost counters of a cluster at one moment; the cost of a
// window is the later sample minus the earlier.
type sample struct {
	// CPU seconds so far of the controller, kube-controller-manager, Kueue, kube-apiserver
	// and the watch floor (0 without one).
	blCPU, kcmCPU, kueueCPU, apiCPU, floorCPU float64
	// peakRSSMiB is the controller's high-water mark, not a counter: minus keeps it.
	peakRSSMiB float64
	// The controller's counters.
	statusWrites, wlWrites, reconciles float64
	// The account controller's queue waits (ready in its workqueue until a worker took
	// it) and reconcile durations, from controller-runtime's histograms: their count,
	// sum (seconds), and the waits over one second.
	queueWaits, queueWaitSum, queueWaitsOver1s float64
	reconcileCount, reconcileSum               float64
	// releaserReconciles are the pod releaser's reconciles.
	releaserReconciles float64
	// wakeups are the account reconciles asked for, by source
	// (controller.MetricWakeups).
	wakeups map[string]float64
}

// minus is the cost between earlier and s.
func (s sample) minus(earlier sample) sample {
	return sample{
		blCPU: s.blCPU - earlier.blCPU, kcmCPU: s.kcmCPU - earlier.kcmCPU,
		kueueCPU: s.kueueCPU - earlier.kueueCPU, apiCPU: s.apiCPU - earlier.apiCPU,
		floorCPU:     s.floorCPU - earlier.floorCPU,
		peakRSSMiB:   s.peakRSSMiB,
		statusWrites: s.statusWrites - earlier.statusWrites, wlWrites: s.wlWrites - earlier.wlWrites,
		reconciles: s.reconciles - earlier.reconciles,
		queueWaits: s.queueWaits - earlier.queueWaits, queueWaitSum: s.queueWaitSum - earlier.queueWaitSum,
		queueWaitsOver1s: s.queueWaitsOver1s - earlier.queueWaitsOver1s,
		reconcileCount:   s.reconcileCount - earlier.reconcileCount, reconcileSum: s.reconcileSum - earlier.reconcileSum,
		releaserReconciles: s.releaserReconciles - earlier.releaserReconciles,
		wakeups:            wakeupsMinus(s.wakeups, earlier.wakeups),
	}
}

// wakeupsMinus is the wakeups by source between earlier and now.
func wakeupsMinus(now, earlier map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(now))
	for source, n := range now {
		if d := n - earlier[source]; d > 0 {
			out[source] = d
		}
	}
	return out
}

// wakeupsBySource reads controller.MetricWakeups, one value per source.
func wakeupsBySource(f scrape.Families) map[string]float64 {
	out := map[string]float64{}
	fam, ok := f[controller.MetricWakeups]
	if !ok {
		return out
	}
	for _, m := range fam.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "source" {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// sampler takes samples of one cluster: CPU from /proc (pids from the cluster's pid
// files) and, when the controller runs, its peak RSS and its counters (its metrics
// endpoint).
type sampler struct {
	stateDir string
	// metrics is the controller's metrics URL; "" when the run has no controller.
	metrics string
	// floorPID is the watch floor's process; 0 without one.
	floorPID int
}

// take reads every counter now. It is bound by its own short deadline, not by the run's:
// a run cut by its timeout still samples what it cost.
func (sm sampler) take() (sample, error) {
	var s sample
	type component struct {
		name string
		dst  *float64
	}
	components := []component{{"kube-controller-manager", &s.kcmCPU}, {"kueue", &s.kueueCPU}, {"kube-apiserver", &s.apiCPU}}
	if sm.metrics != "" {
		components = append(components, component{localcluster.BatchledgerName, &s.blCPU})
	}
	for _, c := range components {
		pid, err := pidOf(sm.stateDir, c.name)
		if err != nil {
			return s, err
		}
		if *c.dst, err = cpuSeconds(pid); err != nil {
			return s, err
		}
	}
	if sm.floorPID > 0 {
		var err error
		if s.floorCPU, err = cpuSeconds(sm.floorPID); err != nil {
			return s, fmt.Errorf("watch floor: %w", err)
		}
	}
	if sm.metrics == "" {
		return s, nil
	}
	pid, err := pidOf(sm.stateDir, localcluster.BatchledgerName)
	if err != nil {
		return s, err
	}
	if s.peakRSSMiB, err = peakRSSMiB(pid); err != nil {
		return s, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := scrape.Get(ctx, sm.metrics)
	if err != nil {
		return s, err
	}
	c := f.Controller()
	s.statusWrites, s.wlWrites, s.reconciles = c.StatusWrites, c.WorkloadWrites, c.Reconciles
	wait := f.Histogram(scrape.QueueWaitSeconds, map[string]string{"name": controller.AccountControllerName})
	s.queueWaits, s.queueWaitSum, s.queueWaitsOver1s = wait.Count, wait.Sum, wait.Above(1)
	rec := f.Histogram(scrape.ReconcileSeconds, map[string]string{"controller": controller.AccountControllerName})
	s.reconcileCount, s.reconcileSum = rec.Count, rec.Sum
	s.releaserReconciles = f.Histogram(scrape.ReconcileSeconds, map[string]string{"controller": controller.PodReleaseControllerName}).Count
	s.wakeups = wakeupsBySource(f)
	return s, nil
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

// loadavg is the machine's 1, 5 and 15 minute load averages, "?" when unreadable: a
// report states it before and after each run, since the machine is shared.
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

// percentile is the q-quantile of d (nearest rank), 0 for no samples.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// avg is the mean of d, 0 for no samples.
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
