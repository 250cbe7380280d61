package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fatih/color"
	"github.com/mattn/go-runewidth"
	"github.com/spf13/cobra"
	"github.com/vbauerster/cupwriter"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/completion"
	"batchledger.dev/batchledger/pkg/cli/explanation"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/resolve"
	"batchledger.dev/batchledger/pkg/indexset"
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
}

func newWatchCommand(o *options.Options) *cobra.Command {
	wo := watchOptions{jobs: defaultWatchJobs, window: defaultRateWindow, redraw: defaultRedrawEvery}
	cmd := &cobra.Command{
		Use:   "watch (account|workload|job|jobset) NAME",
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
			return runWatch(cmd.Context(), c, o.Out, ns, kind, name, wo)
		},
	}
	cmd.Flags().DurationVar(&wo.timeout, "timeout", 0, "Give up after this long (exit 1); 0 waits until the batch is Accepted or blocked.")
	cmd.Flags().IntVar(&wo.jobs, "jobs", wo.jobs, "Bars for at most this many Jobs, the slowest first; the rest share one line.")
	cmd.Flags().DurationVar(&wo.window, "rate-window", wo.window, "The sliding window the rate (and so the ETA) is measured over.")
	cmd.Flags().BoolVar(&wo.plain, "plain", false, "One plain line per change even on a terminal.")
	return cmd
}

// watchOutcome is where a batch stands for `watch`.
type watchOutcome int

const (
	outcomePending watchOutcome = iota
	outcomeAccepted
	outcomeBlocked
)

// jobProgress is one target's progress: its mapped indexes that completed.
type jobProgress struct {
	Name     string
	Done     int
	Total    int
	Terminal string
	Found    bool
	// Deleted: the Job was deleted after it was observed; its record stands.
	Deleted bool
	// Observed is false until the controller wrote the target's status.
	Observed bool
}

// batchProgress is what a frame shows of one account; it depends only on the account.
type batchProgress struct {
	Namespace, Name string
	Total, Covered  int
	Accepted        int
	RequireResults  bool
	Rejected        int
	Conflicts       int
	// Jobs are the targets, slowest (least done) first.
	Jobs []jobProgress
	// Reason and Message are the Accepted condition's.
	Reason, Message string
	Needed          []string
	Outcome         watchOutcome
	// Blocked says why the batch can no longer be accepted without repair.
	Blocked string
	// Stale is true while the status describes an older spec generation.
	Stale bool
}

