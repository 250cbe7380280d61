/* batchledger authors. Licensed under the Apache License, Version 2.0. */

package job_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/identity"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

func TestFacts(t *testing.T) {
	at := metav1.Date(2026, 11, 2, 10, 0, 0, 0, metav1.Now().Location())
	cases := []struct {
		name string
		job  *batchv1.Job
		want *identity.Job
	}{
		{name: "no Job, no facts"},
		{
			name: "an Indexed Job running: its completions, indexes and scope",
			job: func() *batchv1.Job {
				j := wrappers.MakeJob("j", "ml-team").Indexed(4).Obj()
				j.UID, j.ResourceVersion = "uid-j", "42"
				j.Spec.Template.Labels = map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeResults}
				j.Status.CompletedIndexes, j.Status.FailedIndexes, j.Status.Succeeded = "0-2", ptr.To("3"), 5
				return j
			}(),
			want: &identity.Job{Name: "j", UID: "uid-j", ResourceVersion: "42", PodScope: v1alpha1.ScopeResults, Indexed: true,
				Completions: 4, CompletedIndexes: "0-2", FailedIndexes: ptr.To("3"), Succeeded: 5},
		},
		{
			name: "a NonIndexed Job is not indexed; failedIndexes untracked stays nil",
			job: func() *batchv1.Job {
				j := wrappers.MakeJob("n", "ml-team").Indexed(2).Obj()
				j.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
				return j
			}(),
			want: &identity.Job{Name: "n", Completions: 2},
		},
		{
			name: "its successPolicy and only the conditions that are True",
			job: func() *batchv1.Job {
				j := wrappers.MakeJob("s", "ml-team").Indexed(8).Obj()
				j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{
					{SucceededIndexes: ptr.To("0")}, {SucceededCount: ptr.To[int32](3)},
				}}
				j.Status.Conditions = []batchv1.JobCondition{
					{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "SuccessPolicy", LastTransitionTime: at},
					{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "SuccessPolicy", LastTransitionTime: at},
					{Type: batchv1.JobFailed, Status: corev1.ConditionFalse, Reason: "Nope", LastTransitionTime: at},
				}
				return j
			}(),
			want: &identity.Job{Name: "s", Indexed: true, Completions: 8,
				SuccessRules: []identity.SuccessRule{{SucceededIndexes: ptr.To("0")}, {SucceededCount: ptr.To[int32](3)}},
				Conditions: []identity.Condition{
					{Type: identity.ConditionSuccessCriteriaMet, Reason: "SuccessPolicy", LastTransitionTime: at},
					{Type: identity.ConditionComplete, Reason: "SuccessPolicy", LastTransitionTime: at},
				}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, jobkind.Facts(tc.job)); diff != "" {
				t.Errorf("Facts (-want +got):\n%s", diff)
			}
		})
	}
}
