// Command bench runs batchledger's benchmarks, each on fresh local clusters
// (internal/testsupport/localcluster) owned by this process and stopped at the end.
//
// `go run ./hack/bench` (`make bench`) is the load benchmark: for each mode and
// size it runs BatchAccounts over Indexed Jobs submitted through a Kueue LocalQueue, their
// pods finished by kwok's auto-exit stage, and measures over the same window:
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
// Beside the controller runs the watch floor (floor.go): the controller's caches alone,
// whose CPU is what decoding the watched objects costs whatever the controller does.
//
// It prints a table and, with --out, rewrites the load section of docs/benchmarks.md.
//
//	go run ./hack/bench --sizes=5x10,20x50 --exit-delay=1s
//
// `go run ./hack/bench baseline` (`make bench-baseline`) instead runs Kueue's
// scheduler-performance baseline, scaled, with and without batchledger (baseline.go).
//
// The files split the work by concern: config.go the flags of both, load.go and
// baseline.go running a scenario (coverage.go what the load's watches record,
// generator.go the baseline's Kueue generator config), cluster.go the cluster of a run
// and the watches on it, sample.go the cost counters read from /proc and the controller's
// metrics, report.go the tables and the Markdown sections.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The clients it drives log through controller-runtime: errors go to stderr, apart
	// from the tables on stdout (unset, controller-runtime prints a stack trace instead).
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	if len(os.Args) > 1 && os.Args[1] == watchFloorCommand {
		exit("bench "+watchFloorCommand, runWatchFloor(ctx, os.Args[2:]), 1)
	}
	if len(os.Args) > 1 && os.Args[1] == "baseline" {
		cfg, err := parseBaselineFlags(os.Args[2:])
		if err != nil {
			exit("bench baseline", err, 2)
		}
		exit("bench baseline", runBaseline(ctx, cfg), 1)
	}
	cfg, err := parseLoadFlags(os.Args[1:])
	if err != nil {
		exit("bench", err, 2)
	}
	exit("bench", runLoad(ctx, cfg), 1)
}

// exit ends the command: 0 without err, else code after printing err.
func exit(who string, err error, code int) {
	if err == nil {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", who, err)
	os.Exit(code)
}
