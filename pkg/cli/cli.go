// Package cli implements the kubectl plugin kubectl-batchledger: `explain` renders a
// whole batch account in prose and tables (or as a structured Explanation), `get` lists
// accounts, `watch` follows a batch live, `map` draws its shards as a grid (or an SVG),
// `repair` re-runs the missing shards in follow-up Jobs joined to the account by entries
// of spec.repairs, and `release` lets go of the pods batchledger holds (for an uninstall).
// get and explain print through kubectl's printers (k8s.io/cli-runtime); repair and
// release take kubectl's --dry-run=none|client|server; names complete from the cluster.
//
// The commands read the account status the controller wrote; they never recompute a
// verdict. What they derive (the identity each missing shard waits for, which recorded
// result stands for a shard, what is still needed) is derived from that status and the
// account's own mapping, so the plugin and the controller cannot disagree about a batch.
package cli

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"batchledger.dev/batchledger/pkg/cli/completion"
	"batchledger.dev/batchledger/pkg/cli/explain"
	"batchledger.dev/batchledger/pkg/cli/get"
	"batchledger.dev/batchledger/pkg/cli/mapview"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/release"
	"batchledger.dev/batchledger/pkg/cli/repair"
	"batchledger.dev/batchledger/pkg/cli/version"
	"batchledger.dev/batchledger/pkg/cli/watch"
)

// NewCommand builds the plugin's root command with its subcommands.
func NewCommand(o *options.Options) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-batchledger",
		Short: "Explain, list, watch, map and repair batchledger BatchAccounts; release held pods",
		Long: `kubectl batchledger answers the question a batch owner has when a batch "finished":
which declared shards were processed, by which Job and completion index, under which
input and model revision, and were their outputs accepted?`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl batchledger"},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	o.ConfigFlags.AddFlags(root.PersistentFlags())
	_ = root.RegisterFlagCompletionFunc("namespace", completion.Namespaces(o))
	root.AddCommand(explain.NewCommand(o))
	root.AddCommand(get.NewCommand(o))
	root.AddCommand(repair.NewCommand(o))
	root.AddCommand(watch.NewCommand(o))
	root.AddCommand(mapview.NewCommand(o))
	root.AddCommand(release.NewCommand(o))
	root.AddCommand(version.NewCommand(o))
	return root
}

// Execute runs the plugin with args (without the program name) and returns the exit
// code: options.ExitOK, options.ExitError (after printing "error: ..." to stderr), or the
// code of an options.CodeError such as options.ExitNotAccepted.
func Execute(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	cmd := NewCommand(options.NewOptions(streams))
	cmd.SetArgs(args)
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	err := cmd.ExecuteContext(ctx)
	return options.ExitCodeOf(err, streams.ErrOut)
}
