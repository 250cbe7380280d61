package wrappers

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	w.ObjectMeta.Name, w.ObjectMeta.GenerateName = "", prefix
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

// Obj returns the Job.
func (w *JobWrapper) Obj() *batchv1.Job { return &w.Job }
