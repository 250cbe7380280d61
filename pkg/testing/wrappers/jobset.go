package wrappers

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// JobSetWrapper builds a JobSet.
type JobSetWrapper struct{ jobset.JobSet }

// MakeJobSet starts an empty JobSet; add ReplicatedJobs.
func MakeJobSet(name, ns string) *JobSetWrapper {
	return &JobSetWrapper{jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}}
}

// ReplicatedJob appends a replicated job (see MakeReplicatedJob).
func (w *JobSetWrapper) ReplicatedJob(rj jobset.ReplicatedJob) *JobSetWrapper {
	w.Spec.ReplicatedJobs = append(w.Spec.ReplicatedJobs, rj)
	return w
}

// Queue submits the JobSet to a Kueue LocalQueue: one Workload for all its Jobs.
func (w *JobSetWrapper) Queue(localQueue string) *JobSetWrapper {
	return w.Label(QueueLabel, localQueue)
}

// Label sets a label on the JobSet.
func (w *JobSetWrapper) Label(k, v string) *JobSetWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// Annotation sets an annotation on the JobSet.
func (w *JobSetWrapper) Annotation(k, v string) *JobSetWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

// AnnotationPairs sets the annotations kv (key, value, key, value, ...) on the JobSet; a
// trailing key without a value is ignored.
func (w *JobSetWrapper) AnnotationPairs(kv ...string) *JobSetWrapper {
	for i := 0; i+1 < len(kv); i += 2 {
		w.Annotation(kv[i], kv[i+1])
	}
	return w
}

// SuccessPolicy sets when the JobSet succeeds: operator All or Any over the Jobs of the
// target replicated jobs (none listed means all of them).
func (w *JobSetWrapper) SuccessPolicy(op jobset.Operator, targets ...string) *JobSetWrapper {
	w.Spec.SuccessPolicy = &jobset.SuccessPolicy{Operator: op, TargetReplicatedJobs: targets}
	return w
}

// MaxRestarts sets failurePolicy.maxRestarts: a failed Job restarts the whole JobSet up to n
// times.
func (w *JobSetWrapper) MaxRestarts(n int32) *JobSetWrapper {
	if w.Spec.FailurePolicy == nil {
		w.Spec.FailurePolicy = &jobset.FailurePolicy{}
	}
	w.Spec.FailurePolicy.MaxRestarts = n
	return w
}

// EnableDNSHostnames sets network.enableDNSHostnames (a headless Service per JobSet).
func (w *JobSetWrapper) EnableDNSHostnames(b bool) *JobSetWrapper {
	if w.Spec.Network == nil {
		w.Spec.Network = &jobset.Network{}
	}
	w.Spec.Network.EnableDNSHostnames = &b
	return w
}

// Suspend sets spec.suspend.
func (w *JobSetWrapper) Suspend(s bool) *JobSetWrapper {
	w.Spec.Suspend = &s
	return w
}

// ControlledBy sets a controller owner reference to owner of kind gvk (a TrainJob that
// renders the JobSet), and the JobSet's UID to uid.
func (w *JobSetWrapper) ControlledBy(owner metav1.Object, gvk schema.GroupVersionKind, uid string) *JobSetWrapper {
	w.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)}
	w.UID = types.UID(uid)
	return w
}

// Condition sets a status condition of the JobSet (Completed, Failed...) True.
func (w *JobSetWrapper) Condition(typ string, at time.Time) *JobSetWrapper {
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ, LastTransitionTime: metav1.NewTime(at)})
	return w
}

// Obj returns the JobSet.
func (w *JobSetWrapper) Obj() *jobset.JobSet { return &w.JobSet }

// ReplicatedJobWrapper builds one replicated job of a JobSet.
type ReplicatedJobWrapper struct{ jobset.ReplicatedJob }

// MakeReplicatedJob starts a replicated job with one replica of a default Job (see MakeJob).
func MakeReplicatedJob(name string) *ReplicatedJobWrapper {
	w := &ReplicatedJobWrapper{jobset.ReplicatedJob{Name: name, Replicas: 1}}
	return w.Job(MakeJob("", "").Obj())
}

// Replicas sets how many Jobs the replicated job creates (<jobset>-<name>-<i>).
func (w *ReplicatedJobWrapper) Replicas(n int32) *ReplicatedJobWrapper {
	w.ReplicatedJob.Replicas = n
	return w
}

// Job uses the labels, annotations and spec of job (built with MakeJob) as the template of
// every Job of the replicated job; its name and namespace are ignored.
func (w *ReplicatedJobWrapper) Job(job *batchv1.Job) *ReplicatedJobWrapper {
	w.Template = batchv1.JobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: job.Labels, Annotations: job.Annotations},
		Spec:       *job.Spec.DeepCopy(),
	}
	return w
}

// Obj returns the ReplicatedJob.
func (w *ReplicatedJobWrapper) Obj() jobset.ReplicatedJob { return w.ReplicatedJob }
