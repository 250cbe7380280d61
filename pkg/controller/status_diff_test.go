package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

func TestStatusChanges(t *testing.T) {
	base := func() *v1alpha1.BatchAccountStatus {
		return &v1alpha1.BatchAccountStatus{
			ObservedGeneration: 1,
			Targets:            []v1alpha1.TargetStatus{{Name: "job/j", Succeeded: 1, CompletedIndexes: "0"}},
			Shards:             v1alpha1.ShardSummary{Total: 2, Covered: 1},
			Conditions: []metav1.Condition{
				cond(v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, "1/2 shards covered"),
			},
		}
	}
	cases := []struct {
		name   string
		change func(s *v1alpha1.BatchAccountStatus)
		want   []string
	}{
		{name: "nothing", change: func(*v1alpha1.BatchAccountStatus) {}},
		{
			name: "one more index: the target's fields, the shards, the message",
			change: func(s *v1alpha1.BatchAccountStatus) {
				s.Targets[0].Succeeded, s.Targets[0].CompletedIndexes = 2, "0-1"
				s.Shards.Covered = 2
				s.Conditions[0] = cond(v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered, "2/2 shards covered")
			},
			want: []string{"shards", "target/job/j.completedIndexes", "target/job/j.succeeded", "condition/ShardsCovered"},
		},
		{
			name: "a target added and one gone",
			change: func(s *v1alpha1.BatchAccountStatus) {
				s.Targets = []v1alpha1.TargetStatus{{Name: "job/k"}}
			},
			want: []string{"target/job/k", "target/job/j (gone)"},
		},
		{
			name: "a new condition",
			change: func(s *v1alpha1.BatchAccountStatus) {
				s.Conditions = append(s.Conditions, cond("Admitted", "True", "Admitted", ""))
			},
			want: []string{"condition/Admitted"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			was, now := base(), base()
			tc.change(now)
			if diff := cmp.Diff(tc.want, statusChanges(was, now)); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
}
