// Command soak is `make soak`, the chaos soak of issue 13 §3: the reliability figure. It
// starts a fresh local cluster (Kubernetes, Kueue, JobSet, kwok nodes) with two
// batchledger replicas electing a leader, owned by this process and stopped at the end,
// and runs N seeded batches of mixed shapes — plain Indexed Jobs, cross-Job accounts,
// JobSets that restart after a failed pod, Kueue preemption and re-admission, results
// required (sometimes one on the wrong model revision), repeated attempts on an index,
// Jobs with ttlSecondsAfterFinished — while a driver SIGKILLs, at seeded moments, the
// batchledger leader, the Kueue manager, kube-controller-manager and kube-apiserver, each
// restarted at once with the same ports and certificates.
//
// The driver plays the users and the kubelets: it finishes every pod itself (kwok's
// pod-finish stage), as planned from the seed, and records what each pod did. An oracle
// computes from that record alone the verdict every account must reach (Accepted or not,
// covered and accepted shard counts). After a settle time it compares, and prints:
// results lost, results recorded twice (ShardResults entries per pod UID), wrong
// verdicts, pods left with the result-capture finalizer and writes refused for size
// (the controllers' logs) — each must be 0; the command exits 1 otherwise.
//
//	go run ./hack/soak --seed=1 --batches=10 --kills=10
//	go run ./hack/soak --seed=7 --batches=100 --kills=100 --out=docs/reliability.md
//
// The plan (shapes, pod fates, kill order and gaps) is a function of the seed; the
// interleaving with the cluster's own timing is not, so a failure is reproduced by its
// seed with a likelihood, not a certainty: the report names the batch, its pods and the
// controller logs (kept with --logs).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	reportfmt "batchledger.dev/batchledger/internal/testsupport/report"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/scheme"
)

// config holds the flags.
type config struct {
	seed                 uint64
	batches, kills       int
	concurrency          int
	minGap, maxGap       time.Duration
	settle, batchTimeout time.Duration
	binary, out, logs    string
	command              string
}

func main() {
	var cfg config
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the plan: batch shapes, pod fates, kill order and gaps")
	flag.IntVar(&cfg.batches, "batches", 10, "number of batches")
	flag.IntVar(&cfg.kills, "kills", 10, "number of SIGKILLs, spread over the four components")
	flag.IntVar(&cfg.concurrency, "concurrency", 3, "batches in flight at once")
	flag.DurationVar(&cfg.minGap, "min-gap", 4*time.Second, "shortest wait between a component's return and the next kill")
	flag.DurationVar(&cfg.maxGap, "max-gap", 12*time.Second, "longest wait between a component's return and the next kill")
	flag.DurationVar(&cfg.settle, "settle", 2*time.Minute, "after the last batch and kill: how long the accounts get to reach their verdicts")
	flag.DurationVar(&cfg.batchTimeout, "batch-timeout", 6*time.Minute, "a batch not finished after this is reported stuck")
	flag.StringVar(&cfg.binary, "binary", "", "batchledger controller binary (default: built from ./cmd/batchledger into a temporary directory)")
	flag.StringVar(&cfg.out, "out", "", "when set (docs/reliability.md), write the report to this Markdown file")
	flag.StringVar(&cfg.logs, "logs", "", "copy the components' logs here at the end (default: a temporary directory, only when a check fails)")
	flag.Parse()
	cfg.command = "go run ./hack/soak " + strings.Join(os.Args[1:], " ")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if !rep.ok() {
		os.Exit(1)
	}
}

// report is one soak run's figure.
type report struct {
	cfg           config
	plan          Plan
	wall, startup time.Duration
	shapes        map[Shape]int
	stuck         []string
	kills         []KillRecord
	killErrors    int
	crashes       map[string]int
	pods, results int
	lost, twice   []string
	wrong         []string
	held          []string
	refused       []string
	batches       []batchLine
	apiErrors     int
	// underFire counts the batches that ran through at least one kill.
	underFire int
	settled   time.Duration
}

type batchLine struct {
	name, shape, want, got, note string
}

func (r *report) ok() bool {
	return len(r.lost) == 0 && len(r.twice) == 0 && len(r.wrong) == 0 && len(r.held) == 0 && len(r.refused) == 0 &&
		len(r.stuck) == 0 && r.killErrors == 0
}