// progressOf derives a frame's view of an account from its spec and status.
func progressOf(ba *v1alpha1.BatchAccount) batchProgress {
	st := &ba.Status
	ex := explanation.BuildExplanation(ba, nil, explanation.DefaultMaxRows)
	p := batchProgress{
		Namespace: ba.Namespace, Name: ba.Name,
		Total: int(st.Shards.Total), Covered: int(st.Shards.Covered), Accepted: int(st.Shards.Accepted),
		RequireResults: ba.Spec.Acceptance != nil && ba.Spec.Acceptance.RequireResults,
		Rejected:       int(st.Results.Rejected), Conflicts: int(st.Results.Conflicts),
		Reason: ex.Verdict.Reason, Message: ex.Verdict.Message, Needed: ex.StillNeeded,
		Stale: len(st.Conditions) > 0 && st.ObservedGeneration < ba.Generation,
	}
	m := account.Compile(ba.Namespace, &ba.Spec)
	if p.Total == 0 {
		p.Total = m.Shards.Count()
	}
	byKey := map[string]*v1alpha1.TargetStatus{}
	for i := range st.Targets {
		byKey[st.Targets[i].Name] = &st.Targets[i]
	}
	for _, t := range m.Targets {
		jp := jobProgress{Name: v1alpha1.TargetKey(t.Key).Describe(), Total: t.Indexes.Count()}
		if ts := byKey[t.Key]; ts != nil {
			jp.Observed, jp.Found, jp.Deleted, jp.Terminal = true, ts.Found, ts.Deleted, ts.Terminal
			if ts.CompletedIndexesOmitted {
				jp.Done = min(int(ts.Succeeded), jp.Total)
			} else if done, err := indexset.Parse(ts.CompletedIndexes); err == nil {
				jp.Done = done.Intersect(t.Indexes).Count()
			}
		}
		p.Jobs = append(p.Jobs, jp)
	}
	slices.SortStableFunc(p.Jobs, func(a, b jobProgress) int {
		// Least done first; a larger remainder first among equals, then by name.
		if c := compareFraction(a, b); c != 0 {
			return c
		}
		if c := (b.Total - b.Done) - (a.Total - a.Done); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	p.Outcome, p.Blocked = outcomeOf(ba, &ex)
	return p
}

// compareFraction orders jobs by done/total without floating point.
func compareFraction(a, b jobProgress) int {
	l, r := int64(a.Done)*int64(max(b.Total, 1)), int64(b.Done)*int64(max(a.Total, 1))
	switch {
	case l < r:
		return -1
	case l > r:
		return 1
	}
	return 0
}

// outcomeOf decides when `watch` ends. Accepted ends it with success. It is blocked —
// no longer acceptable without a repair or a spec change — when the mapping is invalid,
// when a missing shard has no identity left that can complete (its Job failed, lost the
// index, terminated without it or was deleted), when a target was deleted before it
// terminated, when a result was rejected, or when a covered shard's result can no longer
// arrive (MissingResult). A status that
// describes an older spec generation decides nothing: the controller has yet to judge
// the new spec (after a repair was appended, for one).
func outcomeOf(ba *v1alpha1.BatchAccount, ex *explanation.Explanation) (watchOutcome, string) {
	st := &ba.Status
	if len(st.Conditions) == 0 || st.ObservedGeneration < ba.Generation {
		return outcomePending, ""
	}
	if ex.Verdict.Accepted {
		return outcomeAccepted, ""
	}
	blocker := account.Blocker(st)
	if blocker != nil && blocker.Type == v1alpha1.ConditionAssignmentValid {
		return outcomeBlocked, "the assignment mapping is invalid (" + blocker.Reason + ")"
	}
	var lost []explanation.MissingShard
	for _, ms := range ex.Shards.MissingShards {
		final := len(ms.WaitsFor) > 0
		for _, id := range ms.WaitsFor {
			final = final && id.Final
		}
		if final {
			lost = append(lost, ms)
		}
	}
	if len(lost) > 0 {
		first := lost[0].WaitsFor[len(lost[0].WaitsFor)-1]
		return outcomeBlocked, fmt.Sprintf("%s can no longer be covered (%s index %d: %s)",
			explanation.ShardNames(lost), v1alpha1.TargetKey(first.Target).Describe(), first.Index, first.State)
	}
	switch {
	case blocker == nil:
		return outcomePending, ""
	case blocker.Reason == v1alpha1.ReasonTargetDeleted:
		return outcomeBlocked, "a target was deleted before it terminated (TargetDeleted)"
	case blocker.Reason == v1alpha1.ReasonResultRejected:
		// The identities that reported them completed: they cannot report again.
		return outcomeBlocked, fmt.Sprintf("a shard result was rejected (%s)", blocker.Reason)
	default: // MissingResult
		return outcomeBlocked, fmt.Sprintf("no result can arrive for %d covered %s (%s)", st.Results.Missing, output.Plural(int(st.Results.Missing), "shard", "shards"), blocker.Reason)
	}
}

// rateSample is the progress observed at one time.
type rateSample struct {
	at       time.Time
	progress int
}

// rateMeter measures shards per minute over a sliding window of observed changes.
type rateMeter struct {
	window  time.Duration
	samples []rateSample
}

// observe records progress at now; progress going back (a restart) starts afresh.
func (r *rateMeter) observe(now time.Time, progress int) {
	if n := len(r.samples); n > 0 && progress < r.samples[n-1].progress {
		r.samples = nil
	}
	if n := len(r.samples); n > 0 && r.samples[n-1].progress == progress {
		return // no change: the oldest sample of this level stays, so the rate decays
	}
	r.samples = append(r.samples, rateSample{now, progress})
	// Keep one sample at or before the window's start as the anchor.
	cut := now.Add(-r.window)
	for len(r.samples) > 1 && !r.samples[1].at.After(cut) {
		r.samples = r.samples[1:]
	}
}

// perMinute is the rate over the window at now, and false while there is nothing to
// measure it by (fewer than two observations of different progress).
func (r *rateMeter) perMinute(now time.Time, current int) (float64, bool) {
	if len(r.samples) < 2 {
		return 0, false
	}
	anchor := r.samples[0]
	if cut := now.Add(-r.window); anchor.at.Before(cut) {
		// Progress at the window's start is interpolated between the observations around it:
		// a batch moves steadily between the changes a watch delivers.
		anchor = rateSample{at: cut, progress: r.samples[len(r.samples)-1].progress}
		for i := 1; i < len(r.samples); i++ {
			if a, b := r.samples[i-1], r.samples[i]; b.at.After(cut) {
				f := float64(cut.Sub(a.at)) / float64(b.at.Sub(a.at))
				anchor.progress = a.progress + int(f*float64(b.progress-a.progress))
				break
			}
		}
	}
	span := now.Sub(anchor.at)
	if span <= 0 {
		return 0, false
	}
	return float64(current-anchor.progress) / span.Minutes(), true
}

// accountWatch follows one account.
type accountWatch struct {
	ba       *v1alpha1.BatchAccount
	progress batchProgress
	// covered and accepted measure the two rates; the frame shows the one still moving
	// towards the verdict: coverage first, then results.
	covered, accepted rateMeter
	line              string // the last plain line printed, without its time
}

// watcher holds the state of one `watch` run.
type watcher struct {
	opts     watchOptions
	out      io.Writer
	start    time.Time
	names    []string // accounts watched, sorted
	accounts map[string]*accountWatch
	cw       *cupwriter.Writer
}

// runWatch resolves kind/name to accounts and watches them until they are all Accepted
// (nil), one is blocked (options.ExitNotAccepted) or the timeout passes (options.ExitError).
func runWatch(ctx context.Context, c client.WithWatch, out io.Writer, ns, kind, name string, wo watchOptions) error {
	accts, err := resolve.ResolveAccounts(ctx, c, ns, kind, name)
	if err != nil {
		return err
	}
	if wo.width <= 0 {
		wo.width = output.DefaultWidth
	}
	w := &watcher{opts: wo, out: out, start: wo.clock.Now(), accounts: map[string]*accountWatch{}}
	for i := range accts {
		w.names = append(w.names, accts[i].Name)
		w.accounts[accts[i].Name] = &accountWatch{covered: rateMeter{window: wo.window}, accepted: rateMeter{window: wo.window}}
	}
	if wo.tty {
		w.cw = cupwriter.New(out, true)
	}
	var timeout <-chan time.Time
	if wo.timeout > 0 {
		t := wo.clock.NewTimer(wo.timeout)
		defer t.Stop()
		timeout = t.C()
	}
	var redraw <-chan time.Time
	if wo.tty {
		t := wo.clock.NewTicker(wo.redraw)
		defer t.Stop()
		redraw = t.C()
	}
	for {
		// List, then watch from the list's resourceVersion; when the server ends the watch
		// (timeout, compaction), list again.
		var list v1alpha1.BatchAccountList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("listing BatchAccounts in namespace %q: %w", ns, err)
		}
		seen := map[string]bool{}
		for i := range list.Items {
			if w.accounts[list.Items[i].Name] != nil {
				seen[list.Items[i].Name] = true
				w.update(&list.Items[i])
			}
		}
		for _, n := range w.names {
			if !seen[n] {
				return w.finish(fmt.Errorf("BatchAccount %q was deleted in namespace %q while watching it", n, ns))
			}
		}
		if done, err := w.decide(); done {
			return err
		}
		w.draw(false)
		wi, err := c.Watch(ctx, &v1alpha1.BatchAccountList{}, &client.ListOptions{
			Namespace: ns, Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true},
		})
		if err != nil {
			return fmt.Errorf("watching BatchAccounts in namespace %q: %w", ns, err)
		}
		began := w.opts.clock.Now()
		done, err := w.follow(ctx, wi, timeout, redraw)
		wi.Stop()
		if done {
			return err
		}
		if w.opts.clock.Since(began) < time.Second {
			// A watch the server ends at once must not turn into a list loop.
			select {
			case <-ctx.Done():
				return w.finish(ctx.Err())
			case <-w.opts.clock.After(time.Second):
			}
		}
	}
}

