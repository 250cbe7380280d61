package get

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/liggitt/tabwriter"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/options"
)

// maxMissingWidth bounds the MISSING column; the account's compact form is already
// bounded, but a table cell should stay a cell.
const maxMissingWidth = 40

// notJudged is the MISSING cell of an account the controller has written no status for.
const notJudged = "<not judged>"

// accountPrinter prints accounts the way get's flags ask.
type accountPrinter struct {
	// table is set for the human table (default and wide) and custom columns: it sorts by
	// verdict (custom columns do not) and keeps its header across calls (a watch).
	table bool
	// toTable builds the table of accounts; nil for the other printers.
	toTable func([]v1alpha1.BatchAccount) (*metav1.Table, error)
	printer printers.ResourcePrinter
	// tw is the table's tabwriter, kept across prints (it remembers column widths, so
	// that a watch's rows line up under the header); it is flushed after each print.
	tw *tabwriter.Writer
	// headers, for custom columns, is the header line as the user wrote it (kubectl's
	// custom-columns printer keeps its case; the table printer would upper-case it),
	// printed once before the first row; nil when the table printer prints headers.
	headers       []string
	printedHeader bool
}

// printer returns the printer of get's -o.
func (g *Flags) printer(withNamespace bool, now func() time.Time) (*accountPrinter, error) {
	format := ""
	if g.PrintFlags.OutputFormat != nil {
		format = *g.PrintFlags.OutputFormat
	}
	opts := printers.PrintOptions{NoHeaders: g.NoHeaders, WithNamespace: withNamespace, ShowLabels: g.ShowLabels, ColumnLabels: g.LabelColumns}
	switch {
	case format == "" && options.TemplateOnly(g.PrintFlags):
		// --template without -o is a go-template, as in kubectl: the printer flags decide.
	case format == "" || format == "wide":
		opts.Wide = format == "wide"
		return &accountPrinter{table: true, printer: printers.NewTablePrinter(opts), toTable: func(accts []v1alpha1.BatchAccount) (*metav1.Table, error) {
			sortByVerdict(accts)
			return accountTable(accts, now()), nil
		}}, nil
	case strings.HasPrefix(format, "custom-columns="):
		cols, err := parseCustomColumns(strings.TrimPrefix(format, "custom-columns="))
		if err != nil {
			return nil, err
		}
		// Custom columns name their own namespace column, as in kubectl.
		opts.WithNamespace, opts.ShowLabels, opts.ColumnLabels = false, false, nil
		var headers []string
		if !opts.NoHeaders {
			headers = cols.headers
		}
		opts.NoHeaders = true
		return &accountPrinter{table: true, printer: printers.NewTablePrinter(opts), headers: headers, toTable: func(accts []v1alpha1.BatchAccount) (*metav1.Table, error) {
			return cols.table(accts)
		}}, nil
	case format == "custom-columns":
		return nil, fmt.Errorf("custom-columns format specified but no custom columns given: -o custom-columns=NAME:JSONPATH,...")
	}
	p, err := g.PrintFlags.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("%w, wide, custom-columns=", err)
	}
	if err != nil {
		return nil, err
	}
	return &accountPrinter{printer: p}, nil
}

// print writes accts: as table rows, or as one object when single (a get NAME, or one
// change of a watch), or as a kubectl List of objects.
func (p *accountPrinter) print(w io.Writer, accts []v1alpha1.BatchAccount, single bool) error {
	if p.toTable != nil {
		t, err := p.toTable(accts)
		if err != nil {
			return err
		}
		if p.tw == nil {
			p.tw = printers.GetNewTabWriter(w)
		}
		if p.headers != nil && !p.printedHeader && len(t.Rows) > 0 {
			fmt.Fprintln(p.tw, strings.Join(p.headers, "\t"))
			p.printedHeader = true
		}
		if err := p.printer.PrintObj(t, p.tw); err != nil {
			return err
		}
		return p.tw.Flush()
	}
	if single && len(accts) == 1 {
		ba := accts[0].DeepCopy()
		// Typed objects come without their kind; the printers need it, as scripts do.
		ba.APIVersion, ba.Kind = v1alpha1.GroupVersion.String(), "BatchAccount"
		return p.printer.PrintObj(ba, w)
	}
	// A kubectl List, unstructured as kubectl prints it: every printer (-o name too)
	// takes it, and each item carries its kind.
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}}}
	for i := range accts {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&accts[i])
		if err != nil {
			return err
		}
		item := unstructured.Unstructured{Object: u}
		item.SetAPIVersion(v1alpha1.GroupVersion.String())
		item.SetKind("BatchAccount")
		list.Items = append(list.Items, item)
	}
	return p.printer.PrintObj(list, w)
}

