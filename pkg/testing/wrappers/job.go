package wrappers

import (
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetconstants "sigs.k8s.io/jobset/pkg/constants"

	"batchledger.dev/batchledger/pkg/identity"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
)

// DefaultImage is the image of the default container; on kwok nodes nothing pulls it.
const DefaultImage = "my-trainer:1.0"

// JobWrapper builds a batch/v1 Job.
type JobWrapper struct{ batchv1.Job }

// MakeJob starts a Job with one container "worker" (DefaultImage), restartPolicy Never,
// one completion and parallelism 1.
func MakeJob(name, ns string) *JobWrapper {
	return &JobWrapper{batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			Completions: new(int32(1)),
			Parallelism: new(int32(1)),
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "worker", Image: DefaultImage}},
				},
			},
		},
	}}
}

// GenerateName makes the API server choose the name from prefix (the Job's name is cleared).
func (w *JobWrapper) GenerateName(prefix string) *JobWrapper {
	w.Name, w.ObjectMeta.GenerateName = "", prefix
	return w
}

// Indexed makes the Job Indexed with the given completions, all running at once (parallelism
// = completions) unless Parallelism says otherwise.
func (w *JobWrapper) Indexed(completions int32) *JobWrapper {
	w.Spec.CompletionMode = new(batchv1.IndexedCompletion)
	w.Spec.Completions = new(completions)
	w.Spec.Parallelism = new(completions)
	return w
}

// Completions sets spec.completions.
func (w *JobWrapper) Completions(n int32) *JobWrapper {
	w.Spec.Completions = new(n)
	return w
}

// Parallelism sets spec.parallelism.
func (w *JobWrapper) Parallelism(p int32) *JobWrapper {
	w.Spec.Parallelism = new(p)
	return w
}

// Queue submits the Job to a Kueue LocalQueue; Kueue's webhook then creates it suspended.
func (w *JobWrapper) Queue(localQueue string) *JobWrapper { return w.Label(QueueLabel, localQueue) }

// PriorityClass sets the Job's WorkloadPriorityClass.
func (w *JobWrapper) PriorityClass(name string) *JobWrapper {
	return w.Label(PriorityClassLabel, name)
}

// ManagedBy sets spec.managedBy: "kueue.x-k8s.io/multikueue" for a Job a MultiKueue
// manager dispatches to a worker cluster.
func (w *JobWrapper) ManagedBy(controller string) *JobWrapper {
	w.Spec.ManagedBy = &controller
	return w
}

// Suspend sets spec.suspend.
func (w *JobWrapper) Suspend(s bool) *JobWrapper {
	w.Spec.Suspend = new(s)
	return w
}

// Label sets a label on the Job.
func (w *JobWrapper) Label(k, v string) *JobWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// Annotation sets an annotation on the Job.
func (w *JobWrapper) Annotation(k, v string) *JobWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

// AnnotationPairs sets the annotations kv (key, value, key, value, ...) on the Job; a
// trailing key without a value is ignored.
func (w *JobWrapper) AnnotationPairs(kv ...string) *JobWrapper {
	for i := 0; i+1 < len(kv); i += 2 {
		w.Annotation(kv[i], kv[i+1])
	}
	return w
}

// PodAnnotation sets an annotation on the pod template.
func (w *JobWrapper) PodAnnotation(k, v string) *JobWrapper {
	if w.Spec.Template.Annotations == nil {
		w.Spec.Template.Annotations = map[string]string{}
	}
	w.Spec.Template.Annotations[k] = v
	return w
}

// PodLabel sets a label on the pod template.
func (w *JobWrapper) PodLabel(k, v string) *JobWrapper {
	if w.Spec.Template.Labels == nil {
		w.Spec.Template.Labels = map[string]string{}
	}
	w.Spec.Template.Labels[k] = v
	return w
}

// GPU makes every container request (and limit) n GPUs, as the device plugin requires.
func (w *JobWrapper) GPU(n int) *JobWrapper {
	q := resource.MustParse(strconv.Itoa(n))
	for i := range w.Spec.Template.Spec.Containers {
		c := &w.Spec.Template.Spec.Containers[i]
		setResource(&c.Resources.Requests, GPU, q)
		setResource(&c.Resources.Limits, GPU, q)
	}
	return w
}

