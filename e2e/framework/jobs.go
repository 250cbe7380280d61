package framework

import (
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// JobCondition returns the Job's condition of the given type, or nil.
func JobCondition(job *batchv1.Job, condType batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == condType {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// JobConditionTrue reports whether the Job has the condition with status True.
func JobConditionTrue(job *batchv1.Job, condType batchv1.JobConditionType) bool {
	c := JobCondition(job, condType)
	return c != nil && c.Status == corev1.ConditionTrue
}

// WaitForJobCondition waits until the Job has the condition with status True (as the Job
// controller sets it) and returns it; job holds the last read.
func WaitForJobCondition(t testing.TB, job *batchv1.Job, condType batchv1.JobConditionType) batchv1.JobCondition {
	t.Helper()
	WaitFor(t, job, DefaultTimeout, fmt.Sprintf("condition %s=True", condType), func(j *batchv1.Job) bool {
		return JobConditionTrue(j, condType)
	})
	return *JobCondition(job, condType)
}