func run(ctx context.Context, cfg config) (*report, error) {
	begin := time.Now()
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	if cfg.binary == "" {
		dir, err := os.MkdirTemp("", "batchledger-soak-bin-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		logf("building ./cmd/batchledger")
		if cfg.binary, err = localcluster.BuildBatchledger(dir); err != nil {
			return nil, err
		}
	}
	plan := NewPlan(PlanOptions{Seed: cfg.seed, Batches: cfg.batches, Kills: cfg.kills, MinGap: cfg.minGap, MaxGap: cfg.maxGap})
	logf("starting a fresh local cluster (stopped at the end)")
	cl, err := localcluster.Start(ctx, localcluster.Options{})
	if err != nil {
		return nil, err
	}
	rep := &report{cfg: cfg, plan: plan, shapes: map[Shape]int{}, startup: cl.StartupDuration}
	defer func() {
		if cfg.logs != "" || !rep.ok() {
			keepLogs(cl, cfg)
		}
		if err := cl.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "soak: stopping the cluster:", err)
		}
	}()
	m, err := localcluster.BatchledgerManager(cfg.binary, "--leader-elect", "--namespace=default",
		"--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s")
	if err != nil {
		return nil, err
	}
	replicas, err := cl.StartReplicas(ctx, m, 2)
	if err != nil {
		return nil, err
	}
	defer func() { _ = replicas.Stop() }() // teardown: the soak's verdict does not depend on it
	c, err := client.New(cl.RESTConfig, client.Options{Scheme: scheme.Must()})
	if err != nil {
		return nil, err
	}
	logf("cluster and 2 batchledger replicas ready in %s", time.Since(begin).Round(time.Second))

	ns := "soak"
	d := newDriver(c, ns, plan, cfg)
	if err := d.setup(ctx); err != nil {
		return nil, err
	}
	ch := &chaos{cl: cl, replicas: replicas.Names, crashes: map[string]int{}}
	cctx, stopChaos := context.WithCancel(ctx)
	defer stopChaos()
	supervised := make(chan struct{})
	go func() { defer close(supervised); ch.supervise(cctx) }()
	killed := make(chan struct{})
	go func() { defer close(killed); ch.run(cctx, plan.Kills) }()

	start := time.Now()
	d.run(ctx, func(s string) { logf("%s: %s", time.Since(start).Round(time.Second), s) })
	logf("every batch ended after %s; waiting for the kill schedule to end", time.Since(start).Round(time.Second))
	<-killed
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	// Settle: the verdicts are eventually consistent; give them until they all match or
	// the settle time ends, then judge.
	settleStart := time.Now()
	for {
		d.tick(ctx)
		if err := rep.evaluate(ctx, d, cl); err == nil && rep.clean() {
			break
		}
		if time.Since(settleStart) > cfg.settle || ctx.Err() != nil {
			break
		}
		sleep(ctx, 3*time.Second)
	}
	rep.settled = time.Since(settleStart)
	stopChaos()
	<-supervised
	if err := rep.evaluate(ctx, d, cl); err != nil {
		return nil, err
	}
	rep.kills, rep.crashes = ch.snapshot()
	for _, k := range rep.kills {
		if k.Err != nil {
			rep.killErrors++
		}
	}
	// Which batches ran through a kill: the figure means little if the kills missed them.
	for i, run := range d.runs {
		n := killsDuring(rep.kills, run.started, run.ended)
		if n > 0 {
			rep.underFire++
			rep.batches[i].note = strings.TrimPrefix(rep.batches[i].note+fmt.Sprintf("; %d kill%s while it ran", n, map[bool]string{true: "s"}[n > 1]), "; ")
		}
	}
	rep.apiErrors = d.errors
	rep.wall = time.Since(begin)
	fmt.Println()
	rep.print(os.Stdout)
	if cfg.out != "" {
		path := cfg.out
		if !filepath.IsAbs(path) {
			path = filepath.Join(root, path)
		}
		if err := os.WriteFile(path, []byte(rep.markdown(root)), 0o644); err != nil {
			return nil, err
		}
		logf("wrote %s", cfg.out)
	}
	return rep, nil
}

// killsDuring counts the kills between a batch's start and end (an end not set yet: now).
func killsDuring(kills []KillRecord, start, end time.Time) int {
	if end.IsZero() {
		end = time.Now()
	}
	n := 0
	for _, k := range kills {
		if !k.At.Before(start) && !k.At.After(end) {
			n++
		}
	}
	return n
}