// accountColumns are get's table columns; the wide ones have priority 1.
var accountColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "The BatchAccount's name."},
	{Name: "Progress", Type: "string", Description: "status.shards.progress: shards accepted (when results are required) or covered, in percent."},
	{Name: "Covered", Type: "integer", Description: "Shards covered by a completed identity."},
	{Name: "Total", Type: "integer", Description: "Shards declared."},
	{Name: "Accepted", Type: "integer", Description: "Shards with an accepted result."},
	{Name: "Missing", Type: "string", Description: "The missing shards, compactly."},
	{Name: "Verdict", Type: "string", Description: "The reason of the Accepted condition; VerdictPending while the status judges an older spec generation."},
	{Name: "Age", Type: "string", Description: "Time since the account was created."},
	{Name: "Input", Type: "string", Priority: 1, Description: "spec.inputRevision."},
	{Name: "Model", Type: "string", Priority: 1, Description: "spec.modelRevision."},
	{Name: "Targets", Type: "integer", Priority: 1, Description: "Targets observed: the Jobs (or JobSet children) the assignments name."},
	{Name: "Repairs", Type: "integer", Priority: 1, Description: "Repair assignments, in spec.assignments and spec.repairs."},
}

// accountTable is the table of accts in their order: the columns of accountColumns, each
// row carrying its account (for the namespace and label columns).
func accountTable(accts []v1alpha1.BatchAccount, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: accountColumns, Rows: make([]metav1.TableRow, 0, len(accts))}
	for i := range accts {
		ba := &accts[i]
		s := ba.Status.Shards
		verdict := verdictOf(ba)
		if verdict == "" {
			verdict = "<none>"
		}
		total, missing := int64(s.Total), s.Missing
		switch {
		case len(ba.Status.Conditions) == 0:
			// Not judged yet: the spec declares the shards, and "-" would claim none is missing.
			total, missing = int64(account.Compile(ba.Namespace, &ba.Spec).Shards.Count()), notJudged
		case missing == "":
			missing = "-"
		case len([]rune(missing)) > maxMissingWidth:
			missing = string([]rune(missing)[:maxMissingWidth-1]) + "…"
		}
		age := "<unknown>"
		if !ba.CreationTimestamp.IsZero() {
			age = duration.HumanDuration(now.Sub(ba.CreationTimestamp.Time))
		}
		repairs := len(ba.Spec.Repairs)
		for _, a := range ba.Spec.Assignments {
			if a.Repair {
				repairs++
			}
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{ba.Name, progressOfStatus(ba), int64(s.Covered), total, int64(s.Accepted), missing, verdict, age,
				ba.Spec.InputRevision, ba.Spec.ModelRevision, int64(len(ba.Status.Targets)), int64(repairs)},
			Object: runtime.RawExtension{Object: ba},
		})
	}
	return t
}

// verdictRanks orders verdicts for `get`: those that need someone first (the batch
// cannot be accepted as it stands), then those still moving, in the order a batch moves
// through them, then accounts without a verdict yet, and Accepted last.
var verdictRanks = map[string]int{
	v1alpha1.ReasonAssignmentInvalid: 0, v1alpha1.ReasonTargetDeleted: 0, v1alpha1.ReasonResultRejected: 0,
	v1alpha1.ReasonMissingResult: 0, v1alpha1.ReasonRuleInvalid: 0,
	v1alpha1.ReasonTargetsNotFound: 2, v1alpha1.ReasonShardsMissing: 2,
	v1alpha1.ReasonAwaitingTermination: 3,
	v1alpha1.ReasonResultsPending:      4,
	"":                                 5,
	v1alpha1.ReasonVerdictPending:      5,
	v1alpha1.ReasonAccepted:            6,
}

