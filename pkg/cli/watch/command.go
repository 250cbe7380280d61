// Package watch is the plugin's `watch` verb: it follows the accounts an object concerns
// through a watch on the API server (watcher.go) until they are Accepted or blocked,
// derives each account's progress and outcome (progress.go) and rate (rate.go), and
// draws it as a terminal frame or plain lines (frame.go).
package watch

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/utils/clock"

	"batchledger.dev/batchledger/pkg/cli/completion"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/resolve"
)

// Defaults of `watch`. It ends as `kubectl wait` would: options.ExitOK once every account watched
// is Accepted, options.ExitNotAccepted as soon as one can no longer be accepted without repair,
// options.ExitError on --timeout (and on any other error).
const (
	defaultWatchJobs   = 5
	defaultRateWindow  = 5 * time.Minute
	defaultRedrawEvery = time.Second
	// maxNeeded bounds the still-needed entries of a frame; explain lists them all.
	maxNeeded = 4
)

// watchOptions are watch's flags and seams.
type watchOptions struct {
	// timeout ends the watch with options.ExitError; 0 waits for ever.
	timeout time.Duration
	// jobs is how many Jobs get a bar of their own: the slowest; the rest are folded.
	jobs int
	// window is the span the rate is measured over.
	window time.Duration
	// plain forces one line per change even on a terminal.
	plain bool
	// redraw is how often a terminal frame is redrawn between changes (elapsed, rate, ETA).
	redraw time.Duration

	// clock drives elapsed time, the rate, redraws and the timeout; tests pass a fake.
	clock clock.WithTicker
	// tty, width and colour describe the output; set from the output stream by default.
	tty    bool
	width  int
	colour bool
	// size, when set, reads the terminal's size again before each frame (it may be
	// resized); a frame never holds more lines than the terminal, or it could not be
	// redrawn in place.
	size func() (width, height int, err error)
	// observed, when set, is told after each processed watch event (tests wait on it).
	observed func()
	// warn, when set, is told of each account naming the object that does not follow its
	// run (resolve.Resolve), and so is not watched: stderr.
	warn io.Writer
}

// NewCommand is `watch KIND NAME`, KIND an account, a Workload or any kind of target.
func NewCommand(o *options.Options) *cobra.Command {
	wo := watchOptions{jobs: defaultWatchJobs, window: defaultRateWindow, redraw: defaultRedrawEvery}
	cmd := &cobra.Command{
		Use:   resolve.KindNameUse("watch"),
		Short: "Watch a batch move: coverage and acceptance bars, rate, ETA, verdict and what is still needed",
		Long: `Watch follows the accounts an object concerns through a watch on the API server (no
polling) and redraws in place on a terminal: an overall bar of covered, accepted and
rejected shards out of the total, one bar per Job (the slowest first, the rest folded into
one line), the observed rate over a sliding window with an ETA, the verdict and what is
still needed. Without a terminal (CI logs, | tee) it prints one plain line per change.

It exits like kubectl wait: 0 once every account is Accepted; 2 as soon as one can no
longer be accepted without repair (a missing shard whose identities can no longer
complete, e.g. its Job failed, terminated without it or was deleted; a rejected result;
a result that can no longer arrive; an invalid mapping); 1 on --timeout.`,
		Example: `  kubectl batchledger watch account ij245 -n ml-team
  kubectl batchledger watch job j --timeout 30m
  kubectl batchledger watch jobset train | tee watch.log   # plain lines`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completion.KindName(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := resolve.ParseKindName(args)
			if err != nil {
				return err
			}
			if wo.jobs < 0 {
				return fmt.Errorf("--jobs must not be negative")
			}
			if wo.window <= 0 {
				return fmt.Errorf("--rate-window must be positive")
			}
			ns, err := o.Namespace()
			if err != nil {
				return err
			}
			c, err := o.WatchClient()
			if err != nil {
				return err
			}
			wo.clock = clock.RealClock{}
			wo.tty, wo.width, wo.colour = output.DescribeTerminal(o.Out)
			wo.tty = wo.tty && !wo.plain
			if f, ok := o.Out.(*os.File); ok && wo.tty {
				wo.size = func() (int, int, error) { return term.GetSize(int(f.Fd())) }
			}
			wo.warn = o.ErrOut
			return runWatch(cmd.Context(), c, o.Out, ns, kind, name, wo)
		},
	}
	cmd.Flags().DurationVar(&wo.timeout, "timeout", 0, "Give up after this long (exit 1); 0 waits until the batch is Accepted or blocked.")
	cmd.Flags().IntVar(&wo.jobs, "jobs", wo.jobs, "Bars for at most this many Jobs, the slowest first; the rest share one line.")
	cmd.Flags().DurationVar(&wo.window, "rate-window", wo.window, "The sliding window the rate (and so the ETA) is measured over.")
	cmd.Flags().BoolVar(&wo.plain, "plain", false, "One plain line per change even on a terminal.")
	return cmd
}
