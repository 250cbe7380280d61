package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/completion"
	"batchledger.dev/batchledger/pkg/cli/explanation"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/resolve"
)

// Output formats of explain that are not kubectl printers.
const (
	// OutputText is the prose and tables, the default.
	OutputText = "text"
	OutputJSON = "json"
	OutputYAML = "yaml"
)

// ExplainOptions are explain's flags.
type ExplainOptions struct {
	// PrintFlags are kubectl's printer flags for -o json|yaml|jsonpath|go-template...;
	// -o text (or none) is the prose.
	PrintFlags *genericclioptions.PrintFlags
	// MaxRows bounds each table (missing shards, results, rejections).
	MaxRows int
	// ExitCode makes a batch that is not Accepted end the command with options.ExitNotAccepted.
	ExitCode bool
}

func newExplainCommand(o *options.Options) *cobra.Command {
	eo := ExplainOptions{PrintFlags: genericclioptions.NewPrintFlags("").WithDefaultOutput(OutputText), MaxRows: explanation.DefaultMaxRows}
	// An explanation.Explanation has no object metadata: -o name has nothing to print.
	eo.PrintFlags.NamePrintFlags = nil
	cmd := &cobra.Command{
		Use:   "explain (account|workload|job|jobset) NAME",
		Short: "Explain a whole batch account: Jobs, populations, missing shards, results, verdict",
		Long: `Explain renders the whole batch account an object belongs to: the named Jobs with UID
and restart attempt, the revisions (input and model), each Job's success policy,
the required and completed index populations, failed indexes, the missing shards and the
identity each waits for, attempts versus indexes, the observation points (Job
resourceVersion, terminal condition and time), the Kueue Workload, the accepted result
per shard, rejections, superseded identities, and what is still needed for acceptance.

A Workload resolves to its owner Job or JobSet; a Job or JobSet to every account that
targets it. -o json|yaml|jsonpath|go-template prints an explanation.Explanation (apiVersion
cli.batchledger.dev/v1alpha1), or an explanation.ExplanationList when the object concerns several
accounts.`,
		Example: `  kubectl batchledger explain account ij245 -n ml-team
  kubectl batchledger explain workload job-j-3f2c9 -o yaml
  kubectl batchledger explain account ij245 -o jsonpath='{.shards.missingShards[*].shard}'
  kubectl batchledger explain job j -o json | jq -r '(.items // [.])[] | .stillNeeded[]?'   # one account or several
  kubectl batchledger explain job j --exit-code   # exit 2 unless Accepted`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completion.KindName(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := resolve.ParseKindName(args)
			if err != nil {
				return err
			}
			p, err := eo.printer()
			if err != nil {
				return err
			}
			c, ns, err := o.ClientAndNamespace()
			if err != nil {
				return err
			}
			exs, err := Explain(cmd.Context(), c, ns, kind, name, eo.MaxRows)
			if err != nil {
				return err
			}
			if err := writeExplanations(o.Out, exs, p); err != nil {
				return err
			}
			if eo.ExitCode {
				for _, ex := range exs {
					if !ex.Verdict.Accepted {
						return options.ErrNotAccepted
					}
				}
			}
			return nil
		},
	}
	eo.PrintFlags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format. One of: (text, %s).", strings.Join(eo.PrintFlags.AllowedFormats(), ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(append([]string{OutputText}, eo.PrintFlags.AllowedFormats()...), cobra.ShellCompDirectiveNoFileComp|cobra.ShellCompDirectiveNoSpace))
	cmd.Flags().IntVar(&eo.MaxRows, "max-rows", eo.MaxRows, "At most this many rows per table (missing shards, results, rejections); the rest is counted.")
	cmd.Flags().BoolVar(&eo.ExitCode, "exit-code", false, fmt.Sprintf("Exit with code %d when a batch explained is not Accepted.", options.ExitNotAccepted))
	return cmd
}

// printer is the kubectl printer of -o, nil for the prose.
func (eo *ExplainOptions) printer() (printers.ResourcePrinter, error) {
	if f := eo.PrintFlags.OutputFormat; (f == nil || *f == "" || *f == OutputText) && !options.TemplateOnly(eo.PrintFlags) {
		return nil, nil
	}
	p, err := eo.PrintFlags.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("unsupported output format %q: use text, %s", *eo.PrintFlags.OutputFormat, strings.Join(eo.PrintFlags.AllowedFormats(), ", "))
	}
	return p, err
}

// Explain resolves kind/name to its accounts and explains each, reading the accounts'
// ShardResults chunks (label batchledger.dev/account) for the accepted results.
func Explain(ctx context.Context, c client.Client, namespace, kind, name string, maxRows int) ([]explanation.Explanation, error) {
	accts, err := resolve.ResolveAccounts(ctx, c, namespace, kind, name)
	if err != nil {
		return nil, err
	}
	out := make([]explanation.Explanation, 0, len(accts))
	for i := range accts {
		ba := &accts[i]
		var chunks v1alpha1.ShardResultsList
		if err := c.List(ctx, &chunks, client.InNamespace(ba.Namespace), client.MatchingLabels(v1alpha1.ChunkLabels(ba))); err != nil {
			return nil, fmt.Errorf("listing ShardResults of BatchAccount %q in namespace %q: %w", ba.Name, ba.Namespace, err)
		}
		out = append(out, explanation.BuildExplanation(ba, chunks.Items, maxRows))
	}
	return out, nil
}

// WriteExplanations prints explanations as text (separated by a blank line), or as one
// explanation.Explanation in json/yaml, or an explanation.ExplanationList when there are several.
func WriteExplanations(w io.Writer, exs []explanation.Explanation, format string) error {
	if format == OutputText {
		return writeExplanations(w, exs, nil)
	}
	var p printers.ResourcePrinter = &printers.JSONPrinter{}
	if format == OutputYAML {
		p = &printers.YAMLPrinter{}
	}
	return writeExplanations(w, exs, p)
}

// writeExplanations prints explanations with p: one explanation.Explanation, or an explanation.ExplanationList
// when there are several; with no printer, as text separated by a blank line.
func writeExplanations(w io.Writer, exs []explanation.Explanation, p printers.ResourcePrinter) error {
	if p == nil {
		for i := range exs {
			if i > 0 {
				fmt.Fprintln(w)
			}
			RenderText(w, &exs[i])
		}
		return nil
	}
	list := explanation.NewExplanationList(exs)
	if len(list.Items) == 1 {
		return p.PrintObj(&list.Items[0], w)
	}
	return p.PrintObj(list, w)
}