// follow consumes one watch until it ends (false: list again) or the run is decided.
func (w *watcher) follow(ctx context.Context, wi watch.Interface, timeout, redraw <-chan time.Time) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return true, w.finish(ctx.Err())
		case <-timeout:
			return true, w.finish(&options.CodeError{Code: options.ExitError, Err: fmt.Errorf("timed out after %s waiting for %s to be Accepted", w.opts.timeout, w.subject())})
		case <-redraw:
			w.draw(false)
			if w.opts.observed != nil {
				w.opts.observed()
			}
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return false, nil
			}
			switch ev.Type {
			case watch.Error:
				if apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) || apierrors.IsGone(apierrors.FromObject(ev.Object)) {
					return false, nil
				}
				return true, w.finish(fmt.Errorf("watching BatchAccounts: %w", apierrors.FromObject(ev.Object)))
			case watch.Bookmark:
				continue
			}
			ba, isAccount := ev.Object.(*v1alpha1.BatchAccount)
			if !isAccount || w.accounts[ba.Name] == nil {
				continue
			}
			if ev.Type == watch.Deleted {
				return true, w.finish(fmt.Errorf("BatchAccount %q was deleted in namespace %q while watching it", ba.Name, ba.Namespace))
			}
			w.update(ba)
			done, err := w.decide()
			if !done {
				w.draw(false)
			}
			if w.opts.observed != nil {
				w.opts.observed()
			}
			if done {
				return true, err
			}
		}
	}
}

