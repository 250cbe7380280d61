package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// Output formats of explain.
const (
	OutputText = "text"
	OutputJSON = "json"
	OutputYAML = "yaml"
)

// ExplainOptions are explain's flags.
type ExplainOptions struct {
	// Output is text, json or yaml.
	Output string
	// MaxRows bounds each table (missing shards, results, rejections).
	MaxRows int
	// ExitCode makes a batch that is not Accepted end the command with ExitNotAccepted.
	ExitCode bool
}

func newExplainCommand(o *Options) *cobra.Command {
	eo := ExplainOptions{Output: OutputText, MaxRows: DefaultMaxRows}
	cmd := &cobra.Command{
		Use:   "explain (account|workload|job|jobset) NAME",
		Short: "Explain a whole batch account: Jobs, populations, missing shards, results, verdict",
		Long: `Explain renders the whole batch account an object belongs to: the named Jobs with UID
and restart attempt, the release (input and model revision), each Job's success policy,
the required and completed index populations, failed indexes, the missing shards and the
identity each waits for, attempts versus indexes, the observation points (Job
resourceVersion, terminal condition and time), the Kueue Workload, the accepted result
per shard, rejections, superseded identities, and what is still needed for acceptance.

A Workload resolves to its owner Job or JobSet; a Job or JobSet to every account that
targets it. -o json|yaml prints an Explanation (or {"items": [...]} when the object
concerns several accounts).`,
		Example: `  kubectl batchledger explain account ij245 -n ml-team
  kubectl batchledger explain workload job-j-3f2c9 -o yaml
  kubectl batchledger explain job j --exit-code   # exit 2 unless Accepted`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := parseKindName(args)
			if err != nil {
				return err
			}
			switch eo.Output {
			case OutputText, OutputJSON, OutputYAML:
			default:
				return fmt.Errorf("unsupported output format %q: use text, json or yaml", eo.Output)
			}
			c, ns, err := o.clientAndNamespace()
			if err != nil {
				return err
			}
			exs, err := Explain(cmd.Context(), c, ns, kind, name, eo.MaxRows)
			if err != nil {
				return err
			}
			if err := WriteExplanations(o.Out, exs, eo.Output); err != nil {
				return err
			}
			if eo.ExitCode {
				for _, ex := range exs {
					if !ex.Verdict.Accepted {
						return errNotAccepted
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&eo.Output, "output", "o", eo.Output, "Output format: text, json or yaml.")
	cmd.Flags().IntVar(&eo.MaxRows, "max-rows", eo.MaxRows, "At most this many rows per table (missing shards, results, rejections); the rest is counted.")
	cmd.Flags().BoolVar(&eo.ExitCode, "exit-code", false, fmt.Sprintf("Exit with code %d when a batch explained is not Accepted.", ExitNotAccepted))
	return cmd
}

// Explain resolves kind/name to its accounts and explains each, reading the accounts'
// ShardResults chunks (label batchledger.dev/account) for the accepted results.
func Explain(ctx context.Context, c client.Client, namespace, kind, name string, maxRows int) ([]Explanation, error) {
	accts, err := ResolveAccounts(ctx, c, namespace, kind, name)
	if err != nil {
		return nil, err
	}
	out := make([]Explanation, 0, len(accts))
	for i := range accts {
		ba := &accts[i]
		var chunks v1alpha1.ShardResultsList
		if err := c.List(ctx, &chunks, client.InNamespace(ba.Namespace), client.MatchingLabels(v1alpha1.ChunkLabels(ba))); err != nil {
			return nil, fmt.Errorf("listing ShardResults of BatchAccount %q in namespace %q: %w", ba.Name, ba.Namespace, err)
		}
		out = append(out, BuildExplanation(ba, chunks.Items, maxRows))
	}
	return out, nil
}

// WriteExplanations prints explanations as text (separated by a blank line), or as one
// Explanation in json/yaml, or an ExplanationList when there are several.
func WriteExplanations(w io.Writer, exs []Explanation, format string) error {
	if format == OutputText {
		for i := range exs {
			if i > 0 {
				fmt.Fprintln(w)
			}
			RenderText(w, &exs[i])
		}
		return nil
	}
	var v any = ExplanationList{Items: exs}
	if len(exs) == 1 {
		v = exs[0]
	}
	var b []byte
	var err error
	if format == OutputJSON {
		b, err = json.MarshalIndent(v, "", "  ")
		b = append(b, '\n')
	} else {
		b, err = yaml.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
