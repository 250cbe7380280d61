// Package explain is the plugin's `explain` verb: it resolves an object to its batch
// accounts and prints each account's Explanation (pkg/cli/explanation) as prose and
// tables (text.go) or through kubectl's printers (print.go).
package explain

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

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

// Flags are explain's flags.
type Flags struct {
	// PrintFlags are kubectl's printer flags for -o json|yaml|jsonpath|go-template...;
	// -o text (or none) is the prose.
	PrintFlags *genericclioptions.PrintFlags
	// MaxRows bounds each table (missing shards, results, rejections).
	MaxRows int
	// ExitCode makes a batch that is not Accepted end the command with options.ExitNotAccepted.
	ExitCode bool
}

// NewCommand is `explain (account|workload|job|jobset|trainjob) NAME`.
func NewCommand(o *options.Options) *cobra.Command {
	eo := Flags{PrintFlags: genericclioptions.NewPrintFlags("").WithDefaultOutput(OutputText), MaxRows: explanation.DefaultMaxRows}
	// An Explanation has no object metadata: -o name has nothing to print.
	eo.PrintFlags.NamePrintFlags = nil
	cmd := &cobra.Command{
		Use:   resolve.KindNameUse("explain"),
		Short: "Explain a whole batch account: Jobs, populations, missing shards, results, verdict",
		Long: `Explain renders the whole batch account an object belongs to: the named Jobs with UID
and restart attempt, the revisions (input and model), each Job's success policy,
the required and completed index populations, failed indexes, the missing shards and the
identity each waits for, attempts versus indexes, the observation points (Job
resourceVersion, terminal condition and time), the Kueue Workload, the accepted result
per shard, rejections, superseded identities, and what is still needed for acceptance.

A Workload resolves to its owner Job, JobSet or TrainJob; a Job, JobSet or TrainJob to
every account that targets it. An Accepted account speaks only for the Jobs on its record:
for a Job re-run under one of its targets' names, or that Job's Workload, it is left out
with a warning on stderr, and an object no account follows is an error.
-o json|yaml|jsonpath|go-template prints an Explanation (apiVersion
cli.batchledger.dev/v1alpha1), or an ExplanationList when the object concerns several
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
			if eo.MaxRows < 0 {
				return fmt.Errorf("--max-rows must not be negative")
			}
			p, err := eo.printer()
			if err != nil {
				return err
			}
			c, ns, err := o.ClientAndNamespace()
			if err != nil {
				return err
			}
			exs, notFollowing, err := explain(cmd.Context(), c, ns, kind, name, eo.MaxRows)
			if err != nil {
				return err
			}
			resolve.WarnNotFollowing(o.ErrOut, notFollowing)
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
	cmd.Flags().IntVar(&eo.MaxRows, "max-rows", eo.MaxRows, "At most this many rows per table (missing shards, results, rejections); the rest is counted; 0 means the default.")
	cmd.Flags().BoolVar(&eo.ExitCode, "exit-code", false, fmt.Sprintf("Exit with code %d when a batch explained is not Accepted.", options.ExitNotAccepted))
	return cmd
}

// printer is the kubectl printer of -o, nil for the prose.
func (eo *Flags) printer() (printers.ResourcePrinter, error) {
	if f := eo.PrintFlags.OutputFormat; (f == nil || *f == "" || *f == OutputText) && !options.TemplateOnly(eo.PrintFlags) {
		return nil, nil
	}
	p, err := eo.PrintFlags.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("unsupported output format %q: use text, %s", *eo.PrintFlags.OutputFormat, strings.Join(eo.PrintFlags.AllowedFormats(), ", "))
	}
	return p, err
}
