package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHasWorkloadNews: an account says something to its Workloads' readers once a shard
// is covered, a published condition turns True, or one is False for a problem; waiting
// with nothing covered, or a problem on a condition the Workload does not carry, is no
// news.
func TestHasWorkloadNews(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason}
	}
	waiting := []metav1.Condition{
		cond(ConditionShardsCovered, metav1.ConditionFalse, ReasonShardsMissing),
		cond(ConditionAccepted, metav1.ConditionFalse, ReasonPending),
	}
	cases := []struct {
		name       string
		covered    int32
		conditions []metav1.Condition
		want       bool
	}{
		{name: "no status yet"},
		{name: "waiting for admission, nothing covered", conditions: waiting},
		{name: "a shard covered", covered: 1, conditions: waiting, want: true},
		{name: "targets not found yet", conditions: []metav1.Condition{cond(ConditionAccepted, metav1.ConditionFalse, ReasonTargetsNotFound)}},
		{name: "a problem: the mapping is invalid", conditions: []metav1.Condition{cond(ConditionAccepted, metav1.ConditionFalse, ReasonAssignmentInvalid)}, want: true},
		{name: "a problem: a target failed", conditions: []metav1.Condition{cond(ConditionAccepted, metav1.ConditionFalse, ReasonTargetFailed)}, want: true},
		{name: "a problem on a condition the Workload does not carry", conditions: append([]metav1.Condition{cond(ConditionAssignmentValid, metav1.ConditionFalse, ReasonAssignmentInvalid)}, waiting...)},
		{name: "True on a condition the Workload does not carry", conditions: append([]metav1.Condition{cond(ConditionAdmitted, metav1.ConditionTrue, ReasonAdmitted)}, waiting...)},
		{name: "accepted", covered: 1, conditions: []metav1.Condition{cond(ConditionAccepted, metav1.ConditionTrue, ReasonAccepted)}, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &BatchAccountStatus{Conditions: tc.conditions}
			st.Shards.Covered = tc.covered
			if got := HasWorkloadNews(st); got != tc.want {
				t.Errorf("HasWorkloadNews = %v, want %v", got, tc.want)
			}
		})
	}
}
