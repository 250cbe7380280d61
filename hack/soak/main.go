// Command soak is `make soak`, the chaos soak: the reliability figure. It starts a fresh
// local cluster (Kubernetes, Kueue, JobSet, kwok nodes) with two batchledger replicas
// electing a leader, owned by this process and stopped at the end, and runs N seeded
// batches of mixed shapes — plain Indexed Jobs, cross-Job accounts, JobSets that restart
// after a failed pod, Kueue preemption and re-admission, results required (sometimes one on
// the wrong model revision), repeated attempts on an index, Jobs with
// ttlSecondsAfterFinished; and the result ledger's promises: two accounts capturing one
// Job, requireResults turned on mid-run, a pod that succeeds during its graceful
// termination, a refused rule edit, a forger writing into the ledger, a namespace deleted
// mid-batch, a TTL-0 Job that ends while no replica leads — while a driver SIGKILLs, at
// seeded moments, the batchledger leader, the Kueue manager, kube-controller-manager and
// kube-apiserver, each restarted at once with the same ports and certificates.
//
// The driver plays the users and the kubelets: it finishes every pod itself (kwok's
// pod-finish stage), as planned from the seed, and records what each pod did. An oracle
// computes from that record alone the verdict every account must reach (Accepted or not,
// covered and accepted shard counts). After a settle time it compares, and prints:
// results lost, results recorded twice (entries per pod UID), wrong verdicts, forged
// results counted, forged writes admitted, rule edits admitted, pods released before every
// account recorded them, pods stranded with the result-capture finalizer, namespaces
// stuck and writes refused for size (the controllers' logs) — each must be 0; the command
// exits 1 otherwise. docs/reliability.md says what each means.
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
	"sync"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/internal/testsupport/kwok"
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
	// forgedCounted: forger batches whose verdict counted a forged result;
	// forgedAdmitted: the forger's writes the API server admitted, of forgedTried;
	// policyOn: the ledger's admission policy is installed (then none may be admitted).
	forgedCounted  []string
	forgedAdmitted []string
	forgedTried    int
	policyOn       bool
	// ruleEdits: rule edits admitted after results were recorded.
	ruleEdits []string
	// releasedEarly: pods released before every account capturing their result had it.
	releasedEarly []string
	// nsStuck: deleted namespaces that outlived their pods by more than the bound.
	nsStuck   []string
	batches   []batchLine
	apiErrors int
	// underFire counts the batches that ran through at least one kill.
	underFire int
	settled   time.Duration
}

type batchLine struct {
	name, shape, want, got, note string
}

