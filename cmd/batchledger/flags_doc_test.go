package main

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// flagRow is a row of docs/reference.md's "Manager flags" table: the flags it names
// (without their dashes) and its default column.
type flagRow struct {
	flags []string
	def   string
}

// referenceFlagRows are the rows of docs/reference.md's "Manager flags" table.
func referenceFlagRows(t *testing.T) []flagRow {
	t.Helper()
	doc, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Manager flags\n")
	if !ok {
		t.Fatal("docs/reference.md has no section \"Manager flags\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	flagName := regexp.MustCompile("`(--[a-z0-9-]+)`")
	var rows []flagRow
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `--") || len(cells) < 4 {
			continue
		}
		row := flagRow{def: cells[2]}
		for _, m := range flagName.FindAllStringSubmatch(cells[1], -1) {
			row.flags = append(row.flags, strings.TrimPrefix(m[1], "--"))
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatal("docs/reference.md's \"Manager flags\" table has no rows")
	}
	return rows
}

// documentedDefault reads what a row's default column says of its i-th flag of n: the
// column lists one default per flag, separated by commas, each perhaps in backticks
// and followed by a remark in parentheses. ok is false when the column does not list
// one per flag (a phrase standing for all of them).
func documentedDefault(column string, i, n int) (string, bool) {
	column = regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(column, "")
	parts := strings.Split(column, ",")
	if len(parts) != n {
		return "", false
	}
	return strings.TrimSpace(strings.ReplaceAll(parts[i], "`", "")), true
}

// TestReferenceDocumentsEveryFlag: docs/reference.md's table of manager flags names
// every flag the manager takes (its own, controller-runtime's logging flags and
// --kubeconfig) and no other, and the default it gives each is the flag's. The logging
// flags' defaults are controller-runtime's (TestReferenceStatesTheLogTimeEncoding
// checks the one its help misstates), and --namespace's is the pod's.
func TestReferenceDocumentsEveryFlag(t *testing.T) {
	fs := flag.NewFlagSet("batchledger", flag.ContinueOnError)
	bindFlags(fs)
	(&zap.Options{}).BindFlags(fs)
	ctrlconfig.RegisterFlags(fs)

	documented := map[string]bool{}
	for _, row := range referenceFlagRows(t) {
		for i, name := range row.flags {
			documented[name] = true
			f := fs.Lookup(name)
			if f == nil {
				t.Errorf("docs/reference.md documents --%s; the manager has no such flag", name)
				continue
			}
			if strings.HasPrefix(name, "zap-") || name == "namespace" {
				continue
			}
			doc, ok := documentedDefault(row.def, i, len(row.flags))
			if !ok {
				continue
			}
			if !sameDefault(doc, f.DefValue) {
				t.Errorf("docs/reference.md gives --%s the default %q; the flag's is %q", name, doc, f.DefValue)
			}
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !documented[f.Name] {
			t.Errorf("--%s is not in docs/reference.md's table of manager flags", f.Name)
		}
	})
}

// sameDefault is whether a documented default says the flag's default value: the same
// duration however spelt (168h, 168h0m0s), and for an empty one a word saying none.
func sameDefault(doc, value string) bool {
	if value == "" {
		return doc == "—" || doc == "off" || doc == "all"
	}
	if d, err := time.ParseDuration(doc); err == nil {
		v, err := time.ParseDuration(value)
		return err == nil && d == v
	}
	return doc == value
}

func TestSameDefault(t *testing.T) {
	cases := []struct {
		doc, value string
		want       bool
	}{
		{"168h", "168h0m0s", true},
		{"1m", "1m0s", true},
		{"10s", "30s", false},
		{"0", "0", true},
		{"false", "false", true},
		{"true", "false", false},
		{"—", "", true},
		{"off", "", true},
		{"manager", "", false},
		{"batchledger-ledger-key", "batchledger-ledger-key", true},
	}
	for _, tc := range cases {
		if got := sameDefault(tc.doc, tc.value); got != tc.want {
			t.Errorf("sameDefault(%q, %q) = %v, want %v", tc.doc, tc.value, got, tc.want)
		}
	}
}
