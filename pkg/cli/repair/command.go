// Package repair is the plugin's `repair` verb: it plans follow-up Jobs for the shards an
// account can no longer cover or accept (plan.go, job.go), creates them and joins them to
// the account through spec.repairs (apply.go), and says what it did (print.go).
package repair

import (
	"github.com/spf13/cobra"

	"batchledger.dev/batchledger/pkg/cli/completion"
	"batchledger.dev/batchledger/pkg/cli/options"
)

// FieldManager is the field manager repair writes spec.repairs under. It must not
// start with "kubectl": Flux's kustomize-controller takes over the fields of every
// kubectl* manager (to undo kubectl edits) and would then prune the repairs.
const FieldManager = "batchledger-repair"

// NewCommand is `repair ACCOUNT`.
func NewCommand(o *options.Options) *cobra.Command {
	var dryRun options.DryRun
	cmd := &cobra.Command{
		Use:   "repair ACCOUNT",
		Short: "Re-run shards that can no longer be covered or accepted in follow-up Jobs joined by repair assignments",
		Long: `Repair re-runs the account's missing shards whose identities can no longer complete
(their Job Failed, Completed without them or was deleted, or the index failed), and, when
the account requires results, the covered shards whose result can no longer arrive
(MissingResult) or was rejected. For each original Job with such shards it creates one
follow-up Indexed Job <job>-repair-<n> from the same pod template (from an earlier repair
Job of it when the original was deleted), queue and priority, over as many indexes as
shards to re-run (at most as many at once as the original ran), and appends to the
account's spec.repairs an entry mapping its indexes 0..k-1 onto those shards in order.

spec.repairs is written under the field manager ` + FieldManager + `, apart from the
spec.assignments of the account's manifest: a GitOps tool (Argo CD, Flux) that re-applies
the manifest leaves the repairs alone.

The Job is created suspended; Kueue unsuspends it on admission (a Job without a queue is
unsuspended once the account names it). Its containers get ` + EnvRepairOf + ` and
` + EnvOriginalIndexes + ` (the original index each repair index stands for), so that
a worker mapping its index onto a shard can find its shard.

Shards assigned to JobSet or TrainJob children are refused, and with them the whole
plan: a running JobSet re-runs its children itself (restart), one that ended recreates
none; a TrainJob's nodes are the ranks of one training run, so the TrainJob is
re-submitted. Otherwise append a repair assignment to spec.repairs by hand.`,
		Example: `  kubectl batchledger repair ij245 -n ml-team --dry-run          # print the Jobs and entries, send nothing
  kubectl batchledger repair ij245 -n ml-team --dry-run=server   # let the API server and webhooks judge them
  kubectl batchledger repair ij245 -n ml-team`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completion.AccountNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.ClientAndNamespace()
			if err != nil {
				return err
			}
			plan, err := Run(cmd.Context(), c, ns, args[0], dryRun)
			if err != nil {
				return err
			}
			return PrintPlan(o.Out, plan, dryRun)
		},
	}
	options.AddDryRunFlag(cmd, &dryRun, "print the repair Jobs and spec.repairs entries, send nothing.",
		"send the Jobs and the account change with dryRun=All (admission and validation run, nothing is stored).")
	return cmd
}