func (w *watcher) subject() string {
	if len(w.names) == 1 {
		return "BatchAccount " + w.names[0]
	}
	return "BatchAccounts " + strings.Join(w.names, ", ")
}

// update takes a new observation of an account and prints or draws the change.
func (w *watcher) update(ba *v1alpha1.BatchAccount) {
	aw := w.accounts[ba.Name]
	now := w.opts.clock.Now()
	aw.ba = ba.DeepCopy()
	aw.progress = progressOf(aw.ba)
	aw.covered.observe(now, aw.progress.Covered)
	aw.accepted.observe(now, aw.progress.Accepted)
	if w.opts.tty {
		return // drawn once the run is known to go on, or as the last frame
	}
	line := plainLine(&aw.progress)
	if line == aw.line {
		return
	}
	aw.line = line
	fmt.Fprintf(w.out, "%s %s%s\n", now.UTC().Format(time.RFC3339), line, w.rateText(aw, now, true))
}

// decide ends the run when every account is Accepted or one is blocked.
func (w *watcher) decide() (bool, error) {
	all := true
	for _, n := range w.names {
		aw := w.accounts[n]
		if aw.ba == nil {
			return false, nil
		}
		switch aw.progress.Outcome {
		case outcomeBlocked:
			return true, w.finish(&options.CodeError{Code: options.ExitNotAccepted, Err: fmt.Errorf("BatchAccount %s cannot be Accepted without repair: %s", n, aw.progress.Blocked)})
		case outcomePending:
			all = false
		}
	}
	if !all {
		return false, nil
	}
	return true, w.finish(nil)
}

// finish draws the last frame, leaving it on the terminal, and in plain mode says what
// is still needed of a blocked batch.
func (w *watcher) finish(err error) error {
	if w.opts.tty {
		w.draw(true)
		return err
	}
	var ce *options.CodeError
	if errors.As(err, &ce) && ce.Code == options.ExitNotAccepted {
		for _, n := range w.names {
			aw := w.accounts[n]
			if aw.progress.Outcome != outcomeBlocked {
				continue
			}
			for _, need := range aw.progress.Needed {
				fmt.Fprintf(w.out, "  needed: %s\n", need)
			}
		}
	}
	return err
}

