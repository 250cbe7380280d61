package repair

import (
	"fmt"
	"io"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
	"batchledger.dev/batchledger/pkg/cli/options"
)

// jobManifest is a Job as a manifest: without the empty status a create would ignore.
type jobManifest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              batchv1.JobSpec `json:"spec"`
}

// PrintPlan says what repair did (under a server dry run: what the API server
// accepted), or under a client dry run, prints the Jobs and spec.repairs entries it would
// create as YAML documents, commented.
func PrintPlan(w io.Writer, plan *Plan, dryRun options.DryRun) error {
	if !dryRun.ClientSide() {
		suffix := ""
		if dryRun.ServerSide() {
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
		if !dryRun.ServerSide() {
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
		fmt.Fprintf(w, "---\n# appended to spec.repairs of BatchAccount %s (field manager %s)\n%s", plan.Account, FieldManager, a)
	}
	return nil
}
