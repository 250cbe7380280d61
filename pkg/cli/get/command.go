// Package get is the plugin's `get` verb: it lists BatchAccounts as kubectl get does
// (list.go), prints them with kubectl's printers and its own table sorted by verdict
// (print.go), and with -w follows their changes (watch.go).
package get

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/completion"
	"batchledger.dev/batchledger/pkg/cli/options"
)

// Flags are get's flags.
type Flags struct {
	// PrintFlags are kubectl's printer flags: -o json|yaml|kyaml|name|go-template|
	// jsonpath|jsonpath-as-json|... (with --template, --show-managed-fields); get adds
	// wide and custom-columns=SPEC itself, as kubectl does.
	PrintFlags *genericclioptions.PrintFlags
	// AllNamespaces lists every namespace (-A).
	AllNamespaces bool
	// Selector and FieldSelector filter the list on the server (-l, --field-selector).
	Selector, FieldSelector string
	// NoHeaders drops the table's header line.
	NoHeaders bool
	// ShowLabels adds a LABELS column; LabelColumns a column per label key (-L).
	ShowLabels   bool
	LabelColumns []string
	// Watch prints the list, then every change (-w); WatchOnly only the changes.
	Watch, WatchOnly bool
}

// NewCommand is `get [NAME]`.
func NewCommand(o *options.Options) *cobra.Command {
	g := &Flags{PrintFlags: genericclioptions.NewPrintFlags("")}
	cmd := &cobra.Command{
		Use:   "get [NAME]",
		Short: "List BatchAccounts with their progress, coverage and verdict, sorted by verdict",
		Long: `Get lists BatchAccounts as kubectl get does, with kubectl's printers. The default table
shows PROGRESS, COVERED, TOTAL, ACCEPTED, MISSING, VERDICT and AGE, sorted by verdict: the
accounts that need someone first, Accepted last; -o wide adds the revisions, the number of
targets and of repairs. Every other output (-o json, yaml, name, jsonpath, go-template,
custom-columns) lists the accounts by namespace and name.`,
		Example: `  kubectl batchledger get -n ml-team
  kubectl batchledger get -A -l team=vision --no-headers
  kubectl batchledger get ij245 -o jsonpath='{.status.shards.missing}'
  kubectl batchledger get -o json | jq -r '.items[] | select(.status.shards.covered < .status.shards.total) | .metadata.name'
  kubectl batchledger get -o custom-columns=NAME:.metadata.name,VERDICT:'.status.conditions[?(@.type=="Accepted")].reason'
  kubectl batchledger get -w                                   # print rows as they change`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completion.AccountNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return runGet(cmd.Context(), o, g, name)
		},
	}
	g.PrintFlags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format. One of: (%s, wide, custom-columns=NAME:JSONPATH,...).", strings.Join(g.PrintFlags.AllowedFormats(), ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(append(g.PrintFlags.AllowedFormats(), "wide", "custom-columns="), cobra.ShellCompDirectiveNoFileComp|cobra.ShellCompDirectiveNoSpace))
	cmd.Flags().BoolVarP(&g.AllNamespaces, "all-namespaces", "A", false, "List accounts of every namespace.")
	cmd.Flags().StringVarP(&g.Selector, "selector", "l", "", "Label selector to filter on, as kubectl takes it (e.g. -l team=ml,tier!=dev).")
	cmd.Flags().StringVar(&g.FieldSelector, "field-selector", "", "Field selector to filter on (metadata.name and metadata.namespace, e.g. --field-selector metadata.name!=ij245).")
	cmd.Flags().BoolVar(&g.NoHeaders, "no-headers", false, "Print no header line (table and custom-columns output).")
	cmd.Flags().BoolVar(&g.ShowLabels, "show-labels", false, "Add a LABELS column (table output).")
	cmd.Flags().StringSliceVarP(&g.LabelColumns, "label-columns", "L", nil, "Add a column per label key (table output).")
	cmd.Flags().BoolVarP(&g.Watch, "watch", "w", false, "After listing, watch for changes and print each changed account (a row, or an object with -o).")
	cmd.Flags().BoolVar(&g.WatchOnly, "watch-only", false, "Watch for changes without listing first.")
	return cmd
}

// runGet lists (and with -w, follows) the accounts and prints them.
func runGet(ctx context.Context, o *options.Options, g *Flags, name string) error {
	ns, err := o.Namespace()
	if err != nil {
		return err
	}
	if g.AllNamespaces {
		ns = ""
	}
	if name != "" && ns == "" {
		return fmt.Errorf("a BatchAccount name needs a namespace: drop -A or the name")
	}
	filter, err := g.listFilter()
	if err != nil {
		return err
	}
	if name != "" && !filter.empty() {
		return fmt.Errorf("a BatchAccount name cannot be given with -l or --field-selector, as in kubectl")
	}
	p, err := g.printer(g.AllNamespaces, o.Now)
	if err != nil {
		return err
	}
	if g.Watch || g.WatchOnly {
		c, err := o.WatchClient()
		if err != nil {
			return err
		}
		if name != "" {
			// As kubectl get NAME -w: a name no account has is an error, not a silent
			// watch for it (a typo would wait forever).
			if _, err := ListAccounts(ctx, c, ns, name); err != nil {
				return err
			}
		}
		return watchAccounts(ctx, c, o.Out, p, ns, name, filter, !g.WatchOnly)
	}
	c, err := o.Client()
	if err != nil {
		return err
	}
	var accts []v1alpha1.BatchAccount
	if name != "" {
		accts, err = ListAccounts(ctx, c, ns, name)
	} else {
		accts, _, err = listAccounts(ctx, c, ns, filter.options("")...)
	}
	if err != nil {
		return err
	}
	if len(accts) == 0 && p.table {
		where := fmt.Sprintf("in namespace %q", ns)
		if ns == "" {
			where = "in any namespace"
		}
		fmt.Fprintf(o.ErrOut, "No BatchAccounts found %s.\n", where)
		return nil
	}
	return p.print(o.Out, accts, name != "")
}
