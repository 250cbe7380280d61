package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
)

// scopePatch is a merge patch setting the scope label on a pod template at path (the
// field names down to the template, e.g. spec, template).
func scopePatch(scope string) client.Patch {
	return client.RawPatch("application/merge-patch+json",
		fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"labels":{%q:%q}}}}}`, v1alpha1.LabelScope, scope))
}

// stampScope raises the scope label of a Job the account follows when the Job came
// before its account and so was not stamped at creation. Kubernetes lets the pod template
// labels of a suspended Job change only until it first starts (Kueue creates its Jobs
// suspended), so a Job that is already running keeps its scope: its pods are not held,
// and its results are read while its pods exist. The returned scope is the Job's after
// the call.
func (r *Reconciler) stampScope(ctx context.Context, job *batchv1.Job, want string) (string, error) {
	have := job.Spec.Template.Labels[v1alpha1.LabelScope]
	if relations.StrongerScope(have, want) == have || !ptr.Deref(job.Spec.Suspend, false) || job.Status.StartTime != nil {
		return have, nil
	}
	if err := r.Patch(ctx, job, scopePatch(relations.StrongerScope(have, want))); err != nil {
		return have, client.IgnoreNotFound(err)
	}
	r.Metrics.scopeStamped()
	return job.Spec.Template.Labels[v1alpha1.LabelScope], nil
}

// stampTarget raises the scope of a target's Job, and of the templates its kind makes
// future Jobs from (Kind.StampScope: a suspended JobSet's replicatedJob, so that a
// restart's new children keep it), to what the account needs. A failed stamp costs only
// the hold of results, never the accounting, so it is logged and the reconcile goes on.
func (r *Reconciler) stampTarget(ctx context.Context, ba *v1alpha1.BatchAccount, ref v1alpha1.TargetRef, job *batchv1.Job) {
	want := relations.AccountScope(ba)
	log := ctrl.LoggerFrom(ctx)
	if _, err := r.stampScope(ctx, job, want); err != nil {
		log.Error(err, "stamping the opt-in scope label on a suspended Job", "job", job.Name)
	}
	k := relations.KindOf(ref)
	if k == nil {
		return
	}
	n, err := k.StampScope(ctx, r.Client, ba.Namespace, ref, want)
	if err != nil {
		log.Error(err, "stamping the opt-in scope label on a suspended owner", "kind", k.Name(), "name", ref.Owner())
	}
	for range n {
		r.Metrics.scopeStamped()
	}
}
