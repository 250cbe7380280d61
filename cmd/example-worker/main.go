// Command example-worker is a minimal batch worker that reports its shard result to
// batchledger through its termination message; see pkg/worker. Use it as the model for
// a real inference or training worker's last step.
package main

import (
	"flag"
	"fmt"
	"os"

	"batchledger.dev/batchledger/pkg/worker"
)

func main() {
	path := flag.String("termination-log", "/dev/termination-log", "where the kubelet reads the termination message")
	flag.Parse()
	cfg, err := worker.ConfigFromEnv(os.Getenv)
	if err != nil {
		fail(err)
	}
	r, err := worker.Process(cfg)
	if err != nil {
		fail(err)
	}
	if err := worker.WriteTerminationMessage(*path, r); err != nil {
		fail(err)
	}
	fmt.Printf("shard %s done: %d/%d records valid, output %s\n", r.Shard, r.Valid, r.Records, r.Output)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "example-worker:", err)
	// A failure message the operator can read in `kubectl describe pod`; exit 1 fails
	// the index so the Job's backoff and failure policies apply.
	_ = os.WriteFile("/dev/termination-log", []byte(err.Error()), 0o644)
	os.Exit(1)
}
