package report

import (
	"strings"
	"testing"
)

func TestTableText(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table Table
		want  string
	}{
		{"aligned columns", Table{Header: []string{"size", "writes"}, Rows: [][]string{{"5x10", "12"}, {"20x50", "3"}}},
			"size   writes\n5x10   12\n20x50  3\n"},
		{"no rows, the header alone", Table{Header: []string{"size", "writes"}}, "size  writes\n"},
		{"rows without a header", Table{Rows: [][]string{{"kills", "10"}, {"results lost", "0"}}},
			"kills         10\nresults lost  0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			tc.table.WriteText(&b)
			if b.String() != tc.want {
				t.Errorf("got\n%q\nwant\n%q", b.String(), tc.want)
			}
		})
	}
}

func TestTableMarkdown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table Table
		want  string
	}{
		{"header, rule, rows", Table{Header: []string{"size", "writes"}, Rows: [][]string{{"5x10", "12"}}},
			"| size | writes |\n|---|---|\n| 5x10 | 12 |\n"},
		{"an empty cell", Table{Header: []string{"batch", "note"}, Rows: [][]string{{"b001", ""}}},
			"| batch | note |\n|---|---|\n| b001 |  |\n"},
		{"a pipe stays in its cell", Table{Header: []string{"note"}, Rows: [][]string{{"a|b"}}},
			"| note |\n|---|\n| a\\|b |\n"},
		{"no rows", Table{Header: []string{"a", "b", "c"}}, "| a | b | c |\n|---|---|---|\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			tc.table.WriteMarkdown(&b)
			if b.String() != tc.want {
				t.Errorf("got\n%q\nwant\n%q", b.String(), tc.want)
			}
		})
	}
}

func TestPreamble(t *testing.T) {
	var b strings.Builder
	WritePreamble(&b, "go run ./hack/bench --sizes=5x10", [][2]string{{"nproc", "2"}, {"load", "4 nodes"}})
	got := b.String()
	first, rest, _ := strings.Cut(got, "\n")
	if !strings.HasPrefix(first, "Run on ") || !strings.HasSuffix(first, " UTC.") {
		t.Errorf("first line %q, want Run on <time> UTC.", first)
	}
	want := "\n```sh\ngo run ./hack/bench --sizes=5x10\n```\n\n| machine | |\n|---|---|\n| nproc | 2 |\n| load | 4 nodes |\n"
	if rest != want {
		t.Errorf("got\n%s\nwant\n%s", rest, want)
	}
}

func TestReplaceSection(t *testing.T) {
	const (
		begin     = "<!-- bench:baseline:begin (written by hack/bench baseline --out) -->"
		end       = "<!-- bench:baseline:end -->"
		loadBegin = "<!-- bench:load:begin (written by hack/bench --out) -->"
		loadEnd   = "<!-- bench:load:end -->"
	)
	section := begin + "\nnew\n" + end + "\n"
	load := loadBegin + "\nload\n" + loadEnd
	for _, tc := range []struct{ name, doc, want string }{
		{"replaces between markers", "# B\n\n" + load + "\n\n" + begin + "\nold\n" + end + "\n\n## Micro\n",
			"# B\n\n" + load + "\n\n" + section + "\n## Micro\n"},
		{"a hand-written begin marker matches", "# B\n\n<!-- bench:baseline:begin -->\nold\n" + end + "\n",
			"# B\n\n" + section},
		{"appends without markers", "# B\n\n" + load + "\n", "# B\n\n" + load + "\n\n## H\n\n" + section},
		{"an end marker before the begin marker appends", "# B\n\n" + end + "\n" + begin + "\n",
			"# B\n\n" + end + "\n" + begin + "\n\n## H\n\n" + section},
		{"new file", "", "# Benchmarks\n\n## H\n\n" + section},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReplaceSection(tc.doc, begin, end, section, "## H"); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
