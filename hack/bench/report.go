package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"batchledger.dev/batchledger/internal/testsupport/report"
)

// The sections of docs/benchmarks.md each command rewrites, between its markers.
const (
	loadBegin       = "<!-- bench:load:begin (written by hack/bench --out) -->"
	loadEnd         = "<!-- bench:load:end -->"
	loadHeading     = "## Load benchmark (`make bench`)"
	lateBegin       = "<!-- bench:late:begin (written by hack/bench --modes=late --out) -->"
	lateEnd         = "<!-- bench:late:end -->"
	lateHeading     = "### Late accounts (`--modes=late`)"
	baselineBegin   = "<!-- bench:baseline:begin (written by hack/bench baseline --out) -->"
	baselineEnd     = "<!-- bench:baseline:end -->"
	baselineHeading = "## Kueue scheduler-performance baseline (`make bench-baseline`)"
)

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// writeText writes t for the terminal unless it has no rows (nothing measured yet).
func writeText(w io.Writer, t report.Table) {
	if len(t.Rows) > 0 {
		t.WriteText(w)
	}
}

// loadTable is the load benchmark's table, a row per mode and size, shared by the
// terminal and the Markdown.
func loadTable(results []loadResult) report.Table {
	t := report.Table{Header: []string{"mode", "size", "accounts", "jobs", "indexes", "pods/s", "batchledger CPU s", "kcm CPU s",
		"ratio", "peak RSS MiB", "status writes", "Job status changes", "writes/change", "observed changes", "writes/observed", "latency p50/p99 ms", "load avg (before → after)"}}
	for _, r := range results {
		c := r.cost
		ratio, perChange, perObserved := "-", "-", "-"
		if c.kcmCPU > 0 {
			ratio = fmt.Sprintf("%.1f%%", 100*c.blCPU/c.kcmCPU)
		}
		if r.jobChanges > 0 {
			perChange = fmt.Sprintf("%.2f", c.statusWrites/float64(r.jobChanges))
		}
		if r.observed > 0 {
			perObserved = fmt.Sprintf("%.2f", c.statusWrites/float64(r.observed))
		}
		lat := ms(r.p50) + " / " + ms(r.p99)
		if r.unmatched > 0 {
			lat += fmt.Sprintf(" (%d of %d never shown)", r.unmatched, r.unmatched+r.samples)
		}
		t.Rows = append(t.Rows, []string{r.mode, r.size.String(), strconv.Itoa(r.accounts), strconv.Itoa(r.size.jobs), strconv.Itoa(r.size.indexes),
			fmt.Sprintf("%.1f", float64(r.pods)/r.wall.Seconds()),
			fmt.Sprintf("%.2f", c.blCPU), fmt.Sprintf("%.2f", c.kcmCPU), ratio, fmt.Sprintf("%.1f", c.peakRSSMiB),
			fmt.Sprintf("%.0f", c.statusWrites), strconv.Itoa(r.jobChanges), perChange, strconv.Itoa(r.observed), perObserved, lat,
			r.loadBefore + " → " + r.loadAfter})
	}
	return t
}

// loadDetailTable is the load's figures that only the Markdown shows.
func loadDetailTable(results []loadResult) report.Table {
	t := report.Table{Header: []string{"mode", "size", "reconciles", "Workload condition writes", "latency samples", "latency max ms", "wall s",
		"watch floor CPU s", "floor / kcm", "batchledger above floor / kcm", "queue wait mean ms", "queue waits > 1 s", "reconcile mean ms", "apiserver CPU s",
		"reconciles / account", "wakeups / account by source", "pod releaser reconciles / pod"}}
	for _, r := range results {
		c := r.cost
		floor, floorRatio, above := "-", "-", "-"
		if c.floorCPU > 0 && c.kcmCPU > 0 {
			floor = fmt.Sprintf("%.2f", c.floorCPU)
			floorRatio = fmt.Sprintf("%.1f%%", 100*c.floorCPU/c.kcmCPU)
			above = fmt.Sprintf("%.1f%%", 100*(c.blCPU-c.floorCPU)/c.kcmCPU)
		}
		wait, over, rec := "-", "-", "-"
		if c.queueWaits > 0 {
			wait = fmt.Sprintf("%.0f", 1000*c.queueWaitSum/c.queueWaits)
			over = fmt.Sprintf("%.0f of %.0f", c.queueWaitsOver1s, c.queueWaits)
		}
		if c.reconcileCount > 0 {
			rec = fmt.Sprintf("%.1f", 1000*c.reconcileSum/c.reconcileCount)
		}
		t.Rows = append(t.Rows, []string{r.mode, r.size.String(), fmt.Sprintf("%.0f", c.reconciles), fmt.Sprintf("%.0f", c.wlWrites),
			strconv.Itoa(r.samples), ms(r.max), fmt.Sprintf("%.1f", r.wall.Seconds()), floor, floorRatio, above, wait, over, rec, fmt.Sprintf("%.2f", c.apiCPU),
			perAccount(c.reconciles, r.accounts), wakeupsPerAccount(c.wakeups, r.accounts), perPod(c.releaserReconciles, r.pods)})
	}
	return t
}

