package watch

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fatih/color"
	"github.com/mattn/go-runewidth"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"k8s.io/apimachinery/pkg/util/duration"

	"batchledger.dev/batchledger/pkg/cli/internal/output"
)

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
