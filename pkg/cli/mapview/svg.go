package mapview

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"os"
)

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
	items = append(items, svgText{X: margin, Y: y, FontFamily: font, FontSize: 12, Text: fmt.Sprintf("%d shards: %s; %s", sm.Total, countsText(sm.Counts, sm.Covered, sm.RequireResults), unit)})
	if sm.Stale != "" {
		y += lineGap
		items = append(items, svgText{X: margin, Y: y, FontFamily: font, FontSize: 12, Weight: "bold", Text: "STALE: " + sm.Stale})
	}
	if sm.NotJudged != "" {
		y += lineGap
		items = append(items, svgText{X: margin, Y: y, FontFamily: font, FontSize: 12, Weight: "bold", Text: "NOT JUDGED: " + sm.NotJudged})
	}
	if sm.Invalid != "" {
		y += lineGap
		items = append(items, svgText{X: margin, Y: y, FontFamily: font, FontSize: 12, Weight: "bold", Text: "INVALID MAPPING: " + sm.Invalid})
	}
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
