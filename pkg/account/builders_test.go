package account

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// Test builders in the style of Kueue's pkg/util/testing wrappers: a snapshot of a Job
// as the Job controller would have written it, and an account spec.

type jobWrapper struct{ batchv1.Job }

func makeJob(name string, uid string, completions int32) *jobWrapper {
	return &jobWrapper{batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml-team", UID: types.UID(uid), ResourceVersion: "1"},
		Spec: batchv1.JobSpec{
			Completions:    ptr.To(completions),
			Parallelism:    ptr.To(completions),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
		},
	}}
}

func (j *jobWrapper) nonIndexed() *jobWrapper {
	j.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	return j
}

func (j *jobWrapper) completed(indexes string, succeeded int32) *jobWrapper {
	j.Status.CompletedIndexes = indexes
	j.Status.Succeeded = succeeded
	return j
}

func (j *jobWrapper) failedIndexes(indexes string) *jobWrapper {
	j.Status.FailedIndexes = ptr.To(indexes)
	return j
}

func (j *jobWrapper) resourceVersion(rv string) *jobWrapper {
	j.ResourceVersion = rv
	return j
}

func (j *jobWrapper) condition(t batchv1.JobConditionType, reason string) *jobWrapper {
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason,
		LastTransitionTime: metav1.Date(2026, 11, 29, 10, 0, 0, 0, time0.Location()),
	})
	return j
}

func (j *jobWrapper) succeededIndexesPolicy(indexes string) *jobWrapper {
	if j.Spec.SuccessPolicy == nil {
		j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{}
	}
	j.Spec.SuccessPolicy.Rules = append(j.Spec.SuccessPolicy.Rules, batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To(indexes)})
	return j
}

func (j *jobWrapper) succeededCountPolicy(n int32) *jobWrapper {
	if j.Spec.SuccessPolicy == nil {
		j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{}
	}
	j.Spec.SuccessPolicy.Rules = append(j.Spec.SuccessPolicy.Rules, batchv1.SuccessPolicyRule{SucceededCount: ptr.To(n)})
	return j
}

func (j *jobWrapper) obj() *batchv1.Job { return &j.Job }

// pods returns one successful attempt per listed index, with UIDs "<prefix>-<n>".
func pods(prefix string, indexes ...int) []PodAttempt {
	out := make([]PodAttempt, len(indexes))
	for n, i := range indexes {
		out[n] = PodAttempt{UID: types.UID(fmt.Sprintf("%s-%d", prefix, n)), Index: i}
	}
	return out
}

type specWrapper struct{ v1alpha1.BatchAccountSpec }

func makeSpec(names ...string) *specWrapper {
	return &specWrapper{v1alpha1.BatchAccountSpec{
		InputRevision: "D",
		ModelRevision: "m-2026-11",
		Shards:        v1alpha1.ShardPopulation{Names: names},
	}}
}

func makeCompactSpec(prefix string, count int32) *specWrapper {
	return &specWrapper{v1alpha1.BatchAccountSpec{
		InputRevision: "D",
		ModelRevision: "m-2026-11",
		Shards:        v1alpha1.ShardPopulation{Prefix: prefix, Count: ptr.To(count)},
	}}
}

func (s *specWrapper) assign(job, indexes string, shards ...string) *specWrapper {
	s.Assignments = append(s.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: job}, Indexes: indexes, Shards: shards})
	return s
}

func (s *specWrapper) assignOrdinals(job, indexes, ordinals string) *specWrapper {
	s.Assignments = append(s.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: job}, Indexes: indexes, ShardOrdinals: ordinals})
	return s
}

func (s *specWrapper) assignJobSet(jobSet, rjob string, jobIndex int32, indexes, ordinals string) *specWrapper {
	s.Assignments = append(s.Assignments, v1alpha1.Assignment{
		Target:  v1alpha1.TargetRef{JobSet: jobSet, ReplicatedJob: rjob, JobIndex: ptr.To(jobIndex)},
		Indexes: indexes, ShardOrdinals: ordinals,
	})
	return s
}

func (s *specWrapper) repair(job, indexes string, shards ...string) *specWrapper {
	s.Assignments = append(s.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: job}, Indexes: indexes, Shards: shards, Repair: true})
	return s
}

func (s *specWrapper) target(i int, ref v1alpha1.TargetRef) *specWrapper {
	s.Assignments[i].Target = ref
	return s
}

func (s *specWrapper) requireResults(rule string) *specWrapper {
	s.Acceptance = &v1alpha1.AcceptanceCriterion{RequireResults: true, Rule: rule}
	return s
}

func (s *specWrapper) obj() *v1alpha1.BatchAccountSpec { return &s.BatchAccountSpec }

func result(target, uid string, index int, shard string) Result {
	return Result{
		Target: target, JobUID: types.UID(uid), Index: index,
		Pod: fmt.Sprintf("%s-%d", target[4:], index), PodUID: types.UID(fmt.Sprintf("pod-%d", index)),
		Shard: shard, InputRevision: "D", ModelRevision: "m-2026-11", Digest: "sha256:" + shard,
	}
}