// plainLine is one account's state in one line; it changes only when the account does.
func plainLine(p *batchProgress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s covered %d/%d (%s)", p.Namespace, p.Name, p.Covered, p.Total, percent(p.Covered, p.Total))
	if p.RequireResults {
		fmt.Fprintf(&b, " accepted %d/%d", p.Accepted, p.Total)
	}
	if p.Rejected > 0 || p.Conflicts > 0 {
		fmt.Fprintf(&b, " rejected %d conflicts %d", p.Rejected, p.Conflicts)
	}
	if len(p.Jobs) > 1 {
		done := 0
		for _, j := range p.Jobs {
			if j.Terminal != "" {
				done++
			}
		}
		fmt.Fprintf(&b, " jobs %d/%d terminated", done, len(p.Jobs))
	} else if len(p.Jobs) == 1 {
		fmt.Fprintf(&b, " %s %s", p.Jobs[0].Name, jobState(p.Jobs[0]))
	}
	fmt.Fprintf(&b, " | %s: %s", p.Reason, p.Message)
	return b.String()
}

func jobState(j jobProgress) string {
	s := fmt.Sprintf("%d/%d", j.Done, j.Total)
	switch {
	case !j.Observed:
		s += " (not observed yet)"
	case j.Deleted:
		s += " (deleted)"
		if j.Terminal != "" {
			s += " " + j.Terminal
		}
	case !j.Found:
		s += " (not found)"
	case j.Terminal != "":
		s += " " + j.Terminal
	}
	return s
}

// percent renders done/total with one decimal, never rounding up to 100%.
func percent(done, total int) string {
	if total <= 0 {
		return "0%"
	}
	per := int64(done) * 1000 / int64(total) // tenths of a percent, truncated
	if per%10 == 0 {
		return fmt.Sprintf("%d%%", per/10)
	}
	return fmt.Sprintf("%d.%d%%", per/10, per%10)
}

// rateText is " | 12.0 shards/min, ETA 5m" (plain) or the frame's rate line.
func (w *watcher) rateText(aw *accountWatch, now time.Time, plain bool) string {
	p := &aw.progress
	what, meter, current := "covered", &aw.covered, p.Covered
	if p.Covered >= p.Total && p.RequireResults {
		what, meter, current = "accepted", &aw.accepted, p.Accepted
	}
	rate, ok := meter.perMinute(now, current)
	var s string
	switch {
	case p.Outcome == outcomeAccepted:
		s = "done in " + duration.HumanDuration(now.Sub(w.start))
		if plain {
			return ""
		}
	case p.Outcome == outcomeBlocked:
		s = "blocked: no ETA until a repair"
	case !ok:
		s = fmt.Sprintf("rate: measuring (%s shards over the last %s)", what, shortDuration(w.opts.window))
	default:
		s = fmt.Sprintf("%.1f shards/min %s over the last %s", rate, what, shortDuration(w.opts.window))
		if left := p.Total - current; left > 0 && rate > 0 {
			eta := time.Duration(float64(left) / rate * float64(time.Minute))
			if eta < time.Second {
				s += ", ETA under a second"
			} else {
				s += ", ETA " + shortDuration(eta)
			}
		} else if left > 0 {
			s += ", ETA unknown (no progress in the window)"
		}
	}
	if plain {
		return " | " + s
	}
	return s
}

// shortDuration renders a duration to the second, without zero-valued tails.
func shortDuration(d time.Duration) string {
	d = d.Round(time.Second)
	s := d.String()
	s = strings.Replace(s, "m0s", "m", 1)
	s = strings.Replace(s, "h0m", "h", 1)
	return s
}

// palette colours the frame, or not.
type palette struct {
	accepted, covered, missing, rejected, conflict, bold, dim *color.Color
}

func newPalette(enabled bool) palette {
	p := palette{
		accepted: color.New(color.FgGreen), covered: color.New(color.FgCyan), missing: color.New(color.FgHiBlack),
		rejected: color.New(color.FgRed), conflict: color.New(color.FgMagenta), bold: color.New(color.Bold), dim: color.New(color.Faint),
	}
	for _, c := range []*color.Color{p.accepted, p.covered, p.missing, p.rejected, p.conflict, p.bold, p.dim} {
		if enabled {
			c.EnableColor()
		} else {
			c.DisableColor()
		}
	}
	return p
}

