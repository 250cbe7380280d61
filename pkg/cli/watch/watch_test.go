package watch

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/resolve"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// signallingClient tells the test when the watch is established, so that the changes the
// test makes afterwards are all seen by it (the fake client replays nothing).
type signallingClient struct {
	client.WithWatch
	watching chan struct{}
	last     watch.Interface
}

func (c *signallingClient) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	wi, err := c.WithWatch.Watch(ctx, list, opts...)
	c.last = wi
	c.watching <- struct{}{}
	return wi, err
}

// watchRun is one runWatch in the background, driven step by step by a test.
type watchRun struct {
	t        *testing.T
	c        *signallingClient
	clk      *testingclock.FakeClock
	out      bytes.Buffer
	observed chan struct{}
	done     chan error
}

// startWatch runs `watch account NAME` against objs with a fake clock at time0.
func startWatch(t *testing.T, name string, wo watchOptions, objs ...client.Object) *watchRun {
	t.Helper()
	r := &watchRun{
		t: t, c: &signallingClient{WithWatch: clitest.FakeClient(objs...), watching: make(chan struct{}, 4)},
		clk: testingclock.NewFakeClock(clitest.Time0), observed: make(chan struct{}, 64), done: make(chan error, 1),
	}
	wo.clock = r.clk
	wo.observed = func() { r.observed <- struct{}{} }
	if wo.jobs == 0 {
		wo.jobs = defaultWatchJobs
	}
	if wo.window == 0 {
		wo.window = defaultRateWindow
	}
	if wo.redraw == 0 {
		wo.redraw = time.Hour // no redraw tick unless a test steps the clock that far
	}
	go func() { r.done <- runWatch(t.Context(), r.c, &r.out, ns, resolve.KindAccount, name, wo) }()
	return r
}

// waitWatching waits until the watch is established, or the run ended before it.
func (r *watchRun) waitWatching() {
	r.t.Helper()
	select {
	case <-r.c.watching:
	case err := <-r.done:
		r.t.Fatalf("watch ended before watching: %v\n%s", err, r.out.String())
	}
}

// setStatus writes the status of step onto the account after stepping the clock by d,
// and waits until the watch processed it.
func (r *watchRun) setStatus(d time.Duration, step *v1alpha1.BatchAccount) {
	r.t.Helper()
	r.clk.Step(d)
	var cur v1alpha1.BatchAccount
	if err := r.c.Get(r.t.Context(), client.ObjectKeyFromObject(step), &cur); err != nil {
		r.t.Fatal(err)
	}
	cur.Status = step.Status
	if err := r.c.Status().Update(r.t.Context(), &cur); err != nil {
		r.t.Fatal(err)
	}
	select {
	case <-r.observed:
	case <-time.After(10 * time.Second):
		r.t.Fatalf("the watch did not process the change:\n%s", r.out.String())
	}
}

// wait returns the run's exit code as the plugin would end.
func (r *watchRun) wait() int {
	r.t.Helper()
	select {
	case err := <-r.done:
		var stderr bytes.Buffer
		return options.ExitCodeOf(err, &stderr)
	case <-time.After(10 * time.Second):
		r.t.Fatalf("the watch did not end:\n%s", r.out.String())
	}
	return -1
}

// TestWatchIJ245Plain: without a terminal, watch prints one line per change of IJ245,
// with the rate measured over the steps, and exits 0 once the account is Accepted.
func TestWatchIJ245Plain(t *testing.T) {
	s := clitest.SeedSteps()
	r := startWatch(t, "ij245", watchOptions{}, s.Steps[0].DeepCopy())
	r.waitWatching()
	r.setStatus(5*time.Minute, s.Steps[1])
	r.setStatus(55*time.Minute, s.Steps[2])
	r.setStatus(time.Minute, s.Steps[3])
	if code := r.wait(); code != options.ExitOK {
		t.Errorf("exit %d, want %d", code, options.ExitOK)
	}
	clitest.Golden(t, "watch_ij245_plain", r.out.Bytes())
}

