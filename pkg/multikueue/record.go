package multikueue

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/acceptance"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// RecordName is the name of the WorkerResult of a pod: its UID, so that recording a
// pod twice (a retry, a restart) finds the first record instead of making a second.
func RecordName(pod *corev1.Pod) string { return string(pod.UID) }

// NewRecord is the WorkerResult of a succeeded pod of the worker's copy of a Job that
// MultiKueue dispatched for the manager's Workload workload, with completion index
// index, finished at finished. It keeps every container's termination message as
// acceptance.MessageOf reads it, the names of the init containers that report none,
// and the annotations that name the result container:
// the manager judges the result under its account's rule (RecordPod), as result capture
// judges a pod of its own cluster.
func NewRecord(pod *corev1.Pod, workload, job string, index int, finished time.Time) *v1alpha1.WorkerResult {
	rec := &v1alpha1.WorkerResult{
		ObjectMeta: metav1.ObjectMeta{Name: RecordName(pod), Namespace: pod.Namespace},
		Workload:   workload, Job: job, Index: int32(index),
		Pod: pod.Name, PodUID: pod.UID, FinishedAt: metav1.NewTime(finished),
		ResultContainer:  pod.Annotations[v1alpha1.AnnotationResultContainer],
		DefaultContainer: pod.Annotations[acceptance.DefaultContainerAnnotation],
		Containers:       []v1alpha1.ContainerMessage{},
	}
	if owner := metav1.GetControllerOf(pod); owner != nil && owner.Kind == "Job" {
		rec.JobUID = owner.UID
	}
	add := func(name string, sidecar bool) {
		msg, _ := acceptance.MessageOf(pod, name)
		rec.Containers = append(rec.Containers, v1alpha1.ContainerMessage{Name: name, Message: msg, Sidecar: sidecar})
	}
	for _, c := range pod.Spec.Containers {
		add(c.Name, false)
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if acceptance.NativeSidecar(c) {
			add(c.Name, true)
			continue
		}
		// Its name only: named for the result, it reports none, as on the manager's
		// cluster, rather than being a container the pod lacks.
		rec.Containers = append(rec.Containers, v1alpha1.ContainerMessage{Name: c.Name, Init: true})
	}
	return rec
}

// RecordPod is the succeeded pod a WorkerResult records, as much of it as
// acceptance.FromPod reads: its name and UID, the annotations that name its result
// container, its containers in spec order and their termination messages, its init
// containers.
func RecordPod(rec *v1alpha1.WorkerResult) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: rec.Pod, Namespace: rec.Namespace, UID: rec.PodUID, Annotations: map[string]string{}},
		Status:     corev1.PodStatus{Phase: corev1.PodSucceeded},
	}
	if rec.ResultContainer != "" {
		pod.Annotations[v1alpha1.AnnotationResultContainer] = rec.ResultContainer
	}
	if rec.DefaultContainer != "" {
		pod.Annotations[acceptance.DefaultContainerAnnotation] = rec.DefaultContainer
	}
	always := corev1.ContainerRestartPolicyAlways
	for _, c := range rec.Containers {
		status := corev1.ContainerStatus{Name: c.Name, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{Message: c.Message, FinishedAt: rec.FinishedAt}}}
		switch {
		case c.Sidecar:
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: c.Name, RestartPolicy: &always})
			pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, status)
			continue
		case c.Init:
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: c.Name})
			pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, status)
			continue
		}
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c.Name})
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, status)
	}
	return pod
}
