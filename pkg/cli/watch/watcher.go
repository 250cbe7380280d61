package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/vbauerster/cupwriter"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/resolve"
)

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
	accts, notFollowing, err := resolve.Resolve(ctx, c, ns, kind, name)
	if err != nil {
		return err
	}
	resolve.WarnNotFollowing(wo.warn, notFollowing)
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
			return fmt.Errorf("listing BatchAccounts in namespace %q: %w", ns, resolve.NotServed(err))
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
