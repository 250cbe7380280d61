package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"batchledger.dev/batchledger/pkg/release"
)

func newReleaseCommand(o *Options) *cobra.Command {
	var allNamespaces, dryRun bool
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Remove batchledger's result-capture finalizer from every pod it holds, for a clean uninstall",
		Long: `release removes the finalizer batchledger.dev/result-capture from the pods that carry it,
and only that finalizer. Once batchledger is uninstalled nothing else removes it: its pods
stay Terminating and block the deletion of their namespace. Run it after removing the
batchledger webhooks (so that no new pod is held) and before or after removing the manager;
the results of pods released this way are not recorded.`,
		Example: `  kubectl batchledger release -A --dry-run
  kubectl batchledger release -n ml-team`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ns, err := o.clientAndNamespace()
			if err != nil {
				return err
			}
			if allNamespaces {
				ns = ""
			}
			rep, err := release.Release(cmd.Context(), c, release.Options{Namespace: ns, DryRun: dryRun})
			if err != nil {
				// A List failed part way: say what was done before it, never "no pod is held".
				if len(rep.Held) > 0 {
					printRelease(o.Out, rep)
				}
				return err
			}
			printRelease(o.Out, rep)
			if len(rep.Errors) > 0 {
				return fmt.Errorf("%d of %d held pods still held:\n%w", len(rep.Errors), len(rep.Held), rep.Err())
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Release pods of every namespace.")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "Change nothing; list the pods that would be released.")
	return cmd
}

// printRelease writes one line per pod released (or that would be, in a dry run), gone
// or released meanwhile by the controller, then a summary line.
func printRelease(w io.Writer, rep *release.Report) {
	if rep.DryRun {
		for _, p := range rep.Held {
			fmt.Fprintf(w, "would release pod %s\n", p)
		}
	}
	for _, p := range rep.Released {
		fmt.Fprintf(w, "released pod %s\n", p)
	}
	for _, p := range rep.AlreadyGone {
		fmt.Fprintf(w, "pod %s was already gone\n", p)
	}
	for _, p := range rep.AlreadyReleased {
		fmt.Fprintf(w, "pod %s was already released\n", p)
	}
	where := "in namespace " + rep.Namespace
	if rep.Namespace == "" {
		where = "in any namespace"
	}
	if len(rep.Held) == 0 {
		fmt.Fprintf(w, "no pod is held by batchledger %s\n", where)
		return
	}
	if rep.Namespace == "" {
		where = "across all namespaces"
	}
	if rep.DryRun {
		fmt.Fprintf(w, "would release %s held by batchledger %s (dry run: nothing changed)\n", pods(len(rep.Held)), where)
		return
	}
	summary := []string{fmt.Sprintf("released %s held by batchledger %s", pods(len(rep.Released)), where)}
	if n := len(rep.AlreadyGone); n > 0 {
		summary = append(summary, fmt.Sprintf("%d already gone", n))
	}
	if n := len(rep.AlreadyReleased); n > 0 {
		summary = append(summary, fmt.Sprintf("%d already released", n))
	}
	if n := len(rep.Errors); n > 0 {
		summary = append(summary, fmt.Sprintf("%d still held", n))
	}
	fmt.Fprintln(w, strings.Join(summary, "; "))
}

func pods(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}