// Request makes every container request quantity of a resource ("8", "64Gi").
func (w *JobWrapper) Request(name corev1.ResourceName, quantity string) *JobWrapper {
	q := resource.MustParse(quantity)
	for i := range w.Spec.Template.Spec.Containers {
		setResource(&w.Spec.Template.Spec.Containers[i].Resources.Requests, name, q)
	}
	return w
}

func setResource(l *corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	if *l == nil {
		*l = corev1.ResourceList{}
	}
	(*l)[name] = q
}

// Container replaces the containers with one named container running image.
func (w *JobWrapper) Container(name, image string) *JobWrapper {
	w.Spec.Template.Spec.Containers = []corev1.Container{{Name: name, Image: image}}
	return w
}

// Sidecar appends a container (e.g. an injected proxy) after the existing ones.
func (w *JobWrapper) Sidecar(name, image string) *JobWrapper {
	w.Spec.Template.Spec.Containers = append(w.Spec.Template.Spec.Containers, corev1.Container{Name: name, Image: image})
	return w
}

// NodeSelector adds a pod nodeSelector entry.
func (w *JobWrapper) NodeSelector(k, v string) *JobWrapper {
	if w.Spec.Template.Spec.NodeSelector == nil {
		w.Spec.Template.Spec.NodeSelector = map[string]string{}
	}
	w.Spec.Template.Spec.NodeSelector[k] = v
	return w
}

// RestartPolicy sets the pod template's restart policy.
func (w *JobWrapper) RestartPolicy(p corev1.RestartPolicy) *JobWrapper {
	w.Spec.Template.Spec.RestartPolicy = p
	return w
}

// BackoffLimit sets spec.backoffLimit.
func (w *JobWrapper) BackoffLimit(n int32) *JobWrapper {
	w.Spec.BackoffLimit = new(n)
	return w
}

// BackoffLimitPerIndex sets spec.backoffLimitPerIndex (Indexed Jobs): an index is marked
// failed after n+1 failed pods, independently of the others.
func (w *JobWrapper) BackoffLimitPerIndex(n int32) *JobWrapper {
	w.Spec.BackoffLimitPerIndex = new(n)
	return w
}

// MaxFailedIndexes sets spec.maxFailedIndexes: more failed indexes fail the whole Job.
func (w *JobWrapper) MaxFailedIndexes(n int32) *JobWrapper {
	w.Spec.MaxFailedIndexes = new(n)
	return w
}

// SuccessPolicy sets spec.successPolicy to the given rules (any one rule met is success).
func (w *JobWrapper) SuccessPolicy(rules ...batchv1.SuccessPolicyRule) *JobWrapper {
	w.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: rules}
	return w
}

// SucceededIndexes is a success-policy rule: the listed indexes ("0", "0-3,7") succeeded.
func SucceededIndexes(indexes string) batchv1.SuccessPolicyRule {
	return batchv1.SuccessPolicyRule{SucceededIndexes: &indexes}
}

// SucceededCount is a success-policy rule: any n indexes succeeded.
func SucceededCount(n int32) batchv1.SuccessPolicyRule {
	return batchv1.SuccessPolicyRule{SucceededCount: &n}
}

// PodFailurePolicy sets spec.podFailurePolicy to the given rules.
func (w *JobWrapper) PodFailurePolicy(rules ...batchv1.PodFailurePolicyRule) *JobWrapper {
	w.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: rules}
	return w
}

// OnExitCodes is a pod-failure-policy rule: action when a container's exit code is (In) or
// is not (NotIn) one of codes.
func OnExitCodes(action batchv1.PodFailurePolicyAction, op batchv1.PodFailurePolicyOnExitCodesOperator, codes ...int32) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{
		Action:      action,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: codes},
	}
}

// UID sets the Job's UID, as the API server assigns it.
func (w *JobWrapper) UID(uid string) *JobWrapper {
	w.ObjectMeta.UID = types.UID(uid)
	return w
}

