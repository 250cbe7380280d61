package relations

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// CapturedBy returns the names of the live accounts requiring results that would record
// pod's result when it succeeds: those with a target whose current Job (ResolveTarget,
// else the identity the account recorded for a deleted Job) has the pod as an index pod
// (IndexOf). The pod releaser holds a pod exactly while this is not empty.
func CapturedBy(ctx context.Context, c client.Reader, pod *corev1.Pod) ([]string, error) {
	accounts, err := LiveAccountsNaming(ctx, c, pod.Namespace, PodKeys(pod)...)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ba := range accounts {
		if !ba.Spec.RequiresResults() {
			continue
		}
		for _, ref := range targetsOfPod(ba, pod) {
			job, _, err := ResolveTarget(ctx, c, ba.Namespace, ref)
			if err != nil {
				return nil, err
			}
			if job == nil {
				job = RecordedIdentity(ba, ref.Key())
			}
			if _, ok := IndexOf(pod, job); ok {
				out = append(out, ba.Name)
				break
			}
		}
	}
	return out, nil
}

// targetsOfPod are the distinct targets of ba that may resolve to the pod's Job: the Job
// by its name, or a child of the pod's JobSet.
func targetsOfPod(ba *v1alpha1.BatchAccount, pod *corev1.Pod) []v1alpha1.TargetRef {
	job, jobSet := pod.Labels[batchv1.JobNameLabel], pod.Labels[jobsetapi.JobSetNameKey]
	var out []v1alpha1.TargetRef
	seen := map[v1alpha1.TargetKey]bool{}
	for _, a := range ba.Spec.Assignments {
		ref := a.Target
		if key := ref.Key(); !seen[key] &&
			((ref.Job != "" && ref.Job == job) || (ref.JobSet != "" && ref.JobSet == jobSet)) {
			seen[key] = true
			out = append(out, ref)
		}
	}
	return out
}

// RecordedIdentity is a stand-in for the Job of a target that no longer exists, carrying
// the UID the account recorded for it: the pods of a deleted Job that are still held
// (the finalizer keeps them while they terminate) are still captured, and so still held
// until then. nil when the account never observed the target.
func RecordedIdentity(ba *v1alpha1.BatchAccount, key v1alpha1.TargetKey) *batchv1.Job {
	for _, ts := range ba.Status.Targets {
		if ts.Name == string(key) && ts.UID != "" {
			return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: ts.Job, Namespace: ba.Namespace, UID: ts.UID}}
		}
	}
	return nil
}
