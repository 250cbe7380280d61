package mapview

import (
	"fmt"
	"io"
	"strings"

	"github.com/fatih/color"
	"github.com/mattn/go-runewidth"

	"batchledger.dev/batchledger/pkg/cli/internal/output"
)

// Cell budgets: how many cells a map may have before shards share cells.
const (
	defaultTerminalCells = 4096
	defaultSVGCells      = 10000
	svgCell              = 10 // px
	svgColumns           = 100
)

// stateInfo names each state and how it is drawn: a character on a terminal (coloured),
// one without colour, and an SVG fill.
var stateInfo = [numStates]struct {
	name, legend string
	tty, plain   string
	colour       color.Attribute
	fill         string
}{
	stateAccepted: {"accepted", "accepted result", "█", "#", color.FgGreen, "#2da44e"},
	stateCovered:  {"covered", "covered, no accepted result yet", "▓", "+", color.FgCyan, "#54aeff"},
	stateUnknown:  {"unknown", "not listed in the status", "?", "?", color.FgHiBlack, "#d0d7de"},
	stateMissing:  {"missing", "missing", "░", ".", color.FgYellow, "#d4a72c"},
	stateNoResult: {"no-result", "covered, no result can arrive", "o", "o", color.FgHiRed, "#fa4549"},
	stateConflict: {"conflict", "conflicting results", "!", "!", color.FgMagenta, "#8250df"},
	stateRejected: {"rejected", "rejected result", "x", "x", color.FgRed, "#cf222e"},
}

// renderMap draws the map for a terminal or a log: a title, one row group per Job with
// its counts, and a legend.
func renderMap(w io.Writer, sm *shardMap, mo mapOptions) {
	width := mo.width
	if width <= 0 {
		width = output.DefaultWidth
	}
	labelW := 0
	for _, g := range sm.Groups {
		labelW = max(labelW, min(runewidth.StringWidth(g.Name), 24))
	}
	cols := max(16, width-labelW-4)
	per := mo.perCell
	if per == 0 {
		per = sm.shardsPerCell(defaultTerminalCells)
	}
	colours := [numStates]*color.Color{}
	for s := range numStates {
		colours[s] = color.New(sm.colour(s))
		if mo.colour {
			colours[s].EnableColor()
		} else {
			colours[s].DisableColor()
		}
	}
	glyph := func(s shardState) string {
		if mo.colour {
			return stateInfo[s].tty
		}
		return stateInfo[s].plain
	}

	fmt.Fprintf(w, "BatchAccount %s/%s: %d shards, %s\n", sm.Namespace, sm.Name, sm.Total, countsText(sm.Counts, sm.Covered, sm.RequireResults))
	if sm.Stale != "" {
		fmt.Fprintf(w, "STALE: %s\n", sm.Stale)
	}
	if sm.NotJudged != "" {
		fmt.Fprintf(w, "NOT JUDGED: %s\n", sm.NotJudged)
	}
	if sm.Invalid != "" {
		fmt.Fprintf(w, "INVALID MAPPING: %s\n", sm.Invalid)
	}
	if per > 1 {
		fmt.Fprintf(w, "one cell = %d shards, in Job index order; a cell shows the worst state of its shards\n", per)
	} else {
		fmt.Fprintln(w, "one cell = one shard, in Job index order")
	}
	for i := range sm.Groups {
		g := &sm.Groups[i]
		fmt.Fprintf(w, "\n%s  %s\n", g.Name, groupSummary(g, sm.RequireResults))
		cells := sm.cellsOf(g, per)
		for start := 0; start < len(cells); start += cols {
			row := cells[start:min(start+cols, len(cells))]
			var b strings.Builder
			b.WriteString("  ")
			// Consecutive cells of one state are coloured as one string.
			for j := 0; j < len(row); {
				k := j
				for k < len(row) && row[k].State == row[j].State {
					k++
				}
				b.WriteString(colours[row[j].State].Sprint(strings.Repeat(glyph(row[j].State), k-j)))
				j = k
			}
			fmt.Fprintln(w, b.String())
		}
	}
	fmt.Fprint(w, "\nlegend:")
	for s := range numStates {
		if !sm.inLegend(s) {
			continue
		}
		fmt.Fprintf(w, "  %s %s", colours[s].Sprint(glyph(s)), sm.legend(s))
	}
	fmt.Fprintln(w)
}

// inLegend says whether the legend names a state: the five of every map (accepted only
// when results are required), the others only when they occur.
func (sm *shardMap) inLegend(s shardState) bool {
	switch s {
	case stateUnknown, stateNoResult:
		return sm.Counts[s] > 0
	case stateAccepted:
		return sm.RequireResults
	}
	return true
}

// colour and fill draw a state; covered is drawn as done (green) when the account
// requires no results, for then it is final.
func (sm *shardMap) colour(s shardState) color.Attribute {
	if s == stateCovered && !sm.RequireResults {
		return stateInfo[stateAccepted].colour
	}
	return stateInfo[s].colour
}

func (sm *shardMap) fill(s shardState) string {
	if s == stateCovered && !sm.RequireResults {
		return stateInfo[stateAccepted].fill
	}
	return stateInfo[s].fill
}

// legend names a state; covered is final when the account requires no results.
func (sm *shardMap) legend(s shardState) string {
	if s == stateCovered && !sm.RequireResults {
		return "covered"
	}
	return stateInfo[s].legend
}

// countsText says how many shards are covered and in each state that occurs.
func countsText(counts [numStates]int, covered int, requireResults bool) string {
	var parts []string
	parts = append(parts, fmt.Sprintf("%d covered", covered))
	if requireResults {
		parts = append(parts, fmt.Sprintf("%d accepted", counts[stateAccepted]+counts[stateConflict]))
	}
	for _, s := range []shardState{stateMissing, stateNoResult, stateRejected, stateConflict, stateUnknown} {
		switch {
		case counts[s] == 0:
		case s == stateNoResult:
			parts = append(parts, fmt.Sprintf("%d whose result can no longer arrive", counts[s]))
		default:
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], stateInfo[s].name))
		}
	}
	return strings.Join(parts, ", ")
}

func groupSummary(g *shardGroup, requireResults bool) string {
	return fmt.Sprintf("(%d shards: %s)", g.size(), countsText(g.Counts, g.Covered, requireResults))
}