// bar draws a bar of width cells with mpb's bar filler: accepted cells first (refill),
// then covered-only cells, then missing ones.
func bar(width, total, covered, accepted int, pal palette) string {
	meta := func(c *color.Color) func(string) string { return func(s string) string { return c.Sprint(s) } }
	filler := mpb.BarStyle().Lbound("▕").Rbound("▏").
		Refiller("█").RefillerMeta(meta(pal.accepted)).
		Filler("▓").FillerMeta(meta(pal.covered)).
		Padding("░").PaddingMeta(meta(pal.missing)).
		Tip("").Build()
	var b bytes.Buffer
	stat := decor.Statistics{AvailableWidth: width, Total: int64(total), Current: int64(min(covered, total)), Refill: int64(min(accepted, covered, total))}
	if total <= 0 {
		stat.Total, stat.Current, stat.Refill = 1, 0, 0
	}
	_ = filler.Fill(&b, stat) // a bytes.Buffer does not fail
	return b.String()
}

// frameLines renders the terminal frame of the watched accounts at now, width cells
// wide: every line fits the width, so that the frame is redrawn in place exactly.
func (w *watcher) frameLines(now time.Time) []string {
	pal := newPalette(w.opts.colour)
	width, height := w.opts.width, 0
	if w.opts.size != nil {
		if cols, rows, err := w.opts.size(); err == nil && cols > 0 {
			width, height = cols, rows
		}
	}
	var lines []string
	for _, n := range w.names {
		aw := w.accounts[n]
		if aw.ba == nil {
			continue
		}
		lines = append(lines, renderFrame(&aw.progress, w.rateText(aw, now, false), now.Sub(w.start), w.opts.jobs, width, pal)...)
	}
	if height > 1 && len(lines) > height-1 {
		more := len(lines) - (height - 2)
		lines = append(lines[:height-2], fit(width, seg{text: fmt.Sprintf("… %d more lines: the terminal is too small for the frame", more), c: pal.dim}))
	}
	return lines
}

// renderFrame renders one account's frame: a title, the overall bar, the slowest Jobs'
// bars and the folded rest, the rate and ETA, the verdict and what is still needed.
func renderFrame(p *batchProgress, rate string, elapsed time.Duration, jobs, width int, pal palette) []string {
	var lines []string
	add := func(s string, c *color.Color) { lines = append(lines, fit(width, seg{text: s, c: c})) }
	title := fmt.Sprintf("BatchAccount %s/%s", p.Namespace, p.Name)
	if p.Stale {
		title += " (status of an older spec generation)"
	}
	add(fmt.Sprintf("%s · watching for %s", title, shortDuration(elapsed)), pal.bold)

	// Labels are padded to a common width so that the bars line up.
	labelW := runewidth.StringWidth("shards")
	shown := p.Jobs[:min(len(p.Jobs), jobs)]
	for _, j := range shown {
		labelW = max(labelW, min(runewidth.StringWidth(j.Name), 24))
	}
	barW := max(10, min(40, width-labelW-50))
	label := func(s string) string { return runewidth.FillRight(runewidth.Truncate(s, labelW, "…"), labelW) }

	barSeg := func(total, covered, accepted int) seg {
		return seg{text: bar(barW, total, covered, accepted, pal), rendered: true, width: barW}
	}
	accepted := p.Accepted
	if !p.RequireResults {
		accepted = 0
	}
	segs := []seg{{text: "  " + label("shards") + " "}, barSeg(p.Total, p.Covered, accepted),
		{text: fmt.Sprintf(" %d/%d covered %s", p.Covered, p.Total, percent(p.Covered, p.Total))}}
	if p.RequireResults {
		segs = append(segs, seg{text: fmt.Sprintf(" · %d accepted", p.Accepted), c: pal.accepted})
	}
	if p.Rejected > 0 || p.Conflicts > 0 {
		segs = append(segs, seg{text: fmt.Sprintf(" · %d rejected", p.Rejected), c: pal.rejected})
		if p.Conflicts > 0 {
			segs = append(segs, seg{text: fmt.Sprintf(" · %d conflicts", p.Conflicts), c: pal.conflict})
		}
	}
	lines = append(lines, fit(width, segs...))
	for _, j := range shown {
		state := fmt.Sprintf(" %d/%d indexes %s", j.Done, j.Total, percent(j.Done, j.Total))
		switch {
		case !j.Observed:
			state += " · not observed yet"
		case j.Deleted && j.Terminal != "":
			state += " · " + j.Terminal + ", deleted"
		case j.Deleted:
			state += " · deleted"
		case !j.Found:
			state += " · not found"
		case j.Terminal != "":
			state += " · " + j.Terminal
		}
		lines = append(lines, fit(width, seg{text: "  " + label(j.Name) + " "}, barSeg(j.Total, j.Done, 0), seg{text: state}))
	}
	if rest := p.Jobs[len(shown):]; len(rest) > 0 {
		done, total, terminated := 0, 0, 0
		for _, j := range rest {
			done, total = done+j.Done, total+j.Total
			if j.Terminal != "" {
				terminated++
			}
		}
		add(fmt.Sprintf("  … %d more %s: %d/%d indexes %s, %d terminated", len(rest), output.Plural(len(rest), "Job", "Jobs"), done, total, percent(done, total), terminated), pal.dim)
	}
	add("  "+rate, nil)
	verdict := "NOT ACCEPTED"
	vc := pal.bold
	switch p.Outcome {
	case outcomeAccepted:
		verdict, vc = "ACCEPTED", pal.accepted
	case outcomeBlocked:
		verdict, vc = "BLOCKED", pal.rejected
	}
	add(fmt.Sprintf("  verdict: %s (%s): %s", verdict, p.Reason, p.Message), vc)
	if p.Outcome == outcomeBlocked {
		add("  cannot be accepted without repair: "+p.Blocked, pal.rejected)
	}
	// What is still needed is the point of the frame: wrapped, not cut, up to a bound.
	const indent = "          "
	needed := p.Needed
	if len(needed) > maxNeeded {
		more := len(needed) - (maxNeeded - 1)
		needed = append(slices.Clip(needed[:maxNeeded-1]), fmt.Sprintf("… and %d more: kubectl batchledger explain account %s -n %s", more, p.Name, p.Namespace))
	}
	for i, n := range needed {
		for j, l := range wrapWords(n, width-1-len(indent), 3) {
			prefix := indent
			if i == 0 && j == 0 {
				prefix = "  needed: "
			}
			add(prefix+l, nil)
		}
	}
	return lines
}

