// Package version is the plugin's `version` verb: the plugin's own build, without a cluster.
package version

import (
	"github.com/spf13/cobra"

	"batchledger.dev/batchledger/pkg/cli/options"
	buildinfo "batchledger.dev/batchledger/pkg/version"
)

// NewCommand is `version`: it prints the plugin's own build: the version it was stamped with
// (pkg/version), the source revision, the Go toolchain and the platform. It needs no
// cluster, so that a bug report can always say which plugin it is about.
func NewCommand(o *options.Options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Long: `version prints the version the plugin was built as, the source revision, the Go
toolchain and the platform. -o json|yaml prints the same as an object. It does not
contact the cluster: the manager's version is in its log's first line and in
"batchledger --version".`,
		Example: `  kubectl batchledger version
  kubectl batchledger version -o json`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			return printInfo(o.Out, buildinfo.Get(), output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml (default: one line).")
	return cmd
}
