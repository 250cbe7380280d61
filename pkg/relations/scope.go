package relations

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/all"
)

// StrongerScope returns the stronger of two scopes (kinds.StrongerScope).
func StrongerScope(a, b string) string { return kinds.StrongerScope(a, b) }

// AccountScope is the scope an account gives the pods of the Jobs it names.
func AccountScope(ba *v1alpha1.BatchAccount) string { return specScope(&ba.Spec) }

// specScope is the scope an account of this spec gives (ScopeFor).
func specScope(spec *v1alpha1.BatchAccountSpec) string { return ScopeFor(spec.RequiresResults()) }

// ScopeFor is the scope an account gives the Jobs it names: ScopeResults when it requires
// results, ScopeCoverage otherwise.
func ScopeFor(requiresResults bool) string {
	if requiresResults {
		return v1alpha1.ScopeResults
	}
	return v1alpha1.ScopeCoverage
}

// AccountsNamingJob are the live accounts naming a Job: the Job by name, or, for a
// child Job (its owner controls it, its labels say which child), the target of its
// owner, replicatedJob and job index (NamesJob).
func AccountsNamingJob(ctx context.Context, c client.Reader, job metav1.Object) ([]*v1alpha1.BatchAccount, error) {
	accounts, err := LiveAccountsNaming(ctx, c, job.GetNamespace(), JobKeys(job)...)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(accounts, func(ba *v1alpha1.BatchAccount) bool {
		return !slices.ContainsFunc(ba.Spec.AllAssignments(), func(a v1alpha1.Assignment) bool { return NamesJob(a.Target, job) })
	}), nil
}

// AccountsScope is the strongest scope accounts give the pods of the Jobs they name.
func AccountsScope(accounts []*v1alpha1.BatchAccount) string {
	scope := ""
	for _, ba := range accounts {
		scope = StrongerScope(scope, AccountScope(ba))
	}
	return scope
}

// ReplicatedJobScope is the scope the live accounts naming children of replicatedJob of
// the JobSet js give its pods: through the JobSet itself, or the object that rendered it
// (kinds.JobSetRenderer: a TrainJob).
func ReplicatedJobScope(ctx context.Context, c client.Reader, js metav1.Object, replicatedJob string) (string, error) {
	scope := ""
	for _, o := range jobSetOwners(js) {
		k, owner := o.kind, o.name
		accounts, err := LiveAccountsNaming(ctx, c, js.GetNamespace(), kinds.Key(k.Name(), owner))
		if err != nil {
			return "", err
		}
		for _, ba := range accounts {
			for _, a := range ba.Spec.AllAssignments() {
				if a.Target.Kind() == k.Name() && a.Target.Owner() == owner && a.Target.ReplicatedJob == replicatedJob {
					scope = StrongerScope(scope, AccountScope(ba))
				}
			}
		}
	}
	return scope, nil
}

// JobSetOwnerKeys are the index keys of the objects whose targets name js's children
// (kinds.JobSetRenderer): the JobSet itself, and the TrainJob that renders it. The
// accounts naming one of them account js's children.
func JobSetOwnerKeys(js metav1.Object) []IndexKey {
	owners := jobSetOwners(js)
	keys := make([]IndexKey, 0, len(owners))
	for _, o := range owners {
		keys = append(keys, kinds.Key(o.kind.Name(), o.name))
	}
	return keys
}

// renderedOwner is a kind whose targets name the children of a JobSet, and the name those
// targets give it.
type renderedOwner struct {
	kind kinds.Kind
	name string
}

// jobSetOwners are the kinds whose targets name js's children (kinds.JobSetRenderer: the
// JobSet itself, the TrainJob that renders it), with the name each gives js's owner.
func jobSetOwners(js metav1.Object) []renderedOwner {
	var out []renderedOwner
	for _, k := range all.Kinds {
		if r, ok := k.(kinds.JobSetRenderer); ok {
			if name, ok := r.JobSetOwner(js); ok {
				out = append(out, renderedOwner{kind: k, name: name})
			}
		}
	}
	return out
}
