// Command example-worker is a minimal batch worker that reports its shard result to
// batchledger through its termination message; see pkg/worker. Use it as the model for
// a real inference or training worker's last step. It processes the shard the pod was
// told (BATCH_SHARD, from the pod annotation batchledger.dev/shard through the downward
// API), else the one BATCH_SHARDS and its completion index give.
//
// Its run can be scripted through the environment (pkg/worker's Plan: work time, held
// indexes, failing attempts, peers to resolve), which the kind e2e tests and demo use to
// get success, failure and retries from a real kubelet.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"batchledger.dev/batchledger/pkg/worker"
)

func main() {
	path := flag.String("termination-log", "/dev/termination-log", "where the kubelet reads the termination message")
	flag.Parse()
	cfg, err := worker.ConfigFromEnv(os.Getenv)
	if err != nil {
		fail(*path, err, 1)
	}
	plan, err := worker.PlanFromEnv(os.Getenv, cfg.Index)
	if err != nil {
		fail(*path, err, 1)
	}
	// The kubelet stops a container with SIGTERM (pod deleted, Job suspended, preempted).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := plan.Run(ctx, net.DefaultResolver, time.Second); err != nil {
		fail(*path, fmt.Errorf("index %d stopped before its work was done: %w", cfg.Index, err), 143)
	}
	if plan.Fail {
		fail(*path, fmt.Errorf("index %d attempt %d fails as planned (%s)", cfg.Index, plan.Attempt, worker.EnvFailIndexes), plan.ExitCode)
	}
	r, err := worker.Process(cfg)
	if err != nil {
		fail(*path, err, 1)
	}
	if err := worker.WriteTerminationMessage(*path, r); err != nil {
		fail(*path, err, 1)
	}
	told := "from " + worker.EnvShards
	if cfg.AssignedShard != "" {
		told = "assigned by account " + cfg.Account
	}
	fmt.Printf("shard %s (%s) done: %d/%d records valid, output %s\n", r.Shard, told, r.Valid, r.Records, r.Output)
}

// fail writes a failure message the operator can read in `kubectl describe pod` and exits
// with code, which fails the index so the Job's backoff and failure policies apply.
func fail(path string, err error, code int) {
	fmt.Fprintln(os.Stderr, "example-worker:", err)
	_ = os.WriteFile(path, []byte(err.Error()), 0o644)
	os.Exit(code)
}
