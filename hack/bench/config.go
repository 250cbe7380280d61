package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// loadConfig holds the load benchmark's flags.
type loadConfig struct {
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
	watchFloor     bool
	modes          []string
	// controllerArgs are more flags for the controller, to measure a setting without a
	// rebuild (--controller-arg=--concurrent-account-syncs=10).
	controllerArgs []string
	// controllerEnv are NAME=VALUE pairs added to the environment of the controller and
	// of the watch floor alike, to measure a Go runtime setting (--controller-env=GOGC=200)
	// without making the floor a different program.
	controllerEnv []string
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
	// modeLate: every account (coverage only) is created once each of its Jobs has
	// completed an index: the Jobs started unlabelled, so their pods are in no pod cache
	// and the controller reads them through a cache of each late Job's own
	// (controller.LatePods).
	modeLate = "late"
)

// size is one benchmark size: jobs Indexed Jobs of indexes completions each.
type size struct{ jobs, indexes int }

func (s size) String() string { return fmt.Sprintf("%dx%d", s.jobs, s.indexes) }

// parseLoadFlags reads the load benchmark's command line (without the program name); a
// bad flag exits, as for any command.
func parseLoadFlags(args []string) (loadConfig, error) {
	return parseLoadFlagSet(flag.NewFlagSet("bench", flag.ExitOnError), args)
}