// wrapWords breaks s into lines of at most width cells at spaces, at most maxLines of
// them, the last cut with "…" when more was left.
func wrapWords(s string, width, maxLines int) []string {
	var lines []string
	var cur strings.Builder
	curW := 0
	for _, word := range strings.Fields(s) {
		ww := runewidth.StringWidth(word)
		if curW > 0 && curW+1+ww > width {
			lines = append(lines, cur.String())
			cur.Reset()
			curW = 0
		}
		if curW > 0 {
			cur.WriteByte(' ')
			curW++
		}
		cur.WriteString(word)
		curW += ww
	}
	if curW > 0 {
		lines = append(lines, cur.String())
	}
	if len(lines) > maxLines {
		lines = lines[:maxLines]
		lines[maxLines-1] = runewidth.Truncate(lines[maxLines-1]+" …", width, "…")
	}
	return lines
}

// seg is a piece of a frame line with its colour; rendered is set for a piece already
// coloured (a bar) whose width is known.
type seg struct {
	text     string
	c        *color.Color
	rendered bool
	width    int
}

// fit joins segments into a line of fewer than width cells: the text is cut before it is
// coloured, so that no colour sequence is ever cut and the frame never wraps.
func fit(width int, segs ...seg) string {
	var b strings.Builder
	room := width - 1
	for _, s := range segs {
		if s.rendered {
			if s.width > room {
				break
			}
			b.WriteString(s.text)
			room -= s.width
			continue
		}
		t := s.text
		if w := runewidth.StringWidth(t); w > room {
			t = runewidth.Truncate(t, room, "…")
		}
		room -= runewidth.StringWidth(t)
		if s.c != nil {
			t = s.c.Sprint(t)
		}
		b.WriteString(t)
		if room <= 0 {
			break
		}
	}
	return b.String()
}

// draw redraws the frame in place; last leaves it on the terminal for good.
func (w *watcher) draw(last bool) {
	if w.cw == nil {
		return
	}
	lines := w.frameLines(w.opts.clock.Now())
	for _, l := range lines {
		w.cw.WriteString(l)
		w.cw.WriteByte('\n')
	}
	n := len(lines)
	if last {
		n = 0
	}
	_ = w.cw.Flush(n) // a failing terminal write leaves nothing better to do
}