func (r *report) ok() bool {
	return r.clean() && len(r.refused) == 0 && len(r.stuck) == 0 && r.killErrors == 0 &&
		len(r.ruleEdits) == 0 && len(r.releasedEarly) == 0 && len(r.nsStuck) == 0 && (!r.policyOn || len(r.forgedAdmitted) == 0)
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
	// The forger: the same API server, as a user of its own (kubectl --as) whose RBAC is
	// the namespace Role the driver grants it.
	fcfg := rest.CopyConfig(cl.RESTConfig)
	fcfg.Impersonate = rest.ImpersonationConfig{UserName: forgerUser, Groups: []string{"system:authenticated"}}
	forger, err := client.New(fcfg, client.Options{Scheme: scheme.Must()})
	if err != nil {
		return nil, err
	}
	logf("cluster and 2 batchledger replicas ready in %s", time.Since(begin).Round(time.Second))

	ns := "soak"
	d := newDriver(c, ns, plan, cfg)
	if d.jobController, err = kwok.JobControllerClient(cl.RESTConfig); err != nil {
		return nil, err
	}
	d.forger = forger
	if err := d.setup(ctx); err != nil {
		return nil, err
	}
	ch := &chaos{cl: cl, replicas: replicas.Names, crashes: map[string]int{}}
	cctx, stopChaos := context.WithCancel(ctx)
	defer stopChaos()
	var targeted sync.WaitGroup
	d.killLeader = func(started chan struct{}) {
		targeted.Go(func() { ch.killLeaderNow(cctx, started) })
	}
	supervised := make(chan struct{})
	go func() { defer close(supervised); ch.supervise(cctx) }()
	killed := make(chan struct{})
	go func() { defer close(killed); ch.run(cctx, plan.Kills) }()

	start := time.Now()
	d.run(ctx, func(s string) { logf("%s: %s", time.Since(start).Round(time.Second), s) })
	logf("every batch ended after %s; waiting for the kill schedule to end", time.Since(start).Round(time.Second))
	<-killed
	targeted.Wait()
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

// clean: nothing that a settle time may still change is to report.
func (r *report) clean() bool {
	return len(r.lost) == 0 && len(r.twice) == 0 && len(r.wrong) == 0 && len(r.held) == 0 && len(r.forgedCounted) == 0
}

// evaluate compares every account with the oracle and counts the results and held pods.
func (r *report) evaluate(ctx context.Context, d *driver, cl *localcluster.Cluster) error {
	pods, jobs := d.records()
	var chunks v1alpha1.ShardResultsList
	if err := d.c.List(ctx, &chunks, client.InNamespace(d.ns)); err != nil {
		return err
	}
	var podList corev1.PodList
	if err := d.c.List(ctx, &podList); err != nil {
		return err
	}
	var accounts v1alpha1.BatchAccountList
	if err := d.c.List(ctx, &accounts, client.InNamespace(d.ns)); err != nil {
		return err
	}
	var policies admissionregistrationv1.ValidatingAdmissionPolicyList
	if err := d.c.List(ctx, &policies); err != nil {
		return err
	}
	byName := map[string]*v1alpha1.BatchAccount{}
	for i := range accounts.Items {
		byName[accounts.Items[i].Name] = &accounts.Items[i]
	}
	*r = report{cfg: r.cfg, plan: r.plan, startup: r.startup, shapes: map[Shape]int{}, settled: r.settled}
	r.policyOn = slices.ContainsFunc(policies.Items, func(p admissionregistrationv1.ValidatingAdmissionPolicy) bool {
		return strings.HasSuffix(p.Name, ledgerPolicy)
	})
	r.pods = len(pods)
	for _, run := range d.runs {
		b := run.plan
		r.shapes[b.Shape]++
		if run.phase == "stuck" {
			r.stuck = append(r.stuck, b.Name+": "+run.note)
		}
		note := run.note
		if b.Shape == ShapePreemption && run.preempted {
			note = strings.TrimPrefix(note+"; evicted and re-admitted", "; ")
		}
		r.releasedEarly = append(r.releasedEarly, prefixed(b.Name+": ", run.releasedEarly)...)
		if run.ruleAdmitted > 0 {
			r.ruleEdits = append(r.ruleEdits, fmt.Sprintf("%s: %d admitted", b.Name, run.ruleAdmitted))
		}
		if b.RuleEdit && run.ruleTried && run.ruleAdmitted == 0 {
			note = strings.TrimPrefix(note+"; rule edit refused", "; ")
		}
		if b.OwnNamespace {
			// Its accounts went with the namespace: the figures are the namespace's.
			if NamespaceStuck(run.nsDeletedAt, run.nsPodsEndedAt, run.nsGoneAt, time.Now()) || (run.phase != "" && run.nsGoneAt.IsZero()) {
				r.nsStuck = append(r.nsStuck, fmt.Sprintf("%s: deleted %s, pods ended %s, gone %s", b.Name,
					stamp(run.nsDeletedAt), stamp(run.nsPodsEndedAt), stamp(run.nsGoneAt)))
			}
			got := "namespace not deleted"
			if !run.nsGoneAt.IsZero() {
				got = fmt.Sprintf("namespace gone %s after its pods ended", run.nsGoneAt.Sub(run.nsPodsEndedAt).Round(100*time.Millisecond))
			} else if !run.nsDeletedAt.IsZero() {
				got = "namespace still there"
			}
			r.batches = append(r.batches, batchLine{name: b.Name, shape: string(b.Shape), want: fmt.Sprintf("gone within %s", NamespaceGoneWithin), got: got, note: note})
			continue
		}
		want := Expect(b, pods, jobs)
		var gotLine []string
		for _, name := range b.Accounts() {
			ba := byName[name]
			got := Observed{Terminal: map[string]string{}}
			var uid types.UID
			if ba != nil {
				uid = ba.UID
				got.Covered, got.AcceptedShards = int(ba.Status.Shards.Covered), int(ba.Status.Shards.Accepted)
				if c := apimeta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionAccepted); c != nil {
					got.Accepted = c.Status == "True"
					got.Reason, got.Message = c.Reason, c.Message
				}
				for _, ts := range ba.Status.Targets {
					got.Terminal[ts.Name] = ts.Terminal
				}
			}
			label := b.Name
			if name != b.Name {
				label += " account " + name
			}
			if diffs := Differences(want, got); len(diffs) > 0 {
				r.wrong = append(r.wrong, label+" ("+string(b.Shape)+"): "+strings.Join(diffs, "; "))
			}
			recorded, forgedIn := recordedBy(chunks.Items, uid, run.forgedChunk)
			rc := CountResults(b, pods, recorded)
			r.results += rc.Results
			r.lost = append(r.lost, prefixed(label+": ", rc.Lost)...)
			r.twice = append(r.twice, prefixed(label+": ", rc.Twice)...)
			if b.Forger {
				switch {
				case run.forgedSeen != "":
					r.forgedCounted = append(r.forgedCounted, label+": "+run.forgedSeen)
				case ForgedCounted(want.AcceptedShards, want.Accepted, got, forgedIn):
					r.forgedCounted = append(r.forgedCounted, fmt.Sprintf("%s: %d accepted (Accepted %t), real pods %d (%t); %d forged results in the manager's chunks",
						label, got.AcceptedShards, got.Accepted, want.AcceptedShards, want.Accepted, forgedIn))
				}
				if ba != nil && ba.Status.Results.IgnoredChunks > 0 {
					note = strings.TrimPrefix(note+fmt.Sprintf("; %d chunk ignored", ba.Status.Results.IgnoredChunks), "; ")
				}
			}
			gotLine = append(gotLine, fmt.Sprintf("Accepted=%t covered=%d accepted=%d (%s)", got.Accepted, got.Covered, got.AcceptedShards, got.Reason))
		}
		if b.Forger {
			r.forgedTried += run.forgedTried
			r.forgedAdmitted = append(r.forgedAdmitted, prefixed(b.Name+": ", run.forgedAdmitted)...)
			note = strings.TrimPrefix(note+fmt.Sprintf("; forger: %d of %d writes admitted", len(run.forgedAdmitted), run.forgedTried), "; ")
		}
		r.batches = append(r.batches, batchLine{name: b.Name, shape: string(b.Shape), want: want.String(), got: strings.Join(gotLine, "; "), note: note})
	}
	for _, p := range podList.Items {
		if d.ours(p.Namespace) && slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			r.held = append(r.held, p.Namespace+"/"+p.Name)
		}
	}
	r.refused = refusedWrites(cl)
	slices.Sort(r.twice)
	return nil
}

