package v1alpha1

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
