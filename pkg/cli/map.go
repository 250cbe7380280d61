package cli

import (
	"bufio"
	"cmp"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/fatih/color"
	"github.com/mattn/go-runewidth"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/completion"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/resolve"
	"batchledger.dev/batchledger/pkg/indexset"
)

// shardState is what the map shows of a shard. The order is from best to worst: a cell
// standing for a run of shards shows the worst state among them.
type shardState uint8

const (
	stateAccepted shardState = iota
	stateCovered
	// stateUnknown: the status left the shard's coverage out (a bounded status of a
	// huge, fragmented batch) and nothing else tells it.
	stateUnknown
	stateMissing
	// stateNoResult: covered, but its result can no longer arrive (MissingResult).
	stateNoResult
	stateConflict
	stateRejected
	numStates
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

// Cell budgets: how many cells a map may have before shards share cells.
const (
	defaultTerminalCells = 4096
	defaultSVGCells      = 10000
	svgCell              = 10 // px
	svgColumns           = 100
)

// shardMap is an account's shards by state, grouped by the Job each is assigned to.
type shardMap struct {
	Namespace, Name string
	Total           int
	// States holds one state per shard ordinal.
	States []shardState
	Groups []shardGroup
	// RequireResults says whether covered is a final state.
	RequireResults bool
	// Counts per state over all shards.
	Counts [numStates]int
	// shardName names a shard by ordinal.
	shardName func(int) string
}

// shardGroup is one Job's shards, in the order of its completion indexes.
type shardGroup struct {
	Name string
	// Runs are the shard ordinal intervals of the Job's original assignment, in index order.
	Runs   []indexset.Interval
	Counts [numStates]int
}

func (g *shardGroup) size() int {
	n := 0
	for _, r := range g.Runs {
		n += r.Count()
	}
	return n
}

// buildShardMap derives every shard's state from the account status and its recorded
// results: missing from the status's missing ordinals (or, when the status bounded them,
// from the targets' completed indexes through the mapping); accepted from the results
// that stand, by account.StandingResults; rejected where a shard has only results that do
// not stand; conflict where a later result disagrees with the one that stands.
func buildShardMap(ba *v1alpha1.BatchAccount, chunks []v1alpha1.ShardResults) *shardMap {
	m := account.Compile(ba.Namespace, &ba.Spec)
	st := &ba.Status
	sm := &shardMap{Namespace: ba.Namespace, Name: ba.Name, Total: m.Shards.Count(),
		RequireResults: ba.Spec.Acceptance != nil && ba.Spec.Acceptance.RequireResults, shardName: m.Shards.Name}
	sm.States = make([]shardState, sm.Total)
	for i := range sm.States {
		sm.States[i] = stateCovered
	}
	paint := func(set indexset.Set, s shardState) {
		for _, iv := range set.Intervals() {
			for o := iv.First; o <= min(iv.Last, sm.Total-1); o++ {
				sm.States[o] = s
			}
		}
	}
	missing, _ := indexset.Parse(st.Shards.MissingOrdinals)
	if len(st.Conditions) == 0 {
		// Nothing observed yet: every shard is missing.
		missing = indexset.Range(0, sm.Total-1)
	}
	if st.Shards.MissingOrdinalsTruncated {
		if covered, ok := coveredFromTargets(m, st); ok {
			missing = indexset.Range(0, sm.Total-1).Difference(covered)
		} else if last, ok := missing.Max(); ok {
			paint(indexset.Range(last+1, sm.Total-1), stateUnknown)
		}
	}
	paint(missing, stateMissing)
	// The status names the covered shards whose result was rejected or can no longer
	// arrive; the recorded results add conflicts (and rejections a bounded list left out).
	lost, _ := indexset.Parse(st.Results.MissingOrdinals)
	paint(lost, stateNoResult)
	rejected, _ := indexset.Parse(st.Results.RejectedOrdinals)
	paint(rejected, stateRejected)
	judgeShardResults(ba, m, chunks, sm.States)

	for _, t := range m.Targets {
		g := shardGroup{Name: v1alpha1.TargetKey(t.Key).Describe()}
		var runs []account.Run
		for _, r := range m.Runs {
			if r.Target == t.Key && !r.Repair {
				runs = append(runs, r)
			}
		}
		if len(runs) == 0 {
			continue // a repair Job: its shards are drawn with the Job they were assigned first
		}
		slices.SortFunc(runs, func(a, b account.Run) int { return cmp.Compare(a.FirstIndex, b.FirstIndex) })
		for _, r := range runs {
			g.Runs = append(g.Runs, indexset.Interval{First: r.FirstShard, Last: r.FirstShard + r.Length - 1})
			for o := r.FirstShard; o < r.FirstShard+r.Length && o < sm.Total; o++ {
				g.Counts[sm.States[o]]++
			}
		}
		sm.Groups = append(sm.Groups, g)
	}
	for _, s := range sm.States {
		sm.Counts[s]++
	}
	return sm
}

// coveredFromTargets is the covered shard set computed from the targets' completed
// indexes, through the original and repair runs; false when a target's list was left
// out of the status.
func coveredFromTargets(m *account.Mapping, st *v1alpha1.BatchAccountStatus) (indexset.Set, bool) {
	var covered indexset.Set
	for _, ts := range st.Targets {
		if ts.CompletedIndexesOmitted {
			return indexset.Set{}, false
		}
		done, err := indexset.Parse(ts.CompletedIndexes)
		if err != nil {
			return indexset.Set{}, false
		}
		covered = covered.Union(m.ShardsOf(ts.Name, done, false)).Union(m.ShardsOf(ts.Name, done, true))
	}
	return covered, true
}

// judgeShardResults marks accepted, rejected and conflicting shards from the recorded
// results, judged by the account's own rule (account.StandingResults) so that the map
// and the controller agree on every shard.
func judgeShardResults(ba *v1alpha1.BatchAccount, m *account.Mapping, chunks []v1alpha1.ShardResults, states []shardState) {
	if len(chunks) == 0 {
		return
	}
	current := map[string]types.UID{}
	for _, ts := range ba.Status.Targets {
		current[ts.Name] = ts.UID
	}
	results := account.RecordedInOrder(chunks)
	standing := account.StandingResults(m, &ba.Spec, current, results)
	for o := range standing {
		if o < len(states) && states[o] != stateMissing {
			states[o] = stateAccepted
		}
	}
	for _, r := range results {
		o, assigned := m.ShardOf(r.Target, r.Index)
		if !assigned || o >= len(states) || current[r.Target] != r.JobUID {
			continue // results of no shard, or of a superseded identity, concern no cell
		}
		s, stands := standing[o]
		switch {
		case stands && s.PodUID == r.PodUID:
		case stands:
			// A further result for an accepted shard: a conflict when it would have been
			// accepted on its own and disagrees with the one that stands.
			alone := account.StandingResults(m, &ba.Spec, current, []account.Result{r})
			if _, ok := alone[o]; ok && r.Digest != s.Digest {
				states[o] = stateConflict
			}
		default:
			if states[o] != stateConflict {
				states[o] = stateRejected
			}
		}
	}
}

// gridCell is one cell: a run of shards in one group and the worst state among them.
type gridCell struct {
	First, Last int // shard ordinals of the run (in index order: First is the first shard)
	Count       int
	State       shardState
}

// cellsOf folds a group's shards, in index order, into cells of per shards each.
func (sm *shardMap) cellsOf(g *shardGroup, per int) []gridCell {
	cells := make([]gridCell, 0, (g.size()+per-1)/per)
	var cur gridCell
	for _, r := range g.Runs {
		for o := r.First; o <= r.Last && o < sm.Total; o++ {
			s := sm.States[o]
			if cur.Count == 0 {
				cur = gridCell{First: o, Last: o, Count: 1, State: s}
			} else {
				cur.Last, cur.State = o, max(cur.State, s)
				cur.Count++
			}
			if cur.Count == per {
				cells = append(cells, cur)
				cur = gridCell{}
			}
		}
	}
	if cur.Count > 0 {
		cells = append(cells, cur)
	}
	return cells
}

// shardsPerCell is the smallest run length that keeps the map within budget cells.
func (sm *shardMap) shardsPerCell(budget int) int {
	n := 0
	for i := range sm.Groups {
		n += sm.Groups[i].size()
	}
	if budget <= 0 || n <= budget {
		return 1
	}
	return (n + budget - 1) / budget
}

// mapOptions are map's flags.
type mapOptions struct {
	svg string
	// perCell forces shards per cell; 0 picks it from the cell budget.
	perCell int
	width   int
	colour  bool
}

func newMapCommand(o *options.Options) *cobra.Command {
	mo := mapOptions{}
	cmd := &cobra.Command{
		Use:   "map ACCOUNT",
		Short: "Draw an account's shards as a grid: covered, missing, accepted, rejected, conflict",
		Long: `Map draws the shards of a BatchAccount as a grid, one row group per Job, in the order of
the Job's completion indexes: one cell per shard, or for large batches one cell per run
of shards showing the worst state among them (rejected, conflict, no result can
arrive, missing, not listed, covered, accepted). On a terminal the cells are coloured; otherwise each state has its own
character. --svg FILE writes the same map as an SVG picture for a report or an issue.`,
		Example: `  kubectl batchledger map ij245 -n ml-team
  kubectl batchledger map big --svg big.svg`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completion.AccountNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if mo.perCell < 0 {
				return fmt.Errorf("--shards-per-cell must not be negative")
			}
			c, ns, err := o.ClientAndNamespace()
			if err != nil {
				return err
			}
			sm, err := loadShardMap(cmd.Context(), c, ns, args[0])
			if err != nil {
				return err
			}
			if mo.svg != "" {
				if err := writeSVGFile(mo.svg, sm, mo.perCell); err != nil {
					return err
				}
				fmt.Fprintf(o.Out, "wrote %s\n", mo.svg)
				return nil
			}
			tty, width, colour := output.DescribeTerminal(o.Out)
			if mo.width <= 0 {
				mo.width = width
			}
			mo.colour = tty && colour
			bw := bufio.NewWriter(o.Out)
			renderMap(bw, sm, mo)
			return bw.Flush()
		},
	}
	cmd.Flags().StringVar(&mo.svg, "svg", "", "Write the map as an SVG picture to this file instead of drawing it.")
	cmd.Flags().IntVar(&mo.perCell, "shards-per-cell", 0, "Shards per cell; 0 fits the map to the terminal (or to the SVG's cell budget).")
	cmd.Flags().IntVar(&mo.width, "width", 0, "Width in columns; 0 means the terminal's width.")
	return cmd
}