// TestWatchIJ245Terminal: on a terminal, watch redraws one frame per change in place
// (cursor up over the previous frame, erase below), one on each redraw tick, and leaves
// the last frame on the screen when IJ245 is Accepted.
func TestWatchIJ245Terminal(t *testing.T) {
	s := clitest.SeedSteps()
	r := startWatch(t, "ij245", watchOptions{tty: true, width: 110, redraw: time.Hour}, s.Steps[0].DeepCopy())
	r.waitWatching()
	r.setStatus(5*time.Minute, s.Steps[1])
	r.clk.Step(55 * time.Minute) // a redraw tick: the elapsed time and the rate move on
	<-r.observed
	r.setStatus(0, s.Steps[2])
	r.setStatus(time.Minute, s.Steps[3])
	if code := r.wait(); code != options.ExitOK {
		t.Errorf("exit %d, want %d", code, options.ExitOK)
	}
	out := r.out.String()
	clitest.Golden(t, "watch_ij245_terminal", []byte(clitest.VisibleEscapes(out)))
	// Five frames: the first, two changes, a tick, and the last one drawn to stay.
	if got := strings.Count(out, "BatchAccount ml-team/ij245"); got != 5 {
		t.Errorf("%d frames drawn, want 5", got)
	}
	if strings.HasSuffix(out, "\x1b[J") || !strings.HasSuffix(out, "\n") {
		t.Errorf("the last frame must stay on the screen; the output ends in %q", out[max(0, len(out)-40):])
	}
}

