package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/completion"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/resolve"
	"batchledger.dev/batchledger/pkg/relations"
)

// RepairFieldManager is the field manager repair writes spec.repairs under. It must not
// start with "kubectl": Flux's kustomize-controller takes over the fields of every
// kubectl* manager (to undo kubectl edits) and would then prune the repairs.
const RepairFieldManager = "batchledger-repair"

func newRepairCommand(o *options.Options) *cobra.Command {
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
shards to re-run, and appends to the account's spec.repairs an entry mapping its indexes
0..k-1 onto those shards in order.

spec.repairs is written under the field manager ` + RepairFieldManager + `, apart from the
spec.assignments of the account's manifest: a GitOps tool (Argo CD, Flux) that re-applies
the manifest leaves the repairs alone.

The Job is created suspended; Kueue unsuspends it on admission (a Job without a queue is
unsuspended once the account names it). Its containers get ` + EnvRepairOf + ` and
` + EnvOriginalIndexes + ` (the original index each repair index stands for), so that
a worker mapping its index onto a shard can find its shard.

Shards assigned to JobSet children are refused: the JobSet re-runs its children itself.`,
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
			plan, err := Repair(cmd.Context(), c, ns, args[0], dryRun)
			if err != nil {
				return err
			}
			return PrintRepairPlan(o.Out, plan, dryRun)
		},
	}
	options.AddDryRunFlag(cmd, &dryRun, "print the repair Jobs and spec.repairs entries, send nothing.",
		"send the Jobs and the account change with dryRun=All (admission and validation run, nothing is stored).")
	return cmd
}

// Repair plans the repair of account name in namespace from the cluster's state and,
// unless a client dry run, applies it: it creates the repair Jobs (suspended), appends
// their entries to the account's spec.repairs under RepairFieldManager with optimistic
// concurrency (re-reading it on conflict), then unsuspends the Jobs Kueue does not
// manage. If the account cannot be updated, the Jobs it created are deleted again, so
// that no Job runs unaccounted. A server dry run sends the creates and the account
// change with dryRun=All and unsuspends nothing.
func Repair(ctx context.Context, c client.Client, namespace, name string, dryRun options.DryRun) (*RepairPlan, error) {
	var ba v1alpha1.BatchAccount
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &ba); err != nil {
		return nil, resolve.DescribeGetError(err, "BatchAccount", namespace, name)
	}
	in, err := repairInput(ctx, c, &ba)
	if err != nil {
		return nil, err
	}
	plan, err := PlanRepair(in)
	if err != nil || dryRun.Client() {
		return plan, err
	}
	var created []*batchv1.Job
	for _, r := range plan.Repairs {
		job := r.Job.DeepCopy()
		if err := c.Create(ctx, job, dryRun.CreateOptions()...); err != nil {
			return nil, errors.Join(fmt.Errorf("creating repair Job %q in namespace %q: %w", r.Job.Name, namespace, err), cleanup(ctx, c, created, dryRun))
		}
		created = append(created, job)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur v1alpha1.BatchAccount
		if err := c.Get(ctx, client.ObjectKeyFromObject(&ba), &cur); err != nil {
			return err
		}
		base := cur.DeepCopy()
		for _, r := range plan.Repairs {
			if slices.ContainsFunc(cur.Spec.AllAssignments(), func(a v1alpha1.Assignment) bool { return a.Target.Job == r.Assignment.Target.Job }) {
				return fmt.Errorf("an assignment naming Job %q appeared meanwhile (a concurrent repair?)", r.Assignment.Target.Job)
			}
			cur.Spec.Repairs = append(cur.Spec.Repairs, r.Assignment)
		}
		// A merge patch of spec.repairs alone, at the resourceVersion read: the server
		// records RepairFieldManager as the owner of spec.repairs and of nothing else.
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		return c.Patch(ctx, &cur, patch, dryRun.PatchOptions(client.FieldOwner(RepairFieldManager))...)
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("appending to spec.repairs of BatchAccount %q in namespace %q: %w", name, namespace, err), cleanup(ctx, c, created, dryRun))
	}
	if dryRun.Server() {
		// The Jobs were not stored: there is nothing to unsuspend.
		return plan, nil
	}
	for i, r := range plan.Repairs {
		if r.Queued {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":false}}`))
		if err := c.Patch(ctx, created[i], patch); err != nil {
			return nil, fmt.Errorf("unsuspending repair Job %q in namespace %q (the account names it; unsuspend it by hand): %w", r.Job.Name, namespace, err)
		}
	}
	return plan, nil
}

