package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PublishedConditions are the account condition types batchledger mirrors on Kueue
// Workloads, in the order it publishes them; WorkloadConditionFor names each one's
// Workload condition type.
var PublishedConditions = []string{ConditionShardsCovered, ConditionAccepted}

// WorkloadConditionFor is the Workload condition type that mirrors the account condition
// type accountCondition, and whether batchledger publishes that condition at all.
func WorkloadConditionFor(accountCondition string) (string, bool) {
	switch accountCondition {
	case ConditionShardsCovered:
		return WorkloadConditionShardsCovered, true
	case ConditionAccepted:
		return WorkloadConditionAccepted, true
	}
	return "", false
}

// IsWorkloadCondition reports whether a Workload condition type is one batchledger
// publishes, and so owns: exactly WorkloadConditionShardsCovered and
// WorkloadConditionAccepted. Every other condition of a Workload belongs to Kueue (or to
// another controller), which is why this is an exact match and not a test of the
// batchledger.dev/ prefix.
func IsWorkloadCondition(conditionType string) bool {
	return conditionType == WorkloadConditionShardsCovered || conditionType == WorkloadConditionAccepted
}

// CarriesWorkloadConditions reports whether a Workload's conditions include one of
// batchledger's (IsWorkloadCondition).
func CarriesWorkloadConditions(conditions []metav1.Condition) bool {
	for _, c := range conditions {
		if IsWorkloadCondition(c.Type) {
			return true
		}
	}
	return false
}

// HasWorkloadNews reports whether an account's status says anything to the readers of
// its Workloads: a covered shard, or a published condition that is True or False for a
// problem (a reason that is no ExpectedWait). An account that only waits (for Kueue to
// admit its Jobs, for their pods) with nothing covered has nothing to add there: Kueue's
// own conditions say why the Workload waits, and its LabelScope label that it is
// accounted. So batchledger's conditions appear on a Workload with its first covered
// shard, its first problem or its verdict.
func HasWorkloadNews(st *BatchAccountStatus) bool {
	if st.Shards.Covered > 0 {
		return true
	}
	for _, c := range st.Conditions {
		if _, published := WorkloadConditionFor(c.Type); !published {
			continue
		}
		if c.Status == metav1.ConditionTrue || (c.Status == metav1.ConditionFalse && !ExpectedWait(c.Reason)) {
			return true
		}
	}
	return false
}
