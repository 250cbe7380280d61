// Package report writes what bench and soak measured: tables for the terminal and the
// Markdown of docs/benchmarks.md and docs/reliability.md, each report opened by the same
// preamble (when it ran, the command, the machine) and, in a document several programs
// write, kept between its own markers so that a run rewrites only its section.
package report

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// Table is a header and rows of cells.
type Table struct {
	Header []string
	Rows   [][]string
}

// WriteText writes the table aligned in columns for a terminal. A nil Header writes the
// rows alone (a two-column list of figures, say).
func (t Table) WriteText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if t.Header != nil {
		fmt.Fprintln(tw, strings.Join(t.Header, "\t"))
	}
	for _, r := range t.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// WriteMarkdown writes the table as Markdown; a "|" in a cell is escaped so that it
// stays in its cell.
func (t Table) WriteMarkdown(w io.Writer) {
	markdownRow(w, t.Header)
	fmt.Fprintln(w, "|"+strings.Repeat("---|", len(t.Header)))
	for _, r := range t.Rows {
		markdownRow(w, r)
	}
}

func markdownRow(w io.Writer, cells []string) {
	var b strings.Builder
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
	}
	fmt.Fprintln(w, b.String())
}

// WritePreamble opens a Markdown report: when it ran, the command that ran it (to run it
// again), and the table of the machine (MachineFacts, and what the caller adds, such as
// the load).
func WritePreamble(w io.Writer, command string, machine [][2]string) {
	fmt.Fprintf(w, "Run on %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintln(w, "```sh")
	fmt.Fprintln(w, command)
	fmt.Fprintln(w, "```")
	fmt.Fprintln(w)
	// A two-column table whose second column has no heading.
	fmt.Fprintln(w, "| machine | |")
	fmt.Fprintln(w, "|---|---|")
	for _, kv := range machine {
		markdownRow(w, kv[:])
	}
}

// ReplaceSection puts section (which starts with begin and ends with end) in place of the
// text between the markers of doc. The begin marker matches without its parenthesized
// note, so that a hand-written "<!-- bench:baseline:begin -->" matches too. Without the
// markers the section is appended under heading; an empty doc becomes "# Benchmarks".
func ReplaceSection(doc, begin, end, section, heading string) string {
	key, _, _ := strings.Cut(begin, " (")
	i := strings.Index(doc, key)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		if doc == "" {
			doc = "# Benchmarks\n"
		}
		return strings.TrimRight(doc, "\n") + "\n\n" + heading + "\n\n" + section
	}
	return doc[:i] + strings.TrimSuffix(section, "\n") + doc[j+len(end):]
}

// WriteSection is ReplaceSection on the file at path, created when it does not exist.
func WriteSection(path, begin, end, section, heading string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(path, []byte(ReplaceSection(string(old), begin, end, section, heading)), 0o644)
}
