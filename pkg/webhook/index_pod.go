package webhook

import (
	"slices"

	"gomodules.xyz/jsonpatch/v2"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
)

// JobControllers are the users Kubernetes' Job controller creates pods as: its own
// ServiceAccount under kube-controller-manager's --use-service-account-credentials, else
// kube-controller-manager itself. Anyone else may put a Job's ownerReference and a
// completion index on a pod of their own: only these users' pods are marked index pods
// (indexPodMark), and on a MultiKueue worker attributed to a manager Workload. The
// index-pod policy (config/policy) and config/worker's worker-pod-workload policy name
// the same users.
var JobControllers = []string{"system:serviceaccount:kube-system:job-controller", "system:kube-controller-manager"}

// indexPodPath is the JSON pointer of v1alpha1.AnnotationIndexPod.
var indexPodPath = AnnotationPath(v1alpha1.AnnotationIndexPod)

// indexPodMark is the patch of a new pod's v1alpha1.AnnotationIndexPod: set to the mark
// of its controlling Job and its completion index when the Job controller (username)
// creates it, replacing whatever its template carried; removed when anyone else's pod
// carries one. Nothing for any other pod. The decision reads the request alone, no
// cache: a pod is marked whatever the webhook's lookups do.
func indexPodMark(meta metav1.ObjectMeta, username string) []jsonpatch.JsonPatchOperation {
	have, claimed := meta.Annotations[v1alpha1.AnnotationIndexPod]
	index, indexed := meta.Annotations[batchv1.JobCompletionIndexAnnotation]
	if owner := relations.ControllingJob(&meta); owner != nil && indexed && slices.Contains(JobControllers, username) && namesOwner(meta.Labels, owner) {
		want := v1alpha1.IndexPodMark(owner.UID, index)
		if claimed && have == want {
			return nil
		}
		// An index pod has annotations (its completion index): "add" sets one member.
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", indexPodPath, want)}
	}
	if claimed {
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("remove", indexPodPath, nil)}
	}
	return nil
}

// namesOwner reports whether the Job labels a pod carries, where it carries them, name
// its controlling Job: the labels an orphaned pod is filed under (relations.IndexPodJob)
// are the Job's own. A Job with manualSelector may give its pods another Job's labels;
// such pods are not marked, and their results count for nothing.
func namesOwner(labels map[string]string, owner *metav1.OwnerReference) bool {
	name, uid := labels[batchv1.JobNameLabel], labels[batchv1.ControllerUidLabel]
	return (name == "" || name == owner.Name) && (uid == "" || uid == string(owner.UID))
}