// clean: nothing to report but a success.
func (r *report) clean() bool {
	return len(r.lost) == 0 && len(r.twice) == 0 && len(r.wrong) == 0 && len(r.held) == 0
}

// evaluate compares every account with the oracle and counts the results and held pods.
func (r *report) evaluate(ctx context.Context, d *driver, cl *localcluster.Cluster) error {
	pods, jobs := d.records()
	var chunks v1alpha1.ShardResultsList
	if err := d.c.List(ctx, &chunks, client.InNamespace(d.ns)); err != nil {
		return err
	}
	var podList corev1.PodList
	if err := d.c.List(ctx, &podList, client.InNamespace(d.ns)); err != nil {
		return err
	}
	var accounts v1alpha1.BatchAccountList
	if err := d.c.List(ctx, &accounts, client.InNamespace(d.ns)); err != nil {
		return err
	}
	recorded := map[string]map[types.UID]int{}
	for _, ch := range chunks.Items {
		acct := ch.Account
		if acct == "" {
			acct = ch.Labels[v1alpha1.LabelAccount]
		}
		if recorded[acct] == nil {
			recorded[acct] = map[types.UID]int{}
		}
		for _, res := range ch.Results {
			recorded[acct][res.PodUID]++
		}
	}
	byName := map[string]*v1alpha1.BatchAccount{}
	for i := range accounts.Items {
		byName[accounts.Items[i].Name] = &accounts.Items[i]
	}
	*r = report{cfg: r.cfg, plan: r.plan, startup: r.startup, shapes: map[Shape]int{}, settled: r.settled}
	r.batches = nil
	r.pods = len(pods)
	for _, run := range d.runs {
		b := run.plan
		r.shapes[b.Shape]++
		if run.phase == "stuck" {
			r.stuck = append(r.stuck, b.Name+": "+run.note)
		}
		want := Expect(b, pods, jobs)
		got := Observed{}
		if ba := byName[b.Name]; ba != nil {
			got.Covered, got.AcceptedShards = int(ba.Status.Shards.Covered), int(ba.Status.Shards.Accepted)
			if c := apimeta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionAccepted); c != nil {
				got.Accepted = c.Status == "True"
				got.Reason, got.Message = c.Reason, c.Message
			}
		}
		diffs := Differences(want, got)
		if len(diffs) > 0 {
			r.wrong = append(r.wrong, b.Name+" ("+string(b.Shape)+"): "+strings.Join(diffs, "; "))
		}
		rc := CountResults(b, pods, recorded[b.Name])
		r.results += rc.Results
		for _, p := range rc.Lost {
			r.lost = append(r.lost, b.Name+": "+p)
		}
		for _, p := range rc.Twice {
			r.twice = append(r.twice, b.Name+": "+p)
		}
		note := run.note
		if b.Shape == ShapePreemption && run.preempted {
			note = strings.TrimPrefix(note+"; evicted and re-admitted", "; ")
		}
		r.batches = append(r.batches, batchLine{name: b.Name, shape: string(b.Shape), want: want.String(),
			got: fmt.Sprintf("Accepted=%t covered=%d accepted=%d (%s)", got.Accepted, got.Covered, got.AcceptedShards, got.Reason), note: note})
	}
	for _, p := range podList.Items {
		if slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			r.held = append(r.held, p.Name)
		}
	}
	r.refused = refusedWrites(cl)
	slices.Sort(r.twice)
	return nil
}

// refusedPattern matches the API server's refusals of a write for its size, as the
// controller logs them: etcd's request limit, a field or annotation too long, a 413.
var refusedPattern = regexp.MustCompile(`request is too large|Too long: |Request Entity Too Large|exceeds the maximum|(code|status)["=: ]+413\b`)

// refusedWrites greps the batchledger replicas' logs for writes refused for size.
func refusedWrites(cl *localcluster.Cluster) []string {
	var out []string
	paths, _ := filepath.Glob(filepath.Join(cl.StateDir, "logs", localcluster.BatchledgerName+"*.log"))
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".log")
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for l := range strings.SplitSeq(string(data), "\n") {
			if refusedPattern.MatchString(l) && !strings.HasPrefix(l, "###") {
				out = append(out, name+": "+clip(l, 300))
			}
		}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// keepLogs copies the components' logs out of the state directory Stop removes.
