package relations

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
func AccountScope(ba *v1alpha1.BatchAccount) string { return specScope(&ba.Spec) }

// specScope is the scope an account of this spec gives: ScopeResults when it requires
// results, ScopeCoverage otherwise.
func specScope(spec *v1alpha1.BatchAccountSpec) string {
	if spec.RequiresResults() {
		return v1alpha1.ScopeResults
	}
	return v1alpha1.ScopeCoverage
}

// JobScope is the scope the live accounts naming a Job give its pods: the Job by name,
// or, for a JobSet child (its JobSet controls it, its labels say which child), the
// child's JobSet, replicatedJob and job index (NamesJob).
func JobScope(ctx context.Context, c client.Reader, job metav1.Object) (string, error) {
	accounts, err := LiveAccountsNaming(ctx, c, job.GetNamespace(), JobKeys(job)...)
	if err != nil {
		return "", err
	}
	scope := ""
	for _, ba := range accounts {
		for _, a := range ba.Spec.AllAssignments() {
			if NamesJob(a.Target, job) {
				scope = StrongerScope(scope, AccountScope(ba))
				break
			}
		}
	}
	return scope, nil
}

// ReplicatedJobScope is the scope the live accounts naming children of a JobSet's
// replicatedJob give its pods.
func ReplicatedJobScope(ctx context.Context, c client.Reader, namespace, jobSet, replicatedJob string) (string, error) {
	accounts, err := LiveAccountsNaming(ctx, c, namespace, JobSetKey(jobSet))
	if err != nil {
		return "", err
	}
	scope := ""
	for _, ba := range accounts {
		for _, a := range ba.Spec.AllAssignments() {
			if a.Target.JobSet == jobSet && a.Target.ReplicatedJob == replicatedJob {
				scope = StrongerScope(scope, AccountScope(ba))
			}
		}
	}
	return scope, nil
}