// loadShardMap reads an account and its ShardResults chunks and maps its shards.
func loadShardMap(ctx context.Context, c client.Client, ns, name string) (*shardMap, error) {
	accts, err := resolve.ResolveAccounts(ctx, c, ns, resolve.KindAccount, name)
	if err != nil {
		return nil, err
	}
	ba := &accts[0]
	var chunks v1alpha1.ShardResultsList
	if err := c.List(ctx, &chunks, client.InNamespace(ns), client.MatchingLabels(v1alpha1.ChunkLabels(ba))); err != nil {
		return nil, fmt.Errorf("listing ShardResults of BatchAccount %q in namespace %q: %w", ba.Name, ns, err)
	}
	return buildShardMap(ba, chunks.Items), nil
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

	fmt.Fprintf(w, "BatchAccount %s/%s: %d shards, %s\n", sm.Namespace, sm.Name, sm.Total, countsText(sm.Counts, sm.RequireResults))
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

// countsText says how many shards are in each state that occurs.
func countsText(counts [numStates]int, requireResults bool) string {
	var parts []string
	covered := counts[stateAccepted] + counts[stateCovered] + counts[stateNoResult] + counts[stateConflict] + counts[stateRejected]
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
	return fmt.Sprintf("(%d shards: %s)", g.size(), countsText(g.Counts, requireResults))
}

// svgDoc is the SVG picture of a map, written with encoding/xml.
type svgDoc struct {
	XMLName xml.Name `xml:"svg"`
	XMLNS   string   `xml:"xmlns,attr"`
	Width   int      `xml:"width,attr"`
	Height  int      `xml:"height,attr"`
	ViewBox string   `xml:"viewBox,attr"`
	Title   string   `xml:"title"`
	Items   []any
}

type svgRect struct {
	XMLName xml.Name `xml:"rect"`
	X       int      `xml:"x,attr"`
	Y       int      `xml:"y,attr"`
	W       int      `xml:"width,attr"`
	H       int      `xml:"height,attr"`
	Fill    string   `xml:"fill,attr"`
	State   string   `xml:"data-state,attr,omitempty"`
	Shards  string   `xml:"data-shards,attr,omitempty"`
	Title   string   `xml:"title,omitempty"`
}

type svgText struct {
	XMLName    xml.Name `xml:"text"`
	X          int      `xml:"x,attr"`
	Y          int      `xml:"y,attr"`
	FontFamily string   `xml:"font-family,attr"`
	FontSize   int      `xml:"font-size,attr"`
	Weight     string   `xml:"font-weight,attr,omitempty"`
	Text       string   `xml:",chardata"`
}

type svgGroup struct {
	XMLName xml.Name `xml:"g"`
	ID      string   `xml:"id,attr"`
	Items   []any
}

// writeSVGFile writes the map as SVG to path.
func writeSVGFile(path string, sm *shardMap, perCell int) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the SVG map: %w", err)
	}
	bw := bufio.NewWriter(f)
	err = writeSVG(bw, sm, perCell)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the SVG map to %s: %w", path, err)
	}
	return nil
}