// parseLoadFlagSet defines the load benchmark's flags on fs and parses args with it.
func parseLoadFlagSet(fs *flag.FlagSet, args []string) (loadConfig, error) {
	var cfg loadConfig
	sizes := fs.String("sizes", "5x10,20x50,40x100", "comma-separated sizes JOBSxINDEXES, run in order on one cluster")
	fs.IntVar(&cfg.jobsPerAccount, "jobs-per-account", 5, "Jobs per BatchAccount (N accounts = ceil(jobs / this))")
	fs.IntVar(&cfg.parallelism, "parallelism", 10, "parallelism of each Job (capped at its indexes)")
	fs.DurationVar(&cfg.exitDelay, "exit-delay", time.Second, "how long each pod runs before kwok finishes it (auto-exit-delay)")
	fs.IntVar(&cfg.nodes, "nodes", 4, "fake GPU nodes")
	fs.IntVar(&cfg.gpus, "gpus-per-node", 64, "nvidia.com/gpu per node; the ClusterQueue's GPU quota is nodes x this")
	fs.StringVar(&cfg.binary, "binary", "", "batchledger controller binary (default <repo>/bin/batchledger)")
	fs.StringVar(&cfg.out, "out", "", "when set (docs/benchmarks.md), rewrite the load section of this Markdown file")
	fs.DurationVar(&cfg.timeout, "timeout", 15*time.Minute, "limit for one size")
	fs.StringVar(&cfg.pprofOut, "pprof", "", "when set, run the controller with --pprof-bind-address and write a CPU profile of the last size to this file")
	fs.BoolVar(&cfg.watchFloor, "watch-floor", true, "run the watch floor beside the controller: its caches alone, without reconciling (floor.go)")
	fs.IntVar(&cfg.pprofSeconds, "pprof-seconds", 60, "length of the --pprof CPU profile, started just before the last size's first create")
	fs.Func("controller-arg", "one more flag for the batchledger controller, e.g. --controller-arg=--concurrent-account-syncs=10 (repeatable)", func(v string) error {
		if !strings.HasPrefix(v, "--") {
			return fmt.Errorf("want a flag such as --concurrent-account-syncs=10, got %q", v)
		}
		cfg.controllerArgs = append(cfg.controllerArgs, v)
		return nil
	})
	fs.Func("controller-env", "NAME=VALUE added to the environment of the controller and of the watch floor, e.g. --controller-env=GOMAXPROCS=1 (repeatable)", func(v string) error {
		if name, _, ok := strings.Cut(v, "="); !ok || name == "" {
			return fmt.Errorf("want NAME=VALUE, got %q", v)
		}
		cfg.controllerEnv = append(cfg.controllerEnv, v)
		return nil
	})
	modes := fs.String("modes", modeCoverage, "comma-separated modes, each run at every size: coverage (accounts count coverage), results (accounts require results), mixed (one Job in ten has an account), late (accounts created after their Jobs started)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	for m := range strings.SplitSeq(*modes, ",") {
		if m != modeCoverage && m != modeResults && m != modeMixed && m != modeLate {
			return cfg, fmt.Errorf("--modes: unknown mode %q", m)
		}
		cfg.modes = append(cfg.modes, m)
	}
	var err error
	if cfg.sizes, err = parseSizes(*sizes); err != nil {
		return cfg, err
	}
	cfg.command = "go run ./hack/bench " + strings.Join(args, " ")
	return cfg, nil
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

// baselineConfig holds the baseline's flags.
type baselineConfig struct {
	generator       string
	scale           float64
	cohorts, queues int
	rounds          int
	// warmups are runs of the first mode before the first round, reported but not
	// counted: the invocation's first run otherwise starts on an idle machine, which
	// favours whichever mode comes first.
	warmups           int
	gpusPerNode       int
	timeout           time.Duration
	binary            string
	out               string
	command           string
	modes             []string
	generatorRelative string
	// apiPprof, when set, is the prefix of the API server's CPU profiles: one per run,
	// <apiPprof>-<mode>-r<round>.pprof, of apiPprofSeconds from its first submission.
	apiPprof        string
	apiPprofSeconds int
	// pprof, when set, is the prefix of the controller's CPU profiles: one per run with
	// batchledger, <pprof>-r<round>.pprof, of pprofSeconds from its first submission.
	pprof        string
	pprofSeconds int
	// watchFloor runs the watch floor beside the controller in the runs with batchledger.
	// Off by default: its watches are load on the API server, which the target compares.
	watchFloor bool
}

// Modes of the baseline.
const (
	// modeWithout: no batchledger at all.
	modeWithout = "without"
	// modeWith: the batchledger controller runs and a BatchAccount is created before every Job.
	modeWith = "with"
	// modePaced: a control, no batchledger, but a ConfigMap created where modeWith creates
	// the BatchAccount: the same extra request before each Job.
	modePaced = "paced"
)

// parseBaselineFlags reads the baseline's command line (after "baseline").
func parseBaselineFlags(args []string) (baselineConfig, error) {
	fs := flag.NewFlagSet("baseline", flag.ExitOnError)
	var cfg baselineConfig
	fs.StringVar(&cfg.generator, "generator", "", "generator.yaml (default: Kueue's "+kueueBaselineGenerator+" from the module cache)")
	fs.Float64Var(&cfg.scale, "scale", 0.1, "factor on every workloads-set count (rounded, at least 1)")
	fs.IntVar(&cfg.cohorts, "cohorts", 1, "at most this many cohorts per cohort set (0: as in the config)")
	fs.IntVar(&cfg.queues, "queues", 6, "at most this many ClusterQueues per queue set (0: as in the config)")
	fs.IntVar(&cfg.rounds, "rounds", 2, "rounds of one run without and one with batchledger, order alternating")
	fs.IntVar(&cfg.warmups, "warmups", 1, "runs of the first mode before the first round, reported on stderr but not counted")
	fs.IntVar(&cfg.gpusPerNode, "gpus-per-node", 64, "nvidia.com/gpu per fake node; nodes hold the sum of the nominal quotas")
	fs.DurationVar(&cfg.timeout, "timeout", 6*time.Minute, "limit for one run, cluster start-up included")
	fs.StringVar(&cfg.binary, "binary", "", "batchledger controller binary (default <repo>/bin/batchledger)")
	fs.StringVar(&cfg.out, "out", "", "when set (docs/benchmarks.md), rewrite the baseline section of this Markdown file")
	fs.StringVar(&cfg.apiPprof, "apiserver-pprof", "", "when set, serve kube-apiserver's /debug/pprof and write a CPU profile of each run to <this>-<mode>-r<round>.pprof (compare them with go tool pprof -diff_base)")
	fs.IntVar(&cfg.apiPprofSeconds, "apiserver-pprof-seconds", 90, "length of each --apiserver-pprof profile, from the run's first submission")
	fs.StringVar(&cfg.pprof, "pprof", "", "when set, run the controller with --pprof-bind-address and write a CPU profile of each run with batchledger to <this>-r<round>.pprof")
	fs.IntVar(&cfg.pprofSeconds, "pprof-seconds", 120, "length of each --pprof profile, from the run's first submission")
	fs.BoolVar(&cfg.watchFloor, "watch-floor", false, "run the watch floor beside the controller in the runs with batchledger (its watches add to the API server's CPU, so not for the 110% comparison)")
	modes := fs.String("modes", modeWithout+","+modeWith, "modes of the first round, in order (later rounds alternate); paced is a control: no batchledger, but a ConfigMap created where with creates the BatchAccount")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	for m := range strings.SplitSeq(*modes, ",") {
		if m != modeWith && m != modeWithout && m != modePaced {
			return cfg, fmt.Errorf("mode %q: want with, without or paced", m)
		}
		cfg.modes = append(cfg.modes, m)
	}
	if cfg.scale <= 0 || cfg.rounds < 1 || cfg.gpusPerNode < 1 || cfg.warmups < 0 {
		return cfg, errors.New("--scale, --rounds and --gpus-per-node must be positive, --warmups not negative")
	}
	cfg.command = strings.TrimSpace("go run ./hack/bench baseline " + strings.Join(args, " "))
	return cfg, nil
}
