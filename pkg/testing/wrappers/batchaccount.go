package wrappers

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// BatchAccountWrapper builds a BatchAccount.
type BatchAccountWrapper struct{ v1alpha1.BatchAccount }

// MakeBatchAccount starts an account on input revision D and model revision m-2026-11,
// the revisions of the IJ245 worked case.
func MakeBatchAccount(name, ns string) *BatchAccountWrapper {
	return &BatchAccountWrapper{v1alpha1.BatchAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "BatchAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.BatchAccountSpec{InputRevision: "D", ModelRevision: "m-2026-11"},
	}}
}

// Revisions sets the input and model revisions.
func (w *BatchAccountWrapper) Revisions(input, model string) *BatchAccountWrapper {
	w.Spec.InputRevision, w.Spec.ModelRevision = input, model
	return w
}

// Shards declares the shards by name.
func (w *BatchAccountWrapper) Shards(names ...string) *BatchAccountWrapper {
	w.Spec.Shards = v1alpha1.ShardPopulation{Names: names}
	return w
}

// ShardCount declares count shards named prefix0, prefix1, ...
func (w *BatchAccountWrapper) ShardCount(prefix string, count int32) *BatchAccountWrapper {
	w.Spec.Shards = v1alpha1.ShardPopulation{Prefix: prefix, Count: ptr.To(count)}
	return w
}

// AssignJob maps indexes of Job job onto the named shards, in order.
func (w *BatchAccountWrapper) AssignJob(job, indexes string, shards ...string) *BatchAccountWrapper {
	w.Spec.Assignments = append(w.Spec.Assignments, v1alpha1.Assignment{
		Target: v1alpha1.TargetRef{Job: job}, Indexes: indexes, Shards: shards,
	})
	return w
}

// AssignJobOrdinals maps indexes of Job job onto shard ordinals, in order.
func (w *BatchAccountWrapper) AssignJobOrdinals(job, indexes, ordinals string) *BatchAccountWrapper {
	w.Spec.Assignments = append(w.Spec.Assignments, v1alpha1.Assignment{
		Target: v1alpha1.TargetRef{Job: job}, Indexes: indexes, ShardOrdinals: ordinals,
	})
	return w
}

// AssignJobSet maps indexes of child Job jobIndex of a JobSet replicatedJob onto shard
// ordinals, in order.
func (w *BatchAccountWrapper) AssignJobSet(jobSet, replicatedJob string, jobIndex int32, indexes, ordinals string) *BatchAccountWrapper {
	w.Spec.Assignments = append(w.Spec.Assignments, v1alpha1.Assignment{
		Target:  v1alpha1.TargetRef{JobSet: jobSet, ReplicatedJob: replicatedJob, JobIndex: ptr.To(jobIndex)},
		Indexes: indexes, ShardOrdinals: ordinals,
	})
	return w
}

// Repair appends a repair assignment of Job job's indexes onto already assigned shards.
func (w *BatchAccountWrapper) Repair(job, indexes string, shards ...string) *BatchAccountWrapper {
	w.Spec.Assignments = append(w.Spec.Assignments, v1alpha1.Assignment{
		Target: v1alpha1.TargetRef{Job: job}, Indexes: indexes, Shards: shards, Repair: true,
	})
	return w
}

// TargetNamespace sets the namespace of the last assignment's target.
func (w *BatchAccountWrapper) TargetNamespace(ns string) *BatchAccountWrapper {
	w.Spec.Assignments[len(w.Spec.Assignments)-1].Target.Namespace = ns
	return w
}

// RequireResults requires an accepted result per shard, meeting rule (CEL over result).
func (w *BatchAccountWrapper) RequireResults(rule string) *BatchAccountWrapper {
	w.Spec.Acceptance = &v1alpha1.AcceptanceCriterion{RequireResults: true, Rule: rule}
	return w
}

// ResultContainer names the container whose termination message is the result.
func (w *BatchAccountWrapper) ResultContainer(name string) *BatchAccountWrapper {
	w.Spec.Acceptance.ResultContainer = name
	return w
}

// Obj returns the account.
func (w *BatchAccountWrapper) Obj() *v1alpha1.BatchAccount { return &w.BatchAccount }
