// Command kubectl-batchledger is the kubectl plugin of batchledger: installed on PATH it
// runs as `kubectl batchledger explain|get|repair`. The commands live in pkg/cli.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"batchledger.dev/batchledger/pkg/cli"
	"batchledger.dev/batchledger/pkg/cli/options"
)

func main() {
	// controller-runtime complains on stderr when its logger is never set; the plugin
	// reports through its output and exit code instead.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Execute(ctx, os.Args[1:], options.StdStreams())
	stop()
	os.Exit(code)
}
