/* batchledger authors. Licensed under the Apache License, Version 2.0. */

// Package job is the batch/v1 Job as a kind of completion identity: what an account reads
// of a Job, as identity.Job facts.
package job

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/identity"
)

// Facts is what an account reads of job; nil for a nil job.
func Facts(job *batchv1.Job) *identity.Job {
	if job == nil {
		return nil
	}
	f := &identity.Job{
		Name:             job.Name,
		UID:              job.UID,
		ResourceVersion:  job.ResourceVersion,
		PodScope:         job.Spec.Template.Labels[v1alpha1.LabelScope],
		Indexed:          job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion,
		CompletedIndexes: job.Status.CompletedIndexes,
		FailedIndexes:    job.Status.FailedIndexes,
		Succeeded:        job.Status.Succeeded,
		StartTime:        job.Status.StartTime,
	}
	if g := job.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil && *g != corev1.DefaultTerminationGracePeriodSeconds {
		// Kept only when not the default, which the API server sets on every Job's
		// template: the account's status records it of each target.
		f.TerminationGracePeriodSeconds = ptr.To(*g)
	}
	if job.Spec.Completions != nil {
		f.Completions = *job.Spec.Completions
	}
	if sp := job.Spec.SuccessPolicy; sp != nil {
		for _, r := range sp.Rules {
			f.SuccessRules = append(f.SuccessRules, identity.SuccessRule{SucceededIndexes: r.SucceededIndexes, SucceededCount: r.SucceededCount})
		}
	}
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			f.Conditions = append(f.Conditions, identity.Condition{Type: string(c.Type), Reason: c.Reason, LastTransitionTime: c.LastTransitionTime})
		}
	}
	return f
}