// Created sets the Job's creation time.
func (w *JobWrapper) Created(at time.Time) *JobWrapper {
	w.CreationTimestamp = metav1.NewTime(at)
	return w
}

// ResourceVersion sets the Job's resourceVersion, as the API server writes it.
func (w *JobWrapper) ResourceVersion(rv string) *JobWrapper {
	w.ObjectMeta.ResourceVersion = rv
	return w
}

// Generation sets metadata.generation.
func (w *JobWrapper) Generation(g int64) *JobWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// CompletionMode sets spec.completionMode (Indexed sets it too).
func (w *JobWrapper) CompletionMode(m batchv1.CompletionMode) *JobWrapper {
	w.Spec.CompletionMode = &m
	return w
}

// JobSetChild makes the Job the child Job jobIndex of replicatedJob of JobSet js, on
// restart attempt attempt: the labels JobSet puts on its children, and js as controller.
func (w *JobWrapper) JobSetChild(js *jobset.JobSet, replicatedJob string, jobIndex, attempt int) *JobWrapper {
	w.Label(jobset.JobSetNameKey, js.Name).Label(jobset.ReplicatedJobNameKey, replicatedJob).
		Label(jobset.JobIndexKey, strconv.Itoa(jobIndex)).Label(jobsetconstants.RestartsKey, strconv.Itoa(attempt))
	return w.ControlledBy(js, jobset.SchemeGroupVersion.WithKind("JobSet"))
}

// ControlledBy sets a controller owner reference to owner of kind gvk.
func (w *JobWrapper) ControlledBy(owner metav1.Object, gvk schema.GroupVersionKind) *JobWrapper {
	w.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)}
	return w
}

// Finalizers sets the Job's finalizers.
func (w *JobWrapper) Finalizers(f ...string) *JobWrapper {
	w.ObjectMeta.Finalizers = f
	return w
}

// Deleting marks the Job as being deleted at t. An API server (and the fake client) keeps
// such an object only while it has finalizers: set some.
func (w *JobWrapper) Deleting(t time.Time) *JobWrapper {
	w.DeletionTimestamp = &metav1.Time{Time: t}
	return w
}

// Status setters: the Job as the Job controller wrote it.

// StartTime sets status.startTime: the Job has started (its pod template is immutable).
func (w *JobWrapper) StartTime(t time.Time) *JobWrapper {
	w.Status.StartTime = &metav1.Time{Time: t}
	return w
}

// Completed sets status.completedIndexes and status.succeeded, which the Job controller
// writes together.
func (w *JobWrapper) Completed(indexes string, succeeded int32) *JobWrapper {
	w.Status.CompletedIndexes, w.Status.Succeeded = indexes, succeeded
	return w
}

// FailedIndexes sets status.failedIndexes (Jobs with backoffLimitPerIndex).
func (w *JobWrapper) FailedIndexes(indexes string) *JobWrapper {
	w.Status.FailedIndexes = &indexes
	return w
}

// Condition appends a condition of type t, status True, with reason, last changed at.
func (w *JobWrapper) Condition(t batchv1.JobConditionType, reason string, at time.Time) *JobWrapper {
	w.Status.Conditions = append(w.Status.Conditions, batchv1.JobCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(at),
	})
	return w
}

// Complete appends SuccessCriteriaMet and Complete (reason CompletionsReached), the two
// conditions the Job controller writes when every index completed.
func (w *JobWrapper) Complete(at time.Time) *JobWrapper {
	return w.Condition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, at).
		Condition(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, at)
}

// Failed appends FailureTarget and Failed with reason (e.g. BackoffLimitExceeded), the
// two conditions the Job controller writes when the Job fails.
func (w *JobWrapper) Failed(reason string, at time.Time) *JobWrapper {
	return w.Condition(batchv1.JobFailureTarget, reason, at).Condition(batchv1.JobFailed, reason, at)
}

// Obj returns the Job.
func (w *JobWrapper) Obj() *batchv1.Job { return &w.Job }

// Facts returns what an account reads of the Job (account.Observation.Job).
func (w *JobWrapper) Facts() *identity.Job { return jobkind.Facts(&w.Job) }