func keepLogs(cl *localcluster.Cluster, cfg config) {
	dir := cfg.logs
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("batchledger-soak-seed%d-%s", cfg.seed, time.Now().Format("150405")))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		logf("keep logs: %v", err)
		return
	}
	// Every log of the state directory, stopped components' too (LogFiles lists only
	// the running ones).
	paths, _ := filepath.Glob(filepath.Join(cl.StateDir, "logs", "*.log"))
	for _, path := range paths {
		src, err := os.Open(path)
		if err != nil {
			continue
		}
		dst, err := os.Create(filepath.Join(dir, filepath.Base(path)))
		if err == nil {
			_, _ = io.Copy(dst, src)
			dst.Close()
		}
		src.Close()
	}
	logf("component logs kept in %s", dir)
}

// rows are the figure: name, value.
func (r *report) rows() [][2]string {
	per := map[string]int{}
	for _, k := range r.kills {
		per[k.Component]++
	}
	var kills []string
	for _, c := range KillComponents {
		kills = append(kills, fmt.Sprintf("%s %d", c, per[c]))
	}
	var shapes []string
	for _, s := range AllShapes {
		if r.shapes[s] > 0 {
			shapes = append(shapes, fmt.Sprintf("%s %d", s, r.shapes[s]))
		}
	}
	var crashes []string
	for name, n := range r.crashes {
		crashes = append(crashes, fmt.Sprintf("%s %d", name, n))
	}
	slices.Sort(crashes)
	crash := "0"
	if len(crashes) > 0 {
		crash = strings.Join(crashes, ", ")
	}
	return [][2]string{
		{"seed", fmt.Sprint(r.cfg.seed)},
		{"batches", fmt.Sprintf("%d (%s)", len(r.plan.Batches), strings.Join(shapes, ", "))},
		{"kills (SIGKILL, restarted)", fmt.Sprintf("%d: %s", len(r.kills), strings.Join(kills, ", "))},
		{"batches that ran through a kill", fmt.Sprintf("%d of %d", r.underFire, len(r.plan.Batches))},
		{"self-exits restarted by the supervisor", crash},
		{"pods finished by the driver", fmt.Sprint(r.pods)},
		{"results reported", fmt.Sprint(r.results)},
		{"results lost", fmt.Sprint(len(r.lost))},
		{"results recorded twice", fmt.Sprint(len(r.twice))},
		{"wrong verdicts", fmt.Sprint(len(r.wrong))},
		{"pods left with our finalizer", fmt.Sprint(len(r.held))},
		{"writes refused for size", fmt.Sprint(len(r.refused))},
		{"batches stuck", fmt.Sprint(len(r.stuck))},
		{"failed restarts", fmt.Sprint(r.killErrors)},
		{"wall time", fmt.Sprintf("%s (cluster start %s, settle %s)", r.wall.Round(time.Second), r.startup.Round(time.Second), r.settled.Round(time.Second))},
	}
}

// problems lists every failed check, with its detail.
func (r *report) problems() []string {
	var out []string
	add := func(what string, items []string) {
		for _, it := range items {
			out = append(out, what+": "+it)
		}
	}
	add("result lost", r.lost)
	add("result recorded twice", r.twice)
	add("wrong verdict", r.wrong)
	add("pod left with finalizer", r.held)
	add("write refused for size", r.refused)
	add("batch stuck", r.stuck)
	for _, k := range r.kills {
		if k.Err != nil {
			out = append(out, fmt.Sprintf("restart of %s failed: %v", k.Process, k.Err))
		}
	}
	return out
}

// figures is the run's figures as a two-column table; header nil for the terminal.
func (r *report) figures(header []string) reportfmt.Table {
	t := reportfmt.Table{Header: header}
	for _, row := range r.rows() {
		t.Rows = append(t.Rows, []string{row[0], row[1]})
	}
	return t
}

// batchTable is a row per batch: the oracle's verdict against the account's.
func (r *report) batchTable() reportfmt.Table {
	t := reportfmt.Table{Header: []string{"batch", "shape", "oracle", "account", "note"}}
	for _, l := range r.batches {
		t.Rows = append(t.Rows, []string{l.name, l.shape, l.want, l.got, l.note})
	}
	return t
}

func (r *report) print(w io.Writer) {
	r.figures(nil).WriteText(w)
	fmt.Fprintln(w)
	r.batchTable().WriteText(w)
	if p := r.problems(); len(p) > 0 {
		fmt.Fprintln(w, "\nFAILED:")
		for _, l := range p {
			fmt.Fprintln(w, "  "+l)
		}
	} else {
		fmt.Fprintln(w, "\nPASS: every check is 0")
	}
}

