package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// scopeRank orders scopes: a Job named by an account requiring results needs its pods
// held (ScopeResults), one only counted needs them seen (ScopeCoverage).
var scopeRank = map[string]int{"": 0, v1alpha1.ScopeCoverage: 1, v1alpha1.ScopeResults: 2}

// StrongerScope returns the stronger of two scopes. Scopes are only ever raised: two
// accounts naming one Job, one requiring results, never flip its label back and forth.
func StrongerScope(a, b string) string {
	if scopeRank[b] > scopeRank[a] {
		return b
	}
	return a
}

// AccountScope is the scope an account gives the pods of the Jobs it names.
func AccountScope(ba *v1alpha1.BatchAccount) string {
	if requiresResults(ba) {
		return v1alpha1.ScopeResults
	}
	return v1alpha1.ScopeCoverage
}

// ShortFormScope is the scope the short-form annotations of a Job or JobSet declare; ""
// when it carries none.
func ShortFormScope(annotations map[string]string) string {
	if _, ok := annotations[v1alpha1.AnnotationInputRev]; !ok {
		return ""
	}
	if annotations[v1alpha1.AnnotationRequire] == "true" {
		return v1alpha1.ScopeResults
	}
	return v1alpha1.ScopeCoverage
}

// JobScope is the scope the live accounts naming a Job give its pods: the Job by name,
// or, for a JobSet child (its labels say which), the child's JobSet, replicatedJob and
// job index.
func JobScope(ctx context.Context, c client.Reader, namespace, name string, labels map[string]string) (string, error) {
	accounts, err := liveAccountsNaming(ctx, c, namespace, targetKeysOfJob(labels, name)...)
	if err != nil {
		return "", err
	}
	scope := ""
	for _, ba := range accounts {
		if namesJob(ba, name, labels) {
			scope = StrongerScope(scope, AccountScope(ba))
		}
	}
	return scope, nil
}

// ReplicatedJobScope is the scope the live accounts naming children of a JobSet's
// replicatedJob give its pods.
func ReplicatedJobScope(ctx context.Context, c client.Reader, namespace, jobSet, replicatedJob string) (string, error) {
	accounts, err := liveAccountsNaming(ctx, c, namespace, "jobset/"+jobSet)
	if err != nil {
		return "", err
	}
	scope := ""
	for _, ba := range accounts {
		for _, a := range ba.Spec.Assignments {
			if a.Target.JobSet == jobSet && a.Target.ReplicatedJob == replicatedJob {
				scope = StrongerScope(scope, AccountScope(ba))
			}
		}
	}
	return scope, nil
}

// namesJob is whether an assignment of ba targets the Job of that name and labels.
func namesJob(ba *v1alpha1.BatchAccount, name string, labels map[string]string) bool {
	for _, a := range ba.Spec.Assignments {
		t := a.Target
		switch {
		case t.Job != "" && t.Job == name:
			return true
		case t.JobSet != "" && t.JobSet == labels[jobsetapi.JobSetNameKey] &&
			t.ReplicatedJob == labels[jobsetapi.ReplicatedJobNameKey] &&
			strconv.Itoa(int(ptr.Deref(t.JobIndex, 0))) == labels[jobsetapi.JobIndexKey]:
			return true
		}
	}
	return false
}

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
	if StrongerScope(have, want) == have || !ptr.Deref(job.Spec.Suspend, false) || job.Status.StartTime != nil {
		return have, nil
	}
	if err := r.Patch(ctx, job, scopePatch(StrongerScope(have, want))); err != nil {
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
	want := AccountScope(ba)
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
		if rj.Name != ref.ReplicatedJob || StrongerScope(have, want) == have {
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