// ledgerPolicy ends the name of the admission policy that keeps the ledger's writes to
// the manager.
const ledgerPolicy = "ledger-manager-only"

// recordedBy counts, per pod UID, the results of the chunks the account of UID uid
// controls, leaving out the forger's chunk (skip), and how many of their results are the
// forger's (a forged pod UID in a chunk the manager wrote).
func recordedBy(chunks []v1alpha1.ShardResults, uid types.UID, skip string) (map[types.UID]int, int) {
	out := map[types.UID]int{}
	forged := 0
	for _, c := range chunks {
		if owner := metav1.GetControllerOf(&c); uid == "" || owner == nil || owner.UID != uid || (skip != "" && c.Name == skip) {
			continue
		}
		for _, res := range c.Results {
			out[res.PodUID]++
			if strings.HasPrefix(string(res.PodUID), forgedPrefix) {
				forged++
			}
		}
	}
	return out, forged
}

func prefixed(prefix string, items []string) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, prefix+it)
	}
	return out
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format("15:04:05.0")
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
	targeted := 0
	for _, k := range r.kills {
		if k.Targeted {
			targeted++
			continue
		}
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
	forged := fmt.Sprintf("%d of %d", len(r.forgedAdmitted), r.forgedTried)
	if r.policyOn {
		forged += " (ledger policy installed: must be 0)"
	} else {
		forged += " (no ledger admission policy on this cluster: reported, not checked)"
	}
	return [][2]string{
		{"seed", fmt.Sprint(r.cfg.seed)},
		{"batches", fmt.Sprintf("%d (%s)", len(r.plan.Batches), strings.Join(shapes, ", "))},
		{"kills (SIGKILL, restarted)", fmt.Sprintf("%d: %s; batchledger-leader at a TTL-0 Job's end %d", len(r.kills), strings.Join(kills, ", "), targeted)},
		{"batches that ran through a kill", fmt.Sprintf("%d of %d", r.underFire, len(r.plan.Batches))},
		{"self-exits restarted by the supervisor", crash},
		{"pods finished by the driver", fmt.Sprint(r.pods)},
		{"results reported", fmt.Sprint(r.results)},
		{"results lost", fmt.Sprint(len(r.lost))},
		{"results recorded twice", fmt.Sprint(len(r.twice))},
		{"wrong verdicts", fmt.Sprint(len(r.wrong))},
		{"forged results counted", fmt.Sprint(len(r.forgedCounted))},
		{"forged writes admitted", forged},
		{"rule edits admitted", fmt.Sprint(len(r.ruleEdits))},
		{"pods released before every account recorded them", fmt.Sprint(len(r.releasedEarly))},
		{"pods stranded (left with our finalizer)", fmt.Sprint(len(r.held))},
		{"namespaces stuck", fmt.Sprint(len(r.nsStuck))},
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
	add("forged result counted", r.forgedCounted)
	if r.policyOn {
		add("forged write admitted", r.forgedAdmitted)
	}
	add("rule edit admitted", r.ruleEdits)
	add("pod released before every account recorded it", r.releasedEarly)
	add("pod stranded with our finalizer", r.held)
	add("namespace stuck", r.nsStuck)
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
	if !r.policyOn && len(r.forgedAdmitted) > 0 {
		fmt.Fprintln(w, "\nForged writes admitted (no ledger policy on this cluster; not a failed check):")
		for _, l := range r.forgedAdmitted {
			fmt.Fprintln(w, "  "+l)
		}
	}
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
replicas** electing a leader behind one webhook address, and runs seeded batches of mixed shapes.
The first seven batches of every plan are the result ledger's shapes (so the short run covers
each), the next seven the accounting shapes, each in a seeded order; later batches draw any.

| shape | what happens |
|---|---|
| job | one Indexed Job; some indexes fail once, then succeed (repeated attempts after failures) |
| cross-job | one account over two Jobs |
| jobset-restart | a JobSet of two child Jobs; a pod fails (backoffLimit 0), the JobSet restarts (failurePolicy maxRestarts 1) with new child identities |
| preemption | a low-priority Job on its own ClusterQueue; once index 0 succeeded a high-priority Job preempts it; it is re-admitted and finishes |
| results | results required; half of these batches have one shard report the wrong model revision (the account must **not** be Accepted) |
| repeated-attempts | a second successful attempt on index 0 (a pod the Job controller counts, as in the e2e suite) |
| ttl | ` + "`ttlSecondsAfterFinished: 30`" + `: the Job is deleted after it completes; the account's record of it must stand |
| two-accounts | two accounts require results on one Job: each must record every result, and no pod may be released before both did |
| require-later | a coverage account whose pods report results anyway; once its first index succeeded the driver turns ` + "`requireResults`" + ` on: every result must be read from the pods still there (no TTL) and the batch Accepted |
| graceful-success | ` + "`podReplacementPolicy: Failed`" + `; the driver deletes a running held pod with a 120 s grace period and, as the kubelet of a worker that checkpoints and exits, ends it with exit 0 and its result while it terminates (kwok's unmanaged annotation): the result must be recorded |
| rule-edit | results required; once a result was recorded the driver tries to change the acceptance rule to one that also takes short results: the CRD must refuse it; half of these batches then have a shard report a short result, so the verdict shows which rule judged it |
| forger | results required; once a result was recorded a user whose namespace Role grants batchledger.dev's every resource and verb (client impersonation) creates a chunk with the account's UID label and controller ownerReference holding forged accepted results for every shard, and tries to update and delete the manager's chunk and to write the account's status; half of these batches then have a shard report the wrong model revision, so a forged result counted would turn the verdict |
| namespace-delete | one Job in a namespace of its own (with its own LocalQueue), deleted once its first indexes succeeded while the others run: held pods must be let go and the namespace gone within 30 s of its pods ending |
| ttl-zero | ` + "`ttlSecondsAfterFinished: 0`" + `; the driver kills the batchledger leader just before the last pod finishes, so the Job completes and is deleted while no replica leads (half of these batches require results, whose held pods keep the Job until recorded; the others do not). The account must record the Job Complete |

Accounts of the job, cross-job, preemption and repeated-attempts shapes require results on half
the seeds' batches; results travel in the pods' termination messages (kwok's pod-finish stage).

While the batches run, a driver SIGKILLs, at seeded moments, the batchledger **leader** (found
by its ` + "`leader_election_master_status`" + ` metric), the **Kueue** manager,
**kube-controller-manager** and **kube-apiserver**, each restarted at once on the same ports with
the same certificates (` + "`localcluster.Cluster.RestartComponent`" + `). The ttl-zero batches add
their own kill of the leader, counted apart in the kills row. A supervisor restarts any
component that exits by itself, as a kubelet would (a batchledger replica that loses its Lease
while the API server is down exits); those restarts are counted apart.

The driver finishes every pod itself and records what each did (which index succeeded with
which result, which failed). The **oracle** computes from that record alone the verdict of every
account: a shard is covered when a pod of its current (Job UID, index) succeeded, its result is
accepted when such a pod reported a good result (under the account's original rule), and the
account is Accepted when every shard is covered, every target's current Job terminated and (when
required) every result was accepted. A Job with a TTL that the driver saw go before it saw its
condition counts as Complete when every index succeeded (the TTL controller deletes only
finished Jobs). A TTL-0 Job's pods are deleted with it the moment it completes, so the driver
holds each with a finalizer of its own (` + "`soak.batchledger.dev/observe`" + `), added before the pod
is told to end and removed once the driver saw it end: the oracle never misses a pod that
succeeded. After the last batch and kill, the accounts get a settle time to converge, then:

- **results lost**: succeeded pods that reported a result to an account requiring results, with
  no entry of their pod UID in that account's chunks (each account of two-accounts counts apart);
- **results recorded twice**: pod UIDs with more than one entry in one account's chunks;
- **wrong verdicts**: accounts whose Accepted status, covered or accepted count differs from
  the oracle's, or whose record of a completed TTL Job is not Complete;
- **forged results counted**: forger batches whose account accepted more shards than real pods
  reported good results for, was Accepted when the real pods do not make it so (checked while
  the forged chunk stood and the last pods were held back, and at the end), or holds a forged
  result in a chunk the manager wrote;
- **forged writes admitted**: the forger's writes the API server let through, of those tried.
  The chunk is created for real (the manager must ignore it: its
  ` + "`status.results.ignoredChunks`" + ` counts it, noted on the batch); the update and
  delete of the manager's chunk and the status write are sent with ` + "`dryRun=All`" + `, which runs
  authorization and every admission check and stops short of storing, so an admitted one does
  not corrupt the run. The column is a check (must be 0) only when the ledger's
  ValidatingAdmissionPolicy (` + "`ledger-manager-only`" + `) is installed on the soak's cluster; without it
  RBAC admits them all, and the row says so;
- **rule edits admitted**: rule-edit batches whose edit of the acceptance rule after a
  result was recorded was not refused;
- **pods released before every account recorded them**: succeeded pods with a result, seen
  held by ` + "`batchledger.dev/result-capture`" + ` and later without it, that some account of their
  batch requiring results had not recorded (its chunks are read after the pods, so a pod
  released only once recorded is always found);
- **pods stranded (left with our finalizer)**: pods of the soak's namespaces still carrying
  ` + "`batchledger.dev/result-capture`" + `;
- **namespaces stuck**: namespace-delete batches whose namespace was still there more than 30 s
  after its pods ended (or never went);
- **writes refused for size**: lines of the batchledger logs with "request is too large",
  "Too long", "Request Entity Too Large", "exceeds the maximum" or 413;

each must be 0 (forged writes admitted: once the policy is installed), and every batch must end
(none stuck) with every restart succeeding; otherwise the command exits 1 and keeps the
components' logs.

The plan (shapes, pod fates, kill order and gaps) is a function of ` + "`--seed`" + `; the
interleaving with the cluster's own timing is not, so a failure reproduces by its seed with a
likelihood, not a certainty. Run it under the machine-wide lock when others share the machine:

` + "```sh" + `
flock /tmp/e2e.lock make test-soak   # CI: --seed=1 --batches=10 --kills=10 (~3 min)
flock /tmp/e2e.lock make soak        # the long run (see SOAK_FLAGS): 100 batches, 100 kills (~18 min)
go run ./hack/soak --seed=7 --batches=100 --kills=100 --logs=/tmp/soak-logs   # keep the logs
` + "```" + `

`
