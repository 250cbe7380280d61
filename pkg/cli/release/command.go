// Package release is the plugin's `release` verb: it removes batchledger's finalizers
// from the pods and Jobs it holds (pkg/release), for a clean uninstall.
package release

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"batchledger.dev/batchledger/pkg/cli/options"
	held "batchledger.dev/batchledger/pkg/release"
)

// NewCommand is `release`.
func NewCommand(o *options.Options) *cobra.Command {
	var allNamespaces bool
	var dryRun options.DryRun
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Remove batchledger's finalizers from every pod and Job it holds, for a clean uninstall",
		Long: `Release removes the finalizer batchledger.dev/result-capture from the pods that carry it,
and batchledger.dev/record from the Jobs that carry it, and only those finalizers. Once
batchledger is uninstalled nothing else removes them: its pods and Jobs stay Terminating
and block the deletion of their namespace (and a JobSet's restart). Run it after removing
the batchledger webhooks (so that no new pod or Job is held) and after stopping the manager
(which gives the Jobs accounts name the record finalizer when it first sees them); the
results of pods released this way are not recorded, nor the ends of Jobs released while
they are being deleted.`,
		Example: `  kubectl batchledger release -A --dry-run          # list what would be released, send nothing
  kubectl batchledger release -A --dry-run=server   # send each removal with dryRun=All
  kubectl batchledger release -n ml-team`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ns, err := o.ClientAndNamespace()
			if err != nil {
				return err
			}
			if allNamespaces {
				ns = ""
			}
			opts := held.Options{Namespace: ns, DryRun: dryRun.ClientSide(), ServerDryRun: dryRun.ServerSide()}
			var errs []error
			for _, k := range held.Kinds {
				rep, err := k.Release(cmd.Context(), c, opts)
				if err != nil {
					// A List failed part way: say what was done before it, never "no pod is held".
					if len(rep.Held) > 0 {
						printRelease(o.Out, rep, k.Noun)
					}
					errs = append(errs, err)
					continue
				}
				// No Job held is no news: say so for pods only, as ever.
				if k.Noun == "pod" || len(rep.Held) > 0 {
					printRelease(o.Out, rep, k.Noun)
				}
				if len(rep.Errors) > 0 {
					errs = append(errs, fmt.Errorf("%d of %d held %ss still held:\n%w", len(rep.Errors), len(rep.Held), k.Noun, rep.Err()))
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Release pods and Jobs of every namespace.")
	options.AddDryRunFlag(cmd, &dryRun, "list the pods and Jobs that would be released, send nothing.",
		"send each finalizer removal with dryRun=All (admission and validation run, nothing is stored).")
	return cmd
}