// markdown is docs/reliability.md.
func (r *report) markdown(root string) string {
	var b strings.Builder
	fmt.Fprintln(&b, "# Reliability: the chaos soak (`make soak`)")
	fmt.Fprintln(&b)
	b.WriteString(docIntro)
	fmt.Fprint(&b, "## The last run (written by `hack/soak --out`)\n\n")
	reportfmt.WritePreamble(&b, r.cfg.command, reportfmt.MachineFacts(root))
	fmt.Fprintln(&b)
	r.figures([]string{"figure", "value"}).WriteMarkdown(&b)
	fmt.Fprintln(&b)
	if p := r.problems(); len(p) > 0 {
		fmt.Fprintln(&b, "**Failed checks:**")
		fmt.Fprintln(&b)
		for _, l := range p {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(l, "|", "\\|"))
		}
	} else {
		fmt.Fprintln(&b, "Every check is 0.")
	}
	fmt.Fprintln(&b)
	r.batchTable().WriteMarkdown(&b)
	return b.String()
}

// docIntro is the part of docs/reliability.md that does not change from run to run.
const docIntro = `The soak (` + "`hack/soak`" + `) starts a fresh local control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok GPU nodes, Kueue, JobSet) with **two batchledger
replicas** electing a leader behind one webhook address, and runs seeded batches of mixed shapes:

| shape | what happens |
|---|---|
| job | one Indexed Job; some indexes fail once, then succeed (repeated attempts after failures) |
| cross-job | one account over two Jobs |
| jobset-restart | a JobSet of two child Jobs; a pod fails (backoffLimit 0), the JobSet restarts (failurePolicy maxRestarts 1) with new child identities |
| preemption | a low-priority Job on its own ClusterQueue; once index 0 succeeded a high-priority Job preempts it; it is re-admitted and finishes |
| results | results required; half of these batches have one shard report the wrong model revision (the account must **not** be Accepted) |
| repeated-attempts | a second successful attempt on index 0 (a pod the Job controller counts, as in the e2e suite) |
| ttl | ` + "`ttlSecondsAfterFinished: 30`" + `: the Job is deleted after it completes; the account's record of it must stand |

Accounts of the job, cross-job, preemption and repeated-attempts shapes require results on half
the seeds' batches; results travel in the pods' termination messages (kwok's pod-finish stage).

While the batches run, a driver SIGKILLs, at seeded moments, the batchledger **leader** (found
by its ` + "`leader_election_master_status`" + ` metric), the **Kueue** manager,
**kube-controller-manager** and **kube-apiserver**, each restarted at once on the same ports with
the same certificates (` + "`localcluster.Cluster.RestartComponent`" + `). A supervisor restarts any
component that exits by itself, as a kubelet would (a batchledger replica that loses its Lease
while the API server is down exits); those restarts are counted apart.

The driver finishes every pod itself and records what each did (which index succeeded with
which result, which failed). The **oracle** computes from that record alone the verdict of every
account: a shard is covered when a pod of its current (Job UID, index) succeeded, its result is
accepted when such a pod reported a good result, and the account is Accepted when every shard is
covered, every target's current Job terminated and (when required) every result was accepted.
After the last batch and kill, the accounts get a settle time to converge, then:

- **results lost**: succeeded pods that reported a result to an account requiring results, with
  no ShardResults entry of their pod UID;
- **results recorded twice**: pod UIDs with more than one ShardResults entry;
- **wrong verdicts**: accounts whose Accepted status, covered or accepted count differs from
  the oracle's;
- **pods left with our finalizer**: pods still carrying ` + "`batchledger.dev/result-capture`" + `;
- **writes refused for size**: lines of the batchledger logs with "request is too large",
  "Too long", "Request Entity Too Large", "exceeds the maximum" or 413;

each must be 0, and every batch must end (none stuck) with every restart succeeding; otherwise
the command exits 1 and keeps the components' logs.

The plan (shapes, pod fates, kill order and gaps) is a function of ` + "`--seed`" + `; the
interleaving with the cluster's own timing is not, so a failure reproduces by its seed with a
likelihood, not a certainty.

` + "```sh" + `
make soak                                   # the long run (see SOAK_FLAGS)
go run ./hack/soak --seed=1 --batches=10 --kills=10   # the short run of make test
` + "```" + `

`
