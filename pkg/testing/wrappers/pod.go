package wrappers

import (
	"maps"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// PodWrapper builds Pods the way the Job controller creates them.
type PodWrapper struct{ corev1.Pod }

// MakeIndexPod returns the pod of index idx of job as the Job controller creates it: the
// Job's template labels, the job-name, controller-uid and completion-index labels, the
// completion-index annotation, a controller owner reference to job, and the mark the pod
// webhooks write on a pod the Job controller creates (NotByJobController takes it off).
// It is Pending.
func MakeIndexPod(job *batchv1.Job, name string, idx int) *PodWrapper {
	labels := maps.Clone(job.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[batchv1.JobNameLabel] = job.Name
	labels[batchv1.ControllerUidLabel] = string(job.UID)
	labels[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(idx)
	for k, v := range job.Labels {
		if _, set := labels[k]; !set && k != batchv1.JobNameLabel {
			labels[k] = v // JobSet's labels reach the pods through the template too
		}
	}
	p := &PodWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: job.Namespace, UID: types.UID(name + "-uid"), Labels: labels,
			Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: strconv.Itoa(idx),
				v1alpha1.AnnotationIndexPod: v1alpha1.IndexPodMark(job.UID, strconv.Itoa(idx))},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "worker"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}}
	return p
}

// NotByJobController takes off the mark the pod webhooks write on a pod the Job
// controller creates (v1alpha1.AnnotationIndexPod): a pod someone else made, or one
// created before any account followed its Job.
func (w *PodWrapper) NotByJobController() *PodWrapper {
	delete(w.Annotations, v1alpha1.AnnotationIndexPod)
	return w
}

// Created sets the pod's creation time.
func (w *PodWrapper) Created(at time.Time) *PodWrapper {
	w.CreationTimestamp = metav1.NewTime(at)
	return w
}

// MakePod starts a bare pod: no owner, no labels, no containers, no status. For the pods
// of a Job use MakeIndexPod.
func MakePod(name, ns string) *PodWrapper {
	return &PodWrapper{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}}
}

// Phase sets the pod's phase.
func (w *PodWrapper) Phase(p corev1.PodPhase) *PodWrapper { w.Status.Phase = p; return w }

// Succeeded marks the pod Succeeded, its worker terminated at t with message msg.
func (w *PodWrapper) Succeeded(t time.Time, msg string) *PodWrapper {
	w.Status.Phase = corev1.PodSucceeded
	w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "worker", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: msg, FinishedAt: metav1.NewTime(t)},
	}}}
	return w
}

// Sidecar appends a container (e.g. an injected proxy) after the existing ones.
func (w *PodWrapper) Sidecar(name string) *PodWrapper {
	w.Spec.Containers = append(w.Spec.Containers, corev1.Container{Name: name, Image: name})
	return w
}

// ContainerStatuses sets the container statuses in the order given: a kubelet reports
// them sorted by name, not in the spec's order.
func (w *PodWrapper) ContainerStatuses(s ...corev1.ContainerStatus) *PodWrapper {
	w.Status.ContainerStatuses = s
	return w
}

// Finalizers sets the pod's finalizers.
func (w *PodWrapper) Finalizers(f ...string) *PodWrapper { w.ObjectMeta.Finalizers = f; return w }

// Annotation sets an annotation.
func (w *PodWrapper) Annotation(k, v string) *PodWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

// Deleting marks the pod as being deleted at t.
func (w *PodWrapper) Deleting(t time.Time) *PodWrapper {
	w.DeletionTimestamp = &metav1.Time{Time: t}
	return w
}

// NoOwner removes the pod's owner references (a pod created by hand with a Job's labels).
func (w *PodWrapper) NoOwner() *PodWrapper { w.OwnerReferences = nil; return w }

// Label sets a label.
func (w *PodWrapper) Label(k, v string) *PodWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// NoLabel removes a label, as someone relabelling the pod after the Job controller
// created it does.
func (w *PodWrapper) NoLabel(k string) *PodWrapper { delete(w.Labels, k); return w }

// UID sets the pod's UID (MakeIndexPod derives it from the name).
func (w *PodWrapper) UID(uid string) *PodWrapper {
	w.ObjectMeta.UID = types.UID(uid)
	return w
}

// SucceededIndexPods returns one Succeeded pod of job per listed index, named
// <prefix>-<n> for the n-th, finished at t with no message: the successful attempts of
// those indexes, repeats included.
func SucceededIndexPods(job *batchv1.Job, prefix string, t time.Time, indexes ...int) []corev1.Pod {
	out := make([]corev1.Pod, len(indexes))
	for n, idx := range indexes {
		out[n] = *MakeIndexPod(job, prefix+"-"+strconv.Itoa(n), idx).Succeeded(t, "").Obj()
	}
	return out
}

// Obj returns the pod.
func (w *PodWrapper) Obj() *corev1.Pod { return &w.Pod }
