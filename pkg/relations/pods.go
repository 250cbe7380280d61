package relations

import (
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
)

// HasCompletionIndex reports whether an object's annotations carry a completion index:
// the Job controller's mark of a pod of an Indexed Job. It reads the annotation's
// presence only; CompletionIndex also reads its value.
func HasCompletionIndex(annotations map[string]string) bool {
	_, ok := annotations[batchv1.JobCompletionIndexAnnotation]
	return ok
}

// CompletionIndex reads a pod's completion index annotation, as the Job controller
// does; false when it is absent or is not exactly one index.
func CompletionIndex(p *corev1.Pod) (int, bool) {
	v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return 0, false
	}
	s, err := indexset.Parse(v)
	if err != nil || s.Count() != 1 {
		return 0, false
	}
	i, _ := s.Min()
	return i, true
}

// JobControllerPod reports whether pod was created by Kubernetes' Job controller for the
// Job that controls it and the completion index it carries: the pod webhooks marked it so
// at its creation (v1alpha1.AnnotationIndexPod), and the mark still names both. A pod
// anyone else made, or whose owner or index was changed since, has no result that
// stands for a shard.
func JobControllerPod(pod metav1.Object) bool {
	mark, ok := pod.GetAnnotations()[v1alpha1.AnnotationIndexPod]
	owner := IndexPodJob(pod)
	return ok && owner != nil && mark == v1alpha1.IndexPodMark(owner.UID, pod.GetAnnotations()[batchv1.JobCompletionIndexAnnotation])
}

// IndexPodJob is the Job pod is an index pod of: its batch/v1 Job controller reference
// (ControllingJob); or, for a marked pod the garbage collector orphaned (its Job deleted
// with propagationPolicy Orphan, the default of a batch/v1 Job deleted without options)
// or that another Job adopted since, the Job its index-pod mark names, when its
// controller-uid label names the same UID, under the name of its job-name label (the pod
// webhooks mark no pod whose labels name another Job). Only the Job controller creates a marked pod,
// with the mark of its own Job, and the index-pod policy keeps anyone from changing the
// mark, those labels or the completion index after that: an orphaned pod's result is
// still its Job's, and is held until it is recorded. nil for any other pod.
func IndexPodJob(pod metav1.Object) *metav1.OwnerReference {
	owner := ControllingJob(pod)
	labels := pod.GetLabels()
	uid := types.UID(labels[batchv1.ControllerUidLabel])
	switch {
	case owner != nil && owner.UID == uid:
		return owner // nearly every pod: its own Job controls it
	case owner == nil && metav1.GetControllerOfNoCopy(pod) != nil:
		return nil
	}
	annotations, name := pod.GetAnnotations(), labels[batchv1.JobNameLabel]
	index, indexed := annotations[batchv1.JobCompletionIndexAnnotation]
	mark, marked := annotations[v1alpha1.AnnotationIndexPod]
	if uid == "" || name == "" || !indexed || !marked || mark != v1alpha1.IndexPodMark(uid, index) {
		return owner
	}
	// Orphaned, or adopted since by a Job of the same selector (a Job recreated with
	// manualSelector after an orphaning delete): the pod ran under the Job its mark names.
	return &metav1.OwnerReference{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job", Name: name, UID: uid, Controller: ptr.To(true)}
}

// ReportsResult reports whether pod's result may stand for a shard: the Job controller
// created it (JobControllerPod), or it carries no mark at all and was created before
// legacyBefore, when batchledger began marking (ledgerkey.Key.IndexPodsSince): a pod an
// earlier version held, whose result it would have recorded.
func ReportsResult(pod *corev1.Pod, legacyBefore time.Time) bool {
	if JobControllerPod(pod) {
		return true
	}
	_, marked := pod.Annotations[v1alpha1.AnnotationIndexPod]
	return !marked && pod.CreationTimestamp.Time.Before(legacyBefore)
}

// ControllingJob is the batch/v1 Job controller reference of obj (a pod), nil for none.
func ControllingJob(obj metav1.Object) *metav1.OwnerReference {
	owner := metav1.GetControllerOfNoCopy(obj)
	if owner == nil || owner.Kind != "Job" || owner.APIVersion != batchv1.SchemeGroupVersion.String() {
		return nil
	}
	return owner
}

// PodMetadata is a pod as a metadata-only cache holds it (its GroupVersionKind set, so
// that a cache and a client know which resource it is).
func PodMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	return m
}

// PodMetadataList is a list of PodMetadata.
func PodMetadataList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	return l
}

// SucceededPods turns the metadata of pods known to have succeeded (read from a cache
// selected on status.phase=Succeeded) into pods that say so. All the accounting reads of
// a succeeded pod is in its metadata (owner, completion index, UID, finalizers); its
// phase is what the selector guarantees.
func SucceededPods(items []metav1.PartialObjectMetadata) []corev1.Pod {
	out := make([]corev1.Pod, len(items))
	for i := range items {
		out[i] = corev1.Pod{ObjectMeta: items[i].ObjectMeta, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	}
	return out
}

// IsSucceededIndexPod reports whether obj is a pod of an Indexed Job (it carries a
// completion index annotation) that Succeeded. It is the cheap test of the watches:
// whose Job the pod belongs to is SucceededIndexOf's question.
func IsSucceededIndexPod(obj any) bool {
	p, ok := obj.(*corev1.Pod)
	return ok && HasCompletionIndex(p.Annotations) && p.Status.Phase == corev1.PodSucceeded
}

// IndexOf is the one rule for which pods of a Job count as its index pods: a pod the Job
// controls, or orphaned from it (IndexPodJob, by UID, so a recreated Job's predecessor's
// pods do not count), with a well-formed completion index. A Job's attempts are counted
// from exactly these pods once they succeed (SucceededIndexOf). Results are captured from
// the pods of every identity of a target (TargetPodIndex). A nil job has no pod.
func IndexOf(pod *corev1.Pod, job *batchv1.Job) (int, bool) {
	if job == nil {
		return 0, false
	}
	if owner := IndexPodJob(pod); owner == nil || owner.UID != job.UID {
		return 0, false
	}
	return CompletionIndex(pod)
}

// SucceededIndexOf is IndexOf for a pod that Succeeded: a completed attempt of the
// index, whose result may be read.
func SucceededIndexOf(pod *corev1.Pod, job *batchv1.Job) (int, bool) {
	if pod.Status.Phase != corev1.PodSucceeded {
		return 0, false
	}
	return IndexOf(pod, job)
}

// uncounted reports whether the Job controller has yet to count pod's end: it records a
// terminated pod in uncountedTerminatedPods, then removes the pod's tracking finalizer,
// then moves it into succeeded (and completedIndexes) in a later status write.
func uncounted(job *batchv1.Job, pod *corev1.Pod) bool {
	if slices.Contains(pod.Finalizers, batchv1.JobTrackingFinalizer) {
		return true
	}
	u := job.Status.UncountedTerminatedPods
	return u != nil && (slices.Contains(u.Succeeded, pod.UID) || slices.Contains(u.Failed, pod.UID))
}

// SuccessfulAttempts are the succeeded index pods of job among pods (SucceededIndexOf),
// as the account core's observation of the Job's attempts.
func SuccessfulAttempts(job *batchv1.Job, pods []corev1.Pod) []account.PodAttempt {
	var out []account.PodAttempt
	for i := range pods {
		p := &pods[i]
		if idx, ok := SucceededIndexOf(p, job); ok {
			out = append(out, account.PodAttempt{UID: p.UID, Index: idx, Uncounted: uncounted(job, p)})
		}
	}
	return out
}
