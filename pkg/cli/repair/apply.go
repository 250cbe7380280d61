package repair

import (
	"context"
	"errors"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/resolve"
	"batchledger.dev/batchledger/pkg/relations"
)

// Run plans the repair of account name in namespace from the cluster's state and,
// unless a client dry run, applies it: it appends the repair entries to the account's
// spec.repairs under FieldManager with optimistic concurrency (re-reading it on
// conflict, and refusing when its spec changed since the plan), then creates the repair
// Jobs (suspended), then unsuspends the Jobs Kueue does not manage. The account names
// each Job before the Job exists, so that no pod of a repair Job is created before its
// account assigns it a shard (Kueue may admit a queued Job within milliseconds, and the
// pod webhook tells each pod its shard from the account). If a Job cannot be created,
// the Jobs created are deleted and the entries taken out of the account again. A server
// dry run sends the account change and the creates with dryRun=All and unsuspends
// nothing.
func Run(ctx context.Context, c client.Client, namespace, name string, dryRun options.DryRun) (*Plan, error) {
	var ba v1alpha1.BatchAccount
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &ba); err != nil {
		return nil, resolve.DescribeGetError(err, "BatchAccount", namespace, name)
	}
	in, err := repairInput(ctx, c, &ba)
	if err != nil {
		return nil, err
	}
	plan, err := NewPlan(in)
	if err != nil || dryRun.ClientSide() {
		return plan, err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur v1alpha1.BatchAccount
		if err := c.Get(ctx, client.ObjectKeyFromObject(&ba), &cur); err != nil {
			return err
		}
		if cur.Generation != ba.Generation {
			// The plan is of the spec read first; one changed since (a repair appended by
			// hand, a mapping changed) may re-run its shards already.
			return fmt.Errorf("it changed since repair read it (spec generation %d, now %d): run repair again", ba.Generation, cur.Generation)
		}
		base := cur.DeepCopy()
		for _, r := range plan.Repairs {
			if slices.ContainsFunc(cur.Spec.AllAssignments(), func(a v1alpha1.Assignment) bool { return a.Target.Job == r.Assignment.Target.Job }) {
				return fmt.Errorf("an assignment naming Job %q appeared meanwhile (a concurrent repair?)", r.Assignment.Target.Job)
			}
			cur.Spec.Repairs = append(cur.Spec.Repairs, r.Assignment)
		}
		// A merge patch of spec.repairs alone, at the resourceVersion read: the server
		// records FieldManager as the owner of spec.repairs and of nothing else.
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		return c.Patch(ctx, &cur, patch, dryRun.PatchOptions(client.FieldOwner(FieldManager))...)
	})
	if err != nil {
		return nil, fmt.Errorf("appending to spec.repairs of BatchAccount %q in namespace %q: %w", name, namespace, err)
	}
	var created []*batchv1.Job
	for _, r := range plan.Repairs {
		job := r.Job.DeepCopy()
		if err := c.Create(ctx, job, dryRun.CreateOptions()...); err != nil {
			return nil, errors.Join(fmt.Errorf("creating repair Job %q in namespace %q: %w", r.Job.Name, namespace, err),
				cleanup(ctx, c, created, dryRun), withdraw(ctx, c, &ba, plan, dryRun))
		}
		created = append(created, job)
	}
	if dryRun.ServerSide() {
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

// withdraw takes the plan's entries out of the account's spec.repairs again, after a
// repair Job could not be created; a server dry run stored none.
func withdraw(ctx context.Context, c client.Client, ba *v1alpha1.BatchAccount, plan *Plan, dryRun options.DryRun) error {
	if dryRun.ServerSide() {
		return nil
	}
	planned := map[string]bool{}
	for _, r := range plan.Repairs {
		planned[r.Assignment.Target.Job] = true
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur v1alpha1.BatchAccount
		if err := c.Get(ctx, client.ObjectKeyFromObject(ba), &cur); err != nil {
			return err
		}
		base := cur.DeepCopy()
		cur.Spec.Repairs = slices.DeleteFunc(cur.Spec.Repairs, func(a v1alpha1.Assignment) bool { return planned[a.Target.Job] })
		return c.Patch(ctx, &cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager))
	})
	if err != nil {
		return fmt.Errorf("taking the repair entries out of BatchAccount %q again: %w (remove them from spec.repairs by hand)", ba.Name, err)
	}
	return nil
}

// cleanup deletes the repair Jobs created before a later step failed; a server dry run
// stored none.
func cleanup(ctx context.Context, c client.Client, jobs []*batchv1.Job, dryRun options.DryRun) error {
	if dryRun.ServerSide() {
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
// manages, the pod template its Workload recorded before admission (none when the
// cluster does not serve Kueue's Workload API).
func repairInput(ctx context.Context, c client.Client, ba *v1alpha1.BatchAccount) (Input, error) {
	in := Input{Account: ba, Jobs: map[string]*batchv1.Job{}, QueuedTemplates: map[string]*corev1.PodTemplateSpec{}}
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace(ba.Namespace)); err != nil {
		return in, fmt.Errorf("listing Jobs in namespace %q: %w", ba.Namespace, err)
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		in.Jobs[j.Name] = j
	}
	var wls kueue.WorkloadList
	if err := c.List(ctx, &wls, client.InNamespace(ba.Namespace)); meta.IsNoMatchError(err) {
		// Kueue is optional: without its API no Job has a Workload, nor a queued template.
		return in, nil
	} else if err != nil {
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