// verdictRank ranks a verdict reason; a reason unknown to this plugin (a newer
// controller) comes right after those that need someone.
func verdictRank(reason string) int {
	if r, ok := verdictRanks[reason]; ok {
		return r
	}
	return 1
}

// verdictOf is the Accepted condition's reason, "" before the controller wrote one, and
// VerdictPending while the status judges an older spec generation: that condition is no
// verdict on the spec as it is now (explain and watch say so too, and the controller
// tells the Workload the same), although the CRD's printer column still shows it.
func verdictOf(ba *v1alpha1.BatchAccount) string {
	c := meta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionAccepted)
	switch {
	case c == nil:
		return ""
	case ba.Status.ObservedGeneration < ba.Generation:
		return v1alpha1.ReasonVerdictPending
	}
	return c.Reason
}

// sortByVerdict orders accounts by verdict rank, then verdict, namespace and name.
func sortByVerdict(accts []v1alpha1.BatchAccount) {
	slices.SortStableFunc(accts, func(a, b v1alpha1.BatchAccount) int {
		va, vb := verdictOf(&a), verdictOf(&b)
		return cmp.Or(cmp.Compare(verdictRank(va), verdictRank(vb)), strings.Compare(va, vb),
			strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
}

// progressOfStatus is status.shards.progress, the CRD's Progress printer column: the
// percentage, rounded down, of shards accepted when results are required, else covered.
// A status written before the field existed is given the same value from its counts.
func progressOfStatus(ba *v1alpha1.BatchAccount) string {
	s := &ba.Status.Shards
	if len(ba.Status.Conditions) == 0 {
		return "-"
	}
	p := int64(s.Progress)
	done := s.Covered
	if ba.Spec.Acceptance != nil && ba.Spec.Acceptance.RequireResults {
		done = s.Accepted
	}
	if p == 0 && done > 0 && s.Total > 0 {
		p = int64(done) * 100 / int64(s.Total)
	}
	return fmt.Sprintf("%d%%", p)
}

// customColumns are the columns of -o custom-columns=HEADER:JSONPATH,...
type customColumns struct {
	headers []string
	paths   []*jsonpath.JSONPath
}

// parseCustomColumns reads kubectl's custom-columns spec. A path is written as kubectl
// takes it: ".metadata.name", "{.metadata.name}" or "metadata.name".
func parseCustomColumns(spec string) (*customColumns, error) {
	cols := &customColumns{}
	for _, part := range strings.Split(spec, ",") {
		header, path, ok := strings.Cut(part, ":")
		if !ok || header == "" || path == "" {
			return nil, fmt.Errorf("unexpected custom-columns spec %q: expected HEADER:JSONPATH[,HEADER:JSONPATH...]", part)
		}
		if !strings.HasPrefix(path, "{") {
			path = "{." + strings.TrimPrefix(path, ".") + "}"
		}
		jp := jsonpath.New(header).AllowMissingKeys(true)
		if err := jp.Parse(path); err != nil {
			return nil, fmt.Errorf("custom column %s: %w", header, err)
		}
		cols.headers = append(cols.headers, header)
		cols.paths = append(cols.paths, jp)
	}
	return cols, nil
}

// table evaluates the columns on each account: several values are joined by commas, none
// is <none>, as in kubectl.
func (c *customColumns) table(accts []v1alpha1.BatchAccount) (*metav1.Table, error) {
	t := &metav1.Table{}
	for _, h := range c.headers {
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: h, Type: "string"})
	}
	for i := range accts {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&accts[i])
		if err != nil {
			return nil, err
		}
		row := metav1.TableRow{Object: runtime.RawExtension{Object: &accts[i]}}
		for j, jp := range c.paths {
			results, err := jp.FindResults(obj)
			if err != nil {
				return nil, fmt.Errorf("custom column %s of BatchAccount %s/%s: %w", c.headers[j], accts[i].Namespace, accts[i].Name, err)
			}
			var values []string
			for _, r := range results {
				for _, v := range r {
					values = append(values, fmt.Sprint(v.Interface()))
				}
			}
			cell := strings.Join(values, ",")
			if len(values) == 0 {
				cell = "<none>"
			}
			row.Cells = append(row.Cells, cell)
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}
