package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

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

// stampTarget raises the scope of a target's Job (and, for a JobSet child, of its
// replicatedJob's template while the JobSet is suspended, so that a restart's new children
// keep it) to what the account needs. A failed stamp costs only the hold of results, never
// the accounting, so it is logged and the reconcile goes on.
func (r *Reconciler) stampTarget(ctx context.Context, ba *v1alpha1.BatchAccount, ref v1alpha1.TargetRef, job *batchv1.Job) {
	want := relations.AccountScope(ba)
	log := ctrl.LoggerFrom(ctx)
	if _, err := r.stampScope(ctx, job, want); err != nil {
		log.Error(err, "stamping the opt-in scope label on a suspended Job", "job", job.Name)
	}
	if ref.JobSet == "" {
		return
	}
	var js jobsetapi.JobSet
	if err := r.Get(ctx, client.ObjectKey{Namespace: ba.Namespace, Name: ref.JobSet}, &js); err != nil {
		if client.IgnoreNotFound(err) != nil {
			log.Error(err, "reading a JobSet to stamp its scope", "jobSet", ref.JobSet)
		}
		return
	}
	if !ptr.Deref(js.Spec.Suspend, false) {
		return
	}
	for i, rj := range js.Spec.ReplicatedJobs {
		have := rj.Template.Spec.Template.Labels[v1alpha1.LabelScope]
		if rj.Name != ref.ReplicatedJob || relations.StrongerScope(have, want) == have {
			continue
		}
		// The test pins the replicatedJob at that index: the list is immutable but for
		// templates, so this only guards against a JobSet replaced under the same name.
		patch := fmt.Appendf(nil, `[{"op":"test","path":"/spec/replicatedJobs/%d/name","value":%q},`+
			`{"op":"add","path":"/spec/replicatedJobs/%d/template/spec/template/metadata/labels","value":%s}]`,
			i, rj.Name, i, scopeLabels(rj.Template.Spec.Template.Labels, want))
		if err := r.Patch(ctx, &js, client.RawPatch(types.JSONPatchType, patch)); err != nil {
			log.Error(err, "stamping the opt-in scope label on a suspended JobSet", "jobSet", js.Name)
			return
		}
		r.Metrics.scopeStamped()
	}
}

// scopeLabels is labels with the scope label set, as JSON.
func scopeLabels(labels map[string]string, scope string) []byte {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[v1alpha1.LabelScope] = scope
	b, _ := json.Marshal(out)
	return b
}
