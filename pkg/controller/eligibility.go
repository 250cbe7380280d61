package controller

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// capturableIndex is the one rule for which pods' results an account records: a pod
// controlled by the Job the account follows now (ResolveTarget), with a well-formed
// completion index. Result capture records exactly these pods once they succeed, and the
// pod releaser holds exactly these pods until then; any other pod (another replicatedJob
// or job index of a named JobSet, a superseded attempt, a pod no Job controls, a
// malformed index annotation) is never waited for, so it is never stranded.
func capturableIndex(pod *corev1.Pod, job *batchv1.Job) (int, bool) {
	if job == nil || !metav1.IsControlledBy(pod, job) {
		return 0, false
	}
	return account.CompletionIndex(pod)
}

// capturedBy returns the accounts requiring results that would record pod's result when
// it succeeds: those with a target whose current Job controls the pod (capturableIndex).
func capturedBy(ctx context.Context, c client.Reader, pod *corev1.Pod) ([]string, error) {
	accounts, err := accountsRequiringResults(ctx, c, pod.Namespace, PodTargetKeys(pod))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ba := range accounts {
		for _, ref := range targetsOfPod(ba, pod) {
			job, _, err := ResolveTarget(ctx, c, ba.Namespace, ref)
			if err != nil {
				return nil, err
			}
			if job == nil {
				job = recordedIdentity(ba, account.TargetKey(ref))
			}
			if _, ok := capturableIndex(pod, job); ok {
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
	seen := map[string]bool{}
	for _, a := range ba.Spec.Assignments {
		ref := a.Target
		if key := account.TargetKey(ref); !seen[key] &&
			((ref.Job != "" && ref.Job == job) || (ref.JobSet != "" && ref.JobSet == jobSet)) {
			seen[key] = true
			out = append(out, ref)
		}
	}
	return out
}

// recordedIdentity is a stand-in for the Job of a target that no longer exists, carrying
// the UID the account recorded for it: the pods of a deleted Job that are still held
// (the finalizer keeps them while they terminate) are still captured, and so still held
// until then. nil when the account never observed the target.
func recordedIdentity(ba *v1alpha1.BatchAccount, key string) *batchv1.Job {
	for _, ts := range ba.Status.Targets {
		if ts.Name == key && ts.UID != "" {
			return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: ts.Job, Namespace: ba.Namespace, UID: ts.UID}}
		}
	}
	return nil
}