// cleanup deletes the repair Jobs created before a later step failed; a server dry run
// stored none.
func cleanup(ctx context.Context, c client.Client, jobs []*batchv1.Job, dryRun options.DryRun) error {
	if dryRun.Server() {
		return nil
	}
	var errs []error
	for _, j := range jobs {
		if err := client.IgnoreNotFound(c.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))); err != nil {
			errs = append(errs, fmt.Errorf("deleting repair Job %q again: %w (delete it by hand)", j.Name, err))
		}
	}
	return errors.Join(errs...)
}

// repairInput reads what planning needs: the namespace's Jobs, and for each Job Kueue
// manages, the pod template its Workload recorded before admission.
func repairInput(ctx context.Context, c client.Client, ba *v1alpha1.BatchAccount) (RepairInput, error) {
	in := RepairInput{Account: ba, Jobs: map[string]*batchv1.Job{}, QueuedTemplates: map[string]*corev1.PodTemplateSpec{}}
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace(ba.Namespace)); err != nil {
		return in, fmt.Errorf("listing Jobs in namespace %q: %w", ba.Namespace, err)
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		in.Jobs[j.Name] = j
	}
	var wls kueue.WorkloadList
	if err := c.List(ctx, &wls, client.InNamespace(ba.Namespace)); err != nil {
		return in, fmt.Errorf("listing Kueue Workloads in namespace %q: %w", ba.Namespace, err)
	}
	// Kueue may briefly hold an old and a new Workload for a Job: the newest wins.
	newest := relations.NewestWorkloadsByOwner(wls.Items)
	for _, j := range in.Jobs {
		if wl := newest[j.UID]; wl != nil && len(wl.Spec.PodSets) == 1 {
			in.QueuedTemplates[j.Name] = &wl.Spec.PodSets[0].Template
		}
	}
	return in, nil
}

// jobManifest is a Job as a manifest: without the empty status a create would ignore.
type jobManifest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              batchv1.JobSpec `json:"spec"`
}

// PrintRepairPlan says what repair did (under a server dry run: what the API server
// accepted), or under a client dry run, prints the Jobs and spec.repairs entries it would
// create as YAML documents, commented.
func PrintRepairPlan(w io.Writer, plan *RepairPlan, dryRun options.DryRun) error {
	if !dryRun.Client() {
		suffix := ""
		if dryRun.Server() {
			suffix = " (server dry run)"
		}
		fmt.Fprintf(w, "BatchAccount %s/%s%s:\n", plan.Namespace, plan.Account, suffix)
		for _, r := range plan.Repairs {
			how := "unsuspended (no Kueue queue)"
			if r.Queued {
				how = fmt.Sprintf("queued through LocalQueue %s; Kueue unsuspends it on admission", r.Job.Labels[QueueLabel])
			}
			fmt.Fprintf(w, "  created Job %s: %d %s for %s %s (%s); %s\n", r.Job.Name, r.Count, output.Plural(r.Count, "index", "indexes"),
				output.Plural(r.Count, "shard", "shards"), r.Shards, r.Why, how)
			fmt.Fprintf(w, "  appended to spec.repairs: job %s %s %s → %s %s\n", r.Job.Name,
				output.Plural(r.Count, "index", "indexes"), r.Assignment.Indexes, output.Plural(r.Count, "shard", "shards"), r.Shards)
		}
		if plan.Waiting != "" {
			fmt.Fprintf(w, "  not repaired: %s to complete\n", plan.Waiting)
		}
		if !dryRun.Server() {
			fmt.Fprintf(w, "Follow it with: kubectl batchledger explain account %s -n %s\n", plan.Account, plan.Namespace)
		}
		return nil
	}
	fmt.Fprintf(w, "# Dry run: nothing was sent. BatchAccount %s/%s would get:\n", plan.Namespace, plan.Account)
	if plan.Waiting != "" {
		fmt.Fprintf(w, "# not repaired: %s to complete\n", plan.Waiting)
	}
	for _, r := range plan.Repairs {
		b, err := yaml.Marshal(jobManifest{TypeMeta: r.Job.TypeMeta, ObjectMeta: r.Job.ObjectMeta, Spec: r.Job.Spec})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "---\n# repair Job for %s (%s)\n%s", r.Shards, r.Why, b)
		a, err := yaml.Marshal([]v1alpha1.Assignment{r.Assignment})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "---\n# appended to spec.repairs of BatchAccount %s (field manager %s)\n%s", plan.Account, RepairFieldManager, a)
	}
	return nil
}
