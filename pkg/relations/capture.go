package relations

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds/all"
)

// PodTargets are the target keys of every target a pod is an index pod of, whichever
// identity (Job UID) of the target it ran under: the Job target of its Job (IndexPodJob:
// the Job that controls it, or the one an orphaned pod's mark names), and the child
// target of each kind it belongs to (Kind.PodTarget: the JobSet target of its
// replicatedJob and job index, ...). None for a pod of no Job or without a well-formed
// completion index.
//
// Identities come and go under a target (a JobSet restart deletes its children and
// creates them again, a Job may be deleted and created again under its name), but a pod
// that succeeded has reported its result whichever identity it ran under: the result is
// recorded (a superseded identity's is recorded and rejected as StaleIdentity by the
// account, so the ledger keeps it), and so the pod is held until it is.
func PodTargets(pod *corev1.Pod) []v1alpha1.TargetKey {
	refs := PodTargetRefs(pod)
	if refs == nil {
		return nil
	}
	keys := make([]v1alpha1.TargetKey, len(refs))
	for i, ref := range refs {
		keys[i] = ref.Key()
	}
	return keys
}

// PodTargetRefs are the targets whose keys PodTargets returns.
func PodTargetRefs(pod *corev1.Pod) []v1alpha1.TargetRef {
	owner := IndexPodJob(pod)
	if owner == nil {
		return nil
	}
	if _, ok := CompletionIndex(pod); !ok {
		return nil
	}
	return all.Kinds.PodTargets(owner.Name, pod.Labels)
}

// JobTargets are the targets a Job is, by its name and labels, as PodTargets reads them
// off its pods: its Job target, and the child target of each kind whose labels it
// carries (whether its JobSet controls it is not asked).
func JobTargets(job metav1.Object) []v1alpha1.TargetRef {
	return all.Kinds.PodTargets(job.GetName(), job.GetLabels())
}

// TargetPodIndex is the one rule for which pods are a target's index pods: pod is an
// index pod of ref (PodTargets) in namespace, under any identity of the target. It
// returns the pod's completion index and the UID of its Job (IndexPodJob: the identity
// the pod ran under). Of these, result capture records exactly the pods that
// report a result (ReportsResult) once they succeed (SucceededTargetPodIndex), and the
// pod releaser holds exactly those until then (CapturedBy); any other pod (another
// replicatedJob or job index of a named JobSet, a pod of no Job or that someone else
// made, a malformed index annotation) is never waited for, so it is never stranded.
func TargetPodIndex(ref v1alpha1.TargetRef, namespace string, pod *corev1.Pod) (int, types.UID, bool) {
	if !podOfTarget(PodTargets(pod), pod.Namespace, ref, namespace) {
		return 0, "", false
	}
	idx, _ := CompletionIndex(pod)
	return idx, IndexPodJob(pod).UID, true
}

// podOfTarget is TargetPodIndex's test on a pod's PodTargets keys, for a caller that
// tests one pod against many targets (CapturedBy) and derives its keys once.
func podOfTarget(keys []v1alpha1.TargetKey, podNamespace string, ref v1alpha1.TargetRef, namespace string) bool {
	return podNamespace == namespace && (ref.Namespace == "" || ref.Namespace == namespace) && slices.Contains(keys, ref.Key())
}

// SucceededTargetPodIndex is TargetPodIndex for a pod that Succeeded and reports a
// result (ReportsResult, given legacyBefore): a completed attempt of the index, whose
// result is read.
func SucceededTargetPodIndex(ref v1alpha1.TargetRef, namespace string, pod *corev1.Pod, legacyBefore time.Time) (int, types.UID, bool) {
	if pod.Status.Phase != corev1.PodSucceeded || !ReportsResult(pod, legacyBefore) {
		return 0, "", false
	}
	return TargetPodIndex(ref, namespace, pod)
}

// TargetPods lists from c the pods of every identity of the target ref in namespace,
// through IndexPodTarget. The pods are the cache's own (no copy): read them, never write.
func TargetPods(ctx context.Context, c client.Reader, namespace string, ref v1alpha1.TargetRef) ([]corev1.Pod, error) {
	if ref.Namespace != "" && ref.Namespace != namespace {
		return nil, nil
	}
	var pods corev1.PodList
	err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingFields{IndexPodTarget: string(ref.Key())}, client.UnsafeDisableDeepCopy)
	return pods.Items, err
}

// CapturedBy returns the names of the live accounts requiring results that record pod's
// result when it succeeds: none for a pod that reports no result (ReportsResult, given
// legacyBefore), else those with a target the pod is an index pod of (TargetPodIndex),
// under the target's current identity or an earlier one, and that follow the pod's Job
// (account.Follows: an Accepted account records nothing of a Job re-run under a target's
// name since, another batch's). The pod releaser holds a pod while this is not empty, or
// while an account a short form declares for it is still to come (ShortFormPending).
func CapturedBy(ctx context.Context, c client.Reader, pod *corev1.Pod, legacyBefore time.Time) ([]string, error) {
	keys := PodTargets(pod)
	if len(keys) == 0 || !ReportsResult(pod, legacyBefore) {
		return nil, nil
	}
	accounts, err := LiveAccountsNaming(ctx, c, pod.Namespace, PodKeys(pod)...)
	if err != nil {
		return nil, err
	}
	job := IndexPodJob(pod).UID
	var out []string
	for _, ba := range accounts {
		if !ba.Spec.RequiresResults() || !account.Follows(ba, account.RunRef{Job: job}) {
			continue
		}
		for _, a := range ba.Spec.AllAssignments() {
			if podOfTarget(keys, pod.Namespace, a.Target, ba.Namespace) {
				out = append(out, ba.Name)
				break
			}
		}
	}
	return out, nil
}