// TestWatchFrames renders the frame of each IJ245 step and of a blocked, a rejected and a
// large account, at a fixed elapsed time, width and rate, in colour and without.
func TestWatchFrames(t *testing.T) {
	s := clitest.SeedSteps()
	cases := []struct {
		name   string
		ba     *v1alpha1.BatchAccount
		colour bool
		jobs   int
		width  int
	}{
		{name: "ij245_0_no_status_yet", ba: clitest.IJ245Account()},
		{name: "ij245_1_five_attempts", ba: s.Steps[0]},
		{name: "ij245_2_all_covered", ba: s.Steps[1]},
		{name: "ij245_3_complete", ba: s.Steps[2]},
		{name: "ij245_4_accepted", ba: s.Steps[3]},
		{name: "ij245_4_accepted_colour", ba: s.Steps[3], colour: true},
		{name: "failed", ba: clitest.FailedAccount()},
		{name: "rejected", ba: clitest.RejectedAccount()},
		{name: "big_100k", ba: clitest.BigAccount(), jobs: 3},
		{name: "big_100k_narrow", ba: clitest.BigAccount(), jobs: 2, width: 60},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := progressOf(tc.ba)
			width := tc.width
			if width == 0 {
				width = 100
			}
			lines := renderFrame(&p, "12.0 shards/min covered over the last 5m, ETA 5s", 7*time.Minute, max(tc.jobs, defaultWatchJobs*boolInt(tc.jobs == 0)), width, newPalette(tc.colour))
			for i, l := range lines {
				if w := visibleWidth(l); w >= width {
					t.Errorf("line %d is %d cells wide, not under %d: %q", i, w, width, l)
				}
			}
			clitest.Golden(t, "watch_frame_"+tc.name, []byte(clitest.VisibleEscapes(strings.Join(lines, "\n")+"\n")))
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// visibleWidth is the width of s in cells, colour sequences excluded.
func visibleWidth(s string) int {
	plain := s
	for {
		i := strings.Index(plain, "\x1b[")
		if i < 0 {
			break
		}
		j := strings.IndexByte(plain[i:], 'm')
		if j < 0 {
			break
		}
		plain = plain[:i] + plain[i+j+1:]
	}
	return len([]rune(plain))
}

// TestWatchExitCodes: watch ends like kubectl wait: 0 once Accepted, 2 when the batch can
// no longer be accepted without repair, 1 on --timeout; a status of an older spec
// generation decides nothing.
func TestWatchExitCodes(t *testing.T) {
	s := clitest.SeedSteps()
	invalid := wrappers.MakeBatchAccount("ij245", ns).Shards("A", "B").AssignJob("j", "0-1", "A", "A").Generation(1).Obj()
	invalid = clitest.Compute(invalid, clitest.Time0, nil)
	stale := clitest.FailedAccount()
	stale.Generation = 2 // a repair was appended; the controller has not judged it yet
	cases := []struct {
		name    string
		ba      *v1alpha1.BatchAccount
		code    int
		message string
	}{
		{name: "accepted", ba: s.Steps[3], code: options.ExitOK},
		{name: "repaired and accepted", ba: func() *v1alpha1.BatchAccount { ba, _, _ := clitest.RepairedAccount(); return ba }(), code: options.ExitOK},
		{name: "job failed with shard D missing", ba: clitest.FailedAccount(), code: options.ExitNotAccepted,
			message: "BatchAccount ij245 cannot be Accepted without repair: shard D can no longer be covered (job j index 3: job j Failed (BackoffLimitExceeded) without completing it)"},
		{name: "result rejected", ba: clitest.RejectedAccount(), code: options.ExitNotAccepted,
			message: "BatchAccount ij245 cannot be Accepted without repair: a shard result was rejected (ResultRejected)"},
		{name: "results can no longer arrive", ba: clitest.MissingResultAccount(), code: options.ExitNotAccepted,
			message: "BatchAccount ij245 cannot be Accepted without repair: no result can arrive for 4 covered shards (MissingResult)"},
		{name: "job deleted before it terminated", ba: clitest.Compute(s.Steps[0], clitest.Time0.Add(time.Hour), map[string]account.Observation{}), code: options.ExitNotAccepted,
			message: "BatchAccount ij245 cannot be Accepted without repair: shard D can no longer be covered (job j index 3: job j deleted before completing it)"},
		{name: "invalid mapping", ba: invalid, code: options.ExitNotAccepted,
			message: "BatchAccount ij245 cannot be Accepted without repair: the assignment mapping is invalid (DuplicateShard)"},
		{name: "its Job not created yet: timeout", ba: clitest.Compute(clitest.IJ245Account(), clitest.Time0, map[string]account.Observation{}), code: options.ExitError,
			message: "timed out after 30m0s waiting for BatchAccount ij245 to be Accepted"},
		{name: "still running: timeout", ba: s.Steps[0], code: options.ExitError,
			message: "timed out after 30m0s waiting for BatchAccount ij245 to be Accepted"},
		{name: "stale status: timeout", ba: stale, code: options.ExitError,
			message: "timed out after 30m0s waiting for BatchAccount ij245 to be Accepted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := startWatch(t, "ij245", watchOptions{timeout: 30 * time.Minute}, tc.ba.DeepCopy())
			if tc.code == options.ExitError {
				r.waitWatching()
				r.clk.Step(30 * time.Minute)
			}
			var err error
			select {
			case err = <-r.done:
			case <-time.After(10 * time.Second):
				t.Fatalf("the watch did not end:\n%s", r.out.String())
			}
			var stderr bytes.Buffer
			if code := options.ExitCodeOf(err, &stderr); code != tc.code {
				t.Errorf("exit %d, want %d (%v)", code, tc.code, err)
			}
			if tc.message != "" && (err == nil || err.Error() != tc.message) {
				t.Errorf("error = %v\nwant    %s", err, tc.message)
			}
			if tc.code == options.ExitNotAccepted && !strings.Contains(r.out.String(), "  needed: ") {
				t.Errorf("a blocked batch must say what is needed:\n%s", r.out.String())
			}
		})
	}
}

// TestWatchRelists: when the server ends the watch, watch lists again (after a pause, as
// the watch ended at once) and sees what changed meanwhile.
func TestWatchRelists(t *testing.T) {
	s := clitest.SeedSteps()
	r := startWatch(t, "ij245", watchOptions{}, s.Steps[0].DeepCopy())
	r.waitWatching()
	r.c.last.Stop() // the server ends the watch
	for !r.clk.HasWaiters() {
		time.Sleep(time.Millisecond) // until watch waits out its pause on the fake clock
	}
	var cur v1alpha1.BatchAccount
	if err := r.c.Get(t.Context(), client.ObjectKeyFromObject(s.Steps[3]), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Status = s.Steps[3].Status
	if err := r.c.Status().Update(t.Context(), &cur); err != nil {
		t.Fatal(err)
	}
	r.clk.Step(time.Second)
	if code := r.wait(); code != options.ExitOK {
		t.Errorf("exit %d, want %d", code, options.ExitOK)
	}
	if lines := strings.Count(r.out.String(), "\n"); lines != 2 || !strings.Contains(r.out.String(), "| Accepted: ") {
		t.Errorf("want the first line and the Accepted one after the relist:\n%s", r.out.String())
	}
}

// TestWatchDeleted: an account deleted while watched ends the watch with an error.
func TestWatchDeleted(t *testing.T) {
	s := clitest.SeedSteps()
	r := startWatch(t, "ij245", watchOptions{}, s.Steps[0].DeepCopy())
	r.waitWatching()
	if err := r.c.Delete(t.Context(), s.Steps[0].DeepCopy()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.done:
		if err == nil || err.Error() != `BatchAccount "ij245" was deleted in namespace "ml-team" while watching it` {
			t.Errorf("error = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end")
	}
}

// TestRateMeter: the rate is progress over the sliding window, from the progress
// interpolated at the window's start; a restart (progress going back) measures afresh.
func TestRateMeter(t *testing.T) {
	at := func(m int) time.Time { return clitest.Time0.Add(time.Duration(m) * time.Minute) }
	type obs struct {
		minute, progress int
	}
	cases := []struct {
		name     string
		observed []obs
		now      int
		current  int
		want     float64
		ok       bool
	}{
		{name: "nothing observed", now: 1},
		{name: "one observation", observed: []obs{{0, 10}}, now: 1, current: 10},
		{name: "steady within the window", observed: []obs{{0, 0}, {1, 10}, {2, 20}}, now: 2, current: 20, want: 10, ok: true},
		{name: "interpolated at the window start", observed: []obs{{0, 0}, {10, 100}, {12, 120}}, now: 12, current: 120, want: 10, ok: true},
		{name: "no progress in the window", observed: []obs{{0, 0}, {1, 50}}, now: 20, current: 50, want: 0, ok: true},
		{name: "restart measures afresh", observed: []obs{{0, 0}, {1, 50}, {2, 10}}, now: 3, current: 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := rateMeter{window: 5 * time.Minute}
			for _, o := range tc.observed {
				m.observe(at(o.minute), o.progress)
			}
			got, ok := m.perMinute(at(tc.now), tc.current)
			if ok != tc.ok || got != tc.want {
				t.Errorf("perMinute = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestPercent: one decimal, truncated, so that 99.99% never reads 100%.
func TestPercent(t *testing.T) {
	for _, tc := range []struct {
		done, total int
		want        string
	}{{0, 0, "0%"}, {3, 4, "75%"}, {1, 3, "33.3%"}, {99999, 100000, "99.9%"}, {4, 4, "100%"}} {
		if got := percent(tc.done, tc.total); got != tc.want {
			t.Errorf("percent(%d, %d) = %q, want %q", tc.done, tc.total, got, tc.want)
		}
	}
}

// TestWatchCommand: the command resolves a Job to its account, prints plain lines when
// its output is no terminal, and ends with the exit code of the verdict.
func TestWatchCommand(t *testing.T) {
	s := clitest.SeedSteps()
	out, errOut, code := run(t, clitest.FakeClient(clitest.FailedAccount(), clitest.FailedJob()), "watch", "job", "j", "-n", ns)
	if code != options.ExitNotAccepted {
		t.Errorf("exit %d, want %d; stderr %s", code, options.ExitNotAccepted, errOut)
	}
	if !strings.Contains(out, "ml-team/ij245 covered 3/4 (75%) accepted 0/4 job j 3/4 Failed | ShardsMissing: ") ||
		!strings.Contains(out, "  needed: 3/4 shards covered: shard D can no longer be covered by job j index 3") {
		t.Errorf("output:\n%s", out)
	}
	if !strings.Contains(errOut, "error: BatchAccount ij245 cannot be Accepted without repair: shard D can no longer be covered") {
		t.Errorf("stderr: %s", errOut)
	}

	out, errOut, code = run(t, clitest.FakeClient(s.Steps[3]), "watch", "account/ij245", "-n", ns)
	if code != options.ExitOK || errOut != "" || !strings.Contains(out, "| Accepted: every shard covered") {
		t.Errorf("accepted: exit %d, %q, %q", code, out, errOut)
	}
	_, errOut, code = run(t, clitest.FakeClient(), "watch", "account", "nope", "-n", ns)
	if code != options.ExitError || !strings.Contains(errOut, `BatchAccount "nope" not found in namespace "ml-team"`) {
		t.Errorf("missing account: exit %d, %q", code, errOut)
	}
	_, errOut, code = run(t, clitest.FakeClient(), "watch", "account", "x", "--jobs", "-1", "-n", ns)
	if code != options.ExitError || !strings.Contains(errOut, "--jobs must not be negative") {
		t.Errorf("negative --jobs: exit %d, %q", code, errOut)
	}
}

// TestWatchFrameFitsTheTerminal: a frame never holds more lines than the terminal has
// (it could not be redrawn in place), nor lines as wide as it; twelve running Jobs make
// more still-needed entries than a frame lists.
func TestWatchFrameFitsTheTerminal(t *testing.T) {
	w := wrappers.MakeBatchAccount("many", ns).ShardCount("s", 1200)
	obs := map[string]account.Observation{}
	for j := range 12 {
		name := fmt.Sprintf("many-%d", j)
		w.AssignJobOrdinals(name, "0-99", fmt.Sprintf("%d-%d", j*100, j*100+99))
		obs["job/"+name] = account.Observation{Job: clitest.SeedJob(name, types.UID("uid-"+name), 100).Completed("0-49", 50).ResourceVersion("1").Facts()}
	}
	ba := w.Generation(1).Obj()
	ba = clitest.Compute(ba, clitest.Time0, obs)

	frame := renderFrame(ptr.To(progressOf(ba)), "rate", time.Minute, defaultWatchJobs, 100, newPalette(false))
	if got := frame[len(frame)-1]; got != "          … and 10 more: kubectl batchledger explain account many -n ml-team" {
		t.Errorf("the last line of the frame = %q", got)
	}

	size := func() (int, int, error) { return 70, 12, nil }
	r := startWatch(t, "many", watchOptions{tty: true, width: 100, size: size, timeout: time.Minute}, ba)
	r.waitWatching()
	r.clk.Step(time.Minute)
	if code := r.wait(); code != options.ExitError {
		t.Errorf("exit %d, want %d (timeout)", code, options.ExitError)
	}
	drawn := redrawSeparator.Split(r.out.String(), -1)
	if len(drawn) != 2 {
		t.Fatalf("%d frames drawn, want 2 (the first and the last)", len(drawn))
	}
	for _, f := range drawn {
		lines := strings.Split(strings.TrimSuffix(f, "\n"), "\n")
		if len(lines) != 11 || !strings.HasPrefix(lines[10], "… ") || !strings.HasSuffix(lines[10], " more lines: the terminal is too small for the frame") {
			t.Errorf("a frame of %d lines on a 12-line terminal, ending %q", len(lines), lines[len(lines)-1])
		}
		for _, l := range lines {
			if visibleWidth(l) >= 70 {
				t.Errorf("a line of %d cells on a 70-column terminal: %q", visibleWidth(l), l)
			}
		}
	}
}

// redrawSeparator is the cursor-up-and-erase that starts each redrawn frame.
var redrawSeparator = regexp.MustCompile("\x1b\\[\\d+A\x1b\\[J")

// TestWatchRateText: the rate line says what is measured, over which window, and the
// ETA it implies; nothing is promised of a blocked batch.
func TestWatchRateText(t *testing.T) {
	at := func(s int) time.Time { return clitest.Time0.Add(time.Duration(s) * time.Second) }
	cases := []struct {
		name     string
		progress batchProgress
		covered  []int // covered shards observed at 0s, 60s, 120s, ...
		now      int
		want     string
	}{
		{name: "one observation", progress: batchProgress{Total: 100, Covered: 10}, covered: []int{10}, now: 60,
			want: "rate: measuring (covered shards over the last 5m)"},
		{name: "steady", progress: batchProgress{Total: 100, Covered: 40}, covered: []int{0, 20, 40}, now: 120,
			want: "20.0 shards/min covered over the last 5m, ETA 3m"},
		{name: "under a second left", progress: batchProgress{Total: 1000, Covered: 999}, covered: []int{0, 999}, now: 60,
			want: "999.0 shards/min covered over the last 5m, ETA under a second"},
		{name: "stalled", progress: batchProgress{Total: 100, Covered: 50}, covered: []int{0, 50}, now: 600,
			want: "0.0 shards/min covered over the last 5m, ETA unknown (no progress in the window)"},
		{name: "blocked", progress: batchProgress{Total: 100, Covered: 50, Outcome: outcomeBlocked}, covered: []int{0, 50}, now: 60,
			want: "blocked: no ETA until a repair"},
		{name: "accepted", progress: batchProgress{Total: 4, Covered: 4, Outcome: outcomeAccepted}, covered: []int{0, 4}, now: 3660,
			want: "done in 61m"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			aw := &accountWatch{progress: tc.progress, covered: rateMeter{window: 5 * time.Minute}}
			for i, c := range tc.covered {
				aw.covered.observe(at(60*i), c)
			}
			w := &watcher{opts: watchOptions{window: 5 * time.Minute}, start: clitest.Time0}
			if got := w.rateText(aw, at(tc.now), false); got != tc.want {
				t.Errorf("rate = %q\nwant   %q", got, tc.want)
			}
		})
	}
}

// TestWatchBlockedPastTheFirstRows: a missing shard that can no longer be covered blocks
// the batch wherever it is among the missing shards, not only among the first rows an
// explanation lists: watch exits 2 as soon as the status shows it.
func TestWatchBlockedPastTheFirstRows(t *testing.T) {
	cases := map[string]struct {
		ba   *v1alpha1.BatchAccount
		want watchOutcome
	}{
		// Shard D, the only missing shard, is lost.
		"lost shard first": {ba: clitest.FailedAccount(), want: outcomeBlocked},
		// big-7's 1,600 missing shards may still complete; big-8's 200 failed ones come
		// after them in ordinal order and never will.
		"lost shards after 1,600 pending ones": {ba: clitest.BigAccount(), want: outcomeBlocked},
		"only pending shards":                  {ba: clitest.SeedSteps().Steps[0], want: outcomePending},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := progressOf(tc.ba)
			if p.Outcome != tc.want {
				t.Errorf("outcome %v (%q), want %v", p.Outcome, p.Blocked, tc.want)
			}
		})
	}
}

// TestWatchChildMayBeRestarted: a JobSet child that failed without a shard is not a dead
// end while its JobSet runs: the JobSet's failure policy may restart it under a new
// identity that covers the shard (the controller awaits it: Terminated
// AwaitingTermination, "its JobSet may restart it"). watch keeps waiting then, and says
// the batch is blocked once the JobSet ended without covering it.
func TestWatchChildMayBeRestarted(t *testing.T) {
	cases := map[string]struct {
		owner string
		want  watchOutcome
	}{
		"its JobSet still runs": {owner: account.OwnerRunning, want: outcomePending},
		"its JobSet failed":     {owner: "Failed", want: outcomeBlocked},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("train", ns).ShardCount("s", 2).AssignJobSet("train", "workers", 0, "0-1", "0-1").Generation(1).Obj()
			w0 := clitest.SeedJob("train-workers-0", "uid-w0", 2).Completed("0", 1).ResourceVersion("9").
				Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj()
			obs := account.Observation{Job: jobkind.Facts(w0), ChildOwner: tc.owner}
			if tc.owner != account.OwnerRunning {
				obs.ChildOwner, obs.OwnerEnded = "", tc.owner
			}
			ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"jobset/train/workers/0": obs})
			if p := progressOf(ba); p.Outcome != tc.want {
				t.Errorf("outcome %v (%q), want %v; status: %+v", p.Outcome, p.Blocked, tc.want, ba.Status.Conditions)
			}
		})
	}
}

// TestWatchRerunOfAcceptedJob: a Job re-run under the name of an Accepted account's
// target is another batch's (account.Follows): watch does not end at once on the
// account's verdict as if the re-run were Accepted, and says why it leaves the account
// out.
func TestWatchRerunOfAcceptedJob(t *testing.T) {
	s := clitest.SeedSteps()
	rerun := clitest.SeedJob("j", "uid-rerun", 4).ResourceVersion("9").Obj()
	pending := wrappers.MakeBatchAccount("ij245-next", ns).Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Generation(1).Obj()
	const notThisRun = `BatchAccount "ij245" names Job "j" but was Accepted on an earlier run of the name (Job uid ` + string(clitest.JobUID) + `): it speaks for nothing of this run`
	cases := []struct {
		name string
		objs []client.Object
		// wantOut is in stdout, wantErr in stderr.
		wantOut, wantErr string
	}{
		{name: "only the Accepted account names it", objs: []client.Object{s.Steps[3].DeepCopy(), rerun.DeepCopy()},
			wantErr: `error: no BatchAccount follows Job "j" (uid uid-rerun): ` + notThisRun},
		{name: "another account follows it", objs: []client.Object{s.Steps[3].DeepCopy(), pending.DeepCopy(), rerun.DeepCopy()},
			wantOut: "ml-team/ij245-next", wantErr: "Warning: " + notThisRun},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, clitest.FakeClient(tc.objs...), "watch", "job", "j", "-n", ns, "--timeout", "50ms")
			if code != options.ExitError || !strings.Contains(out, tc.wantOut) || !strings.Contains(errOut, tc.wantErr) ||
				strings.Contains(out, "ml-team/ij245 ") || strings.Contains(out, "Accepted: ") {
				t.Errorf("exit %d, want %d (not Accepted); stderr %q, want %q; stdout, want %q:\n%s", code, options.ExitError, errOut, tc.wantErr, tc.wantOut, out)
			}
		})
	}
}