// perAccount is n per account, "-" without accounts.
func perAccount(n float64, accounts int) string {
	if accounts == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", n/float64(accounts))
}

// perPod is n per pod, "-" without pods.
func perPod(n float64, pods int) string {
	if pods == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", n/float64(pods))
}

// wakeupsPerAccount is each source's wakeups per account, the largest first
// ("Job 20.1, Workload 12.0"), "-" without any.
func wakeupsPerAccount(wakeups map[string]float64, accounts int) string {
	if len(wakeups) == 0 || accounts == 0 {
		return "-"
	}
	sources := slices.Collect(maps.Keys(wakeups))
	slices.SortFunc(sources, func(a, b string) int {
		return cmp.Or(cmp.Compare(wakeups[b], wakeups[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(sources))
	for i, s := range sources {
		parts[i] = fmt.Sprintf("%s %.1f", s, wakeups[s]/float64(accounts))
	}
	return strings.Join(parts, ", ")
}

// writeLoadDoc replaces the load section of cfg.out, and the late section with the rows
// of the late mode.
func writeLoadDoc(cfg loadConfig, root string, results []loadResult) error {
	// The late mode has a section of its own: its rows answer another question (what an
	// account costs that came after its Job) and are run on their own.
	var late, others []loadResult
	for _, r := range results {
		if r.mode == modeLate {
			late = append(late, r)
		} else {
			others = append(others, r)
		}
	}
	for _, sec := range []struct {
		rows                []loadResult
		begin, end, heading string
	}{{others, loadBegin, loadEnd, loadHeading}, {late, lateBegin, lateEnd, lateHeading}} {
		if len(sec.rows) == 0 {
			continue
		}
		if err := writeLoadSection(cfg, root, sec.rows, sec.begin, sec.end, sec.heading); err != nil {
			return err
		}
	}
	return nil
}

// writeLoadSection rewrites one section of cfg.out, between begin and end, with results.
func writeLoadSection(cfg loadConfig, root string, results []loadResult, begin, end, heading string) error {
	var b strings.Builder
	fmt.Fprintln(&b, begin)
	report.WritePreamble(&b, cfg.command, append(machineFacts(root), [2]string{"load", fmt.Sprintf(
		"%d fake nodes x %d GPUs, ClusterQueue quota %d GPUs; %d Jobs per BatchAccount; Job parallelism %d; pods request 1 GPU and exit 0 after %s (kwok auto-exit)",
		cfg.nodes, cfg.gpus, cfg.nodes*cfg.gpus, cfg.jobsPerAccount, cfg.parallelism, cfg.exitDelay)}))
	fmt.Fprintln(&b)
	loadTable(results).WriteMarkdown(&b)
	fmt.Fprintln(&b)
	loadDetailTable(results).WriteMarkdown(&b)
	fmt.Fprintln(&b, end)
	return report.WriteSection(docPath(root, cfg.out), begin, end, b.String(), heading)
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
		for _, mode := range []string{modeWithout, modePaced, modeWith} {
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

// baselineClassTable is the admission times by class and mode.
func baselineClassTable(g *generatorConfig, runs []baselineRun) report.Table {
	t := report.Table{Header: []string{"class", "batchledger", "workloads", "admission avg ms", "admission p90 ms", "Job create → finished avg ms"}}
	for _, r := range classRows(g, runs) {
		t.Rows = append(t.Rows, []string{r.class, r.mode, strconv.Itoa(r.n), ms(r.avg), ms(r.p90), ms(r.finish)})
	}
	return t
}

// baselineRunHeader has the class names in its per-class column (%s).
var baselineRunHeader = []string{"round", "batchledger", "cluster start s", "submitted s", "wall s", "measured s", "finished", "re-admitted", "admission avg ms (%s)", "batchledger CPU s", "watch floor CPU s", "kcm CPU s", "Kueue CPU s", "apiserver CPU s", "status writes", "writes/account", "Workload condition writes", "load avg (before → after)"}

// baselineRunTable is a row per run; its per-class admission averages show how much two
// runs of the same mode differ, the yardstick for any difference between the modes.
func baselineRunTable(classes []string, runs []baselineRun) report.Table {
	h := slices.Clone(baselineRunHeader)
	for i := range h {
		if strings.Contains(h[i], "%s") {
			h[i] = fmt.Sprintf(h[i], strings.Join(classes, " / "))
		}
	}
	t := report.Table{Header: h}
	for _, r := range runs {
		var perClass []string
		for _, c := range classes {
			perClass = append(perClass, ms(avg(r.admission[c])))
		}
		bl, floor, writes, perAccount, wl := "-", "-", "-", "-", "-"
		if r.floored {
			floor = fmt.Sprintf("%.2f", r.cost.floorCPU)
		}
		if r.mode == modeWith {
			bl = fmt.Sprintf("%.2f", r.cost.blCPU)
			writes = fmt.Sprintf("%.0f", r.cost.statusWrites)
			wl = fmt.Sprintf("%.0f", r.cost.wlWrites)
			if r.accounts > 0 {
				perAccount = fmt.Sprintf("%.2f", r.cost.statusWrites/float64(r.accounts))
			}
		}
		wall := fmt.Sprintf("%.1f", r.wall.Seconds())
		if r.timedOut {
			wall += " (timed out)"
		}
		t.Rows = append(t.Rows, []string{strconv.Itoa(r.round), r.mode, fmt.Sprintf("%.1f", r.startup.Seconds()), fmt.Sprintf("%.1f", r.submitted.Seconds()), wall,
			fmt.Sprintf("%.1f", r.window.Seconds()), fmt.Sprintf("%d/%d", r.finished, r.workloads), strconv.Itoa(r.readmitted), strings.Join(perClass, " / "),
			bl, floor, fmt.Sprintf("%.2f", r.cost.kcmCPU), fmt.Sprintf("%.2f", r.cost.kueueCPU), fmt.Sprintf("%.2f", r.cost.apiCPU),
			writes, perAccount, wl, r.loadBefore + " → " + r.loadAfter})
	}
	return t
}

// printBaseline writes both baseline tables for the terminal.
func printBaseline(w io.Writer, g *generatorConfig, runs []baselineRun) {
	if len(runs) == 0 {
		return
	}
	baselineClassTable(g, runs).WriteText(w)
	fmt.Fprintln(w)
	baselineRunTable(g.classes(), runs).WriteText(w)
}

// writeBaselineDoc replaces the baseline section of cfg.out.
func writeBaselineDoc(cfg baselineConfig, root string, g, full *generatorConfig, runs []baselineRun) error {
	var b strings.Builder
	fmt.Fprintln(&b, baselineBegin)
	var sets []string
	for _, q := range g.queues()[:1] {
		for _, ws := range q.set.WorkloadsSets {
			for _, w := range ws.Workloads {
				sets = append(sets, fmt.Sprintf("%d × %s (%s GPU, %d ms, priority %d, every %d ms)", ws.Count, w.ClassName, w.Request, w.RuntimeMs, w.Priority, ws.CreationIntervalMs))
			}
		}
	}
	q0 := g.queues()[0].set
	report.WritePreamble(&b, cfg.command, append(machineFacts(root), [2]string{"load", fmt.Sprintf(
		"%s scaled by %g: %d of %d workloads; %d cohort(s) × %d ClusterQueues (nominal %s, borrowing limit %s GPUs, reclaimWithinCohort %s, withinClusterQueue %s); per ClusterQueue %s; %d fake nodes × %d GPUs",
		cfg.generatorRelative, cfg.scale, g.workloads(), full.workloads(), countCohorts(g), len(g.queues())/max(1, countCohorts(g)),
		q0.NominalQuota, q0.BorrowingLimit, q0.ReclaimWithinCohort, q0.WithinClusterQueue, strings.Join(sets, ", "),
		g.nodes(cfg.gpusPerNode), cfg.gpusPerNode)}))
	fmt.Fprintln(&b)
	baselineClassTable(g, runs).WriteMarkdown(&b)
	fmt.Fprintln(&b)
	baselineRunTable(g.classes(), runs).WriteMarkdown(&b)
	fmt.Fprintln(&b, baselineEnd)
	return report.WriteSection(docPath(root, cfg.out), baselineBegin, baselineEnd, b.String(), baselineHeading)
}

// docPath is out, relative to the repository root unless absolute.
func docPath(root, out string) string {
	if filepath.IsAbs(out) {
		return out
	}
	return filepath.Join(root, out)
}

// machineFacts are report.MachineFacts naming the batchledger binary the benchmark ran
// too.
func machineFacts(root string) [][2]string {
	facts := report.MachineFacts(root)
	facts[len(facts)-1][1] += "; batchledger " + filepath.Join("bin", "batchledger")
	return facts
}
