package wrappers

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// Label sets a label on the account.
func (w *BatchAccountWrapper) Label(k, v string) *BatchAccountWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
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

// AssignTrainJob appends an assignment of child jobIndex of a TrainJob's replicatedJob.
func (w *BatchAccountWrapper) AssignTrainJob(trainJob, replicatedJob string, jobIndex int32, indexes, ordinals string) *BatchAccountWrapper {
	w.Spec.Assignments = append(w.Spec.Assignments, v1alpha1.Assignment{
		Target:  v1alpha1.TargetRef{TrainJob: trainJob, ReplicatedJob: replicatedJob, JobIndex: ptr.To(jobIndex)},
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

// SpecRepair appends to spec.repairs (where `kubectl batchledger repair` writes) an entry
// mapping Job job's indexes onto already assigned shards.
func (w *BatchAccountWrapper) SpecRepair(job, indexes string, shards ...string) *BatchAccountWrapper {
	w.Spec.Repairs = append(w.Spec.Repairs, v1alpha1.Assignment{
		Target: v1alpha1.TargetRef{Job: job}, Indexes: indexes, Shards: shards,
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

// Target replaces the target of the last assignment.
func (w *BatchAccountWrapper) Target(ref v1alpha1.TargetRef) *BatchAccountWrapper {
	w.Spec.Assignments[len(w.Spec.Assignments)-1].Target = ref
	return w
}

// TTLSecondsAfterFinished sets how long the account is kept after its batch finished.
func (w *BatchAccountWrapper) TTLSecondsAfterFinished(s int32) *BatchAccountWrapper {
	w.Spec.TTLSecondsAfterFinished = &s
	return w
}

// UID sets the account's UID (its result chunks are named after it).
func (w *BatchAccountWrapper) UID(uid string) *BatchAccountWrapper {
	w.ObjectMeta.UID = types.UID(uid)
	return w
}

// Generation sets metadata.generation, which the status' observedGeneration follows.
func (w *BatchAccountWrapper) Generation(g int64) *BatchAccountWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// Creation sets the creation timestamp.
func (w *BatchAccountWrapper) Creation(t time.Time) *BatchAccountWrapper {
	w.CreationTimestamp = metav1.NewTime(t)
	return w
}

// Status setters: the account as the controller last wrote it.

// Condition sets a status condition (replacing one of the same type) with status, reason
// and message, last changed at.
func (w *BatchAccountWrapper) Condition(typ string, status metav1.ConditionStatus, reason, message string, at time.Time) *BatchAccountWrapper {
	apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message,
		ObservedGeneration: w.ObjectMeta.Generation, LastTransitionTime: metav1.NewTime(at),
	})
	return w
}

// TargetStatus appends the status of one target.
func (w *BatchAccountWrapper) TargetStatus(ts v1alpha1.TargetStatus) *BatchAccountWrapper {
	w.Status.Targets = append(w.Status.Targets, ts)
	return w
}

// ResultsRecorded sets the count of results the status says the account's chunks hold.
func (w *BatchAccountWrapper) ResultsRecorded(n int32) *BatchAccountWrapper {
	w.Status.Results.Recorded = n
	return w
}

// SpecObj returns the account's spec: what the pure account package computes from.
func (w *BatchAccountWrapper) SpecObj() *v1alpha1.BatchAccountSpec { return &w.Spec }

// Obj returns the account.
func (w *BatchAccountWrapper) Obj() *v1alpha1.BatchAccount { return &w.BatchAccount }
