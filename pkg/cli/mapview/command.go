// Package mapview is the plugin's `map` verb: it draws an account's shards as a grid,
// one row group per Job. The model (model.go) derives each shard's state from the
// account; the printers draw it for a terminal (print.go) or as an SVG picture (svg.go).
package mapview

import (
	"bufio"
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/completion"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/resolve"
)

// mapOptions are map's flags.
type mapOptions struct {
	svg string
	// perCell forces shards per cell; 0 picks it from the cell budget.
	perCell int
	width   int
	colour  bool
}

// NewCommand is `map ACCOUNT`.
func NewCommand(o *options.Options) *cobra.Command {
	mo := mapOptions{}
	cmd := &cobra.Command{
		Use:   "map ACCOUNT",
		Short: "Draw an account's shards as a grid: covered, missing, accepted, rejected, conflict",
		Long: `Map draws the shards of a BatchAccount as a grid, one row group per Job, in the order of
the Job's completion indexes: one cell per shard, or for large batches one cell per run
of shards showing the worst state among them (rejected, conflict, no result can
arrive, missing, not listed, covered, accepted). On a terminal the cells are coloured; otherwise each state has its own
character. --svg FILE writes the same map as an SVG picture for a report or an issue.`,
		Example: `  kubectl batchledger map ij245 -n ml-team
  kubectl batchledger map big --svg big.svg`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completion.AccountNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if mo.perCell < 0 {
				return fmt.Errorf("--shards-per-cell must not be negative")
			}
			if mo.width < 0 {
				return fmt.Errorf("--width must not be negative")
			}
			c, ns, err := o.ClientAndNamespace()
			if err != nil {
				return err
			}
			sm, err := loadShardMap(cmd.Context(), c, ns, args[0])
			if err != nil {
				return err
			}
			if mo.svg != "" {
				if err := writeSVGFile(mo.svg, sm, mo.perCell); err != nil {
					return err
				}
				fmt.Fprintf(o.Out, "wrote %s\n", mo.svg)
				return nil
			}
			tty, width, colour := output.DescribeTerminal(o.Out)
			if mo.width <= 0 {
				mo.width = width
			}
			mo.colour = tty && colour
			bw := bufio.NewWriter(o.Out)
			renderMap(bw, sm, mo)
			return bw.Flush()
		},
	}
	cmd.Flags().StringVar(&mo.svg, "svg", "", "Write the map as an SVG picture to this file instead of drawing it.")
	cmd.Flags().IntVar(&mo.perCell, "shards-per-cell", 0, "Shards per cell; 0 fits the map to the terminal (or to the SVG's cell budget).")
	cmd.Flags().IntVar(&mo.width, "width", 0, "Width in columns; 0 means the terminal's width.")
	return cmd
}

// loadShardMap reads an account and its ShardResults chunks and maps its shards.
func loadShardMap(ctx context.Context, c client.Client, ns, name string) (*shardMap, error) {
	accts, err := resolve.ResolveAccounts(ctx, c, ns, resolve.KindAccount, name)
	if err != nil {
		return nil, err
	}
	ba := &accts[0]
	var chunks v1alpha1.ShardResultsList
	if err := c.List(ctx, &chunks, client.InNamespace(ns), client.MatchingLabels(v1alpha1.ChunkLabels(ba))); err != nil {
		return nil, fmt.Errorf("listing ShardResults of BatchAccount %q in namespace %q: %w", ba.Name, ns, err)
	}
	return buildShardMap(ba, chunks.Items), nil
}