// writeSVG writes the map as an SVG picture: a title, one group of cells per Job (each
// cell a rect carrying its state and shard range), and a legend.
func writeSVG(w io.Writer, sm *shardMap, perCell int) error {
	const (
		margin  = 16
		font    = "DejaVu Sans, Helvetica, Arial, sans-serif"
		lineGap = 18
	)
	per := perCell
	if per == 0 {
		per = sm.shardsPerCell(defaultSVGCells)
	}
	cols := 0
	for i := range sm.Groups {
		cols = max(cols, (sm.Groups[i].size()+per-1)/per)
	}
	cols = min(cols, svgColumns)
	width := max(2*margin+cols*svgCell, 560)
	y := margin + 14
	items := []any{
		svgText{X: margin, Y: y, FontFamily: font, FontSize: 16, Weight: "bold", Text: fmt.Sprintf("BatchAccount %s/%s", sm.Namespace, sm.Name)},
	}
	y += lineGap
	unit := "one cell = one shard"
	if per > 1 {
		unit = fmt.Sprintf("one cell = %d shards, worst state shown", per)
	}
	items = append(items, svgText{X: margin, Y: y, FontFamily: font, FontSize: 12, Text: fmt.Sprintf("%d shards: %s; %s", sm.Total, countsText(sm.Counts, sm.RequireResults), unit)})
	y += 8
	for i := range sm.Groups {
		g := &sm.Groups[i]
		y += lineGap + 4
		group := svgGroup{ID: fmt.Sprintf("group-%d", i)}
		group.Items = append(group.Items, svgText{X: margin, Y: y, FontFamily: font, FontSize: 12, Weight: "bold", Text: g.Name + "  " + groupSummary(g, sm.RequireResults)})
		y += 6
		cells := sm.cellsOf(g, per)
		for k, c := range cells {
			shards := fmt.Sprintf("%d-%d", c.First, c.Last)
			if c.Count == 1 {
				shards = fmt.Sprint(c.First)
			}
			r := svgRect{
				X: margin + (k%cols)*svgCell, Y: y + (k/cols)*svgCell, W: svgCell - 1, H: svgCell - 1,
				Fill: sm.fill(c.State), State: stateInfo[c.State].name, Shards: shards,
			}
			if len(cells) <= 10000 && sm.shardName != nil {
				// A tooltip per cell is affordable for maps of this size.
				r.Title = fmt.Sprintf("%s: %s", sm.shardName(c.First), stateInfo[c.State].name)
				if c.Count > 1 {
					r.Title = fmt.Sprintf("%s..%s (%d shards): worst %s", sm.shardName(c.First), sm.shardName(c.Last), c.Count, stateInfo[c.State].name)
				}
			}
			group.Items = append(group.Items, r)
		}
		y += ((len(cells)+cols-1)/cols)*svgCell + 4
		items = append(items, group)
	}
	y += lineGap + 4
	x := margin
	legend := svgGroup{ID: "legend"}
	for s := range numStates {
		if !sm.inLegend(s) {
			continue
		}
		if item := svgCell + 16 + 7*len(sm.legend(s)); x > margin && x+item > width-margin {
			x, y = margin, y+lineGap // the legend wraps rather than leave the picture
		}
		legend.Items = append(legend.Items,
			svgRect{X: x, Y: y - 10, W: svgCell, H: svgCell, Fill: sm.fill(s), State: stateInfo[s].name},
			svgText{X: x + svgCell + 4, Y: y, FontFamily: font, FontSize: 12, Text: sm.legend(s)})
		x += svgCell + 16 + 7*len(sm.legend(s))
	}
	items = append(items, legend)
	height := y + margin
	doc := svgDoc{XMLNS: "http://www.w3.org/2000/svg", Width: width, Height: height, ViewBox: fmt.Sprintf("0 0 %d %d", width, height),
		Title: fmt.Sprintf("Shard map of BatchAccount %s/%s", sm.Namespace, sm.Name), Items: items}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", " ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
