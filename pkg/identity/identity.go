/* batchledger authors. Licensed under the Apache License, Version 2.0. */

// Package identity holds what an account reads of one completion identity's Job — whatever
// kind of target (a Job by name, a JobSet's child, ...) made it — as kind-neutral facts.
// A target kind turns its objects into a Job (pkg/kinds/job does it for batch/v1 Jobs);
// pkg/account reads nothing else of them.
package identity

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The condition types a Job records, as the Job controller names them.
const (
	ConditionComplete           = "Complete"
	ConditionFailed             = "Failed"
	ConditionSuccessCriteriaMet = "SuccessCriteriaMet"
	ConditionFailureTarget      = "FailureTarget"
)

// Job is one completion identity: a Job (by UID) whose completion indexes each stand for
// at most one shard.
type Job struct {
	Name string
	UID  types.UID
	// ResourceVersion is the observation point the facts were read at.
	ResourceVersion string
	// PodScope is batchledger's opt-in scope label on the Job's pod template ("" none).
	PodScope string
	// TerminationGracePeriodSeconds is the termination grace period of the Job's pods
	// when it is not Kubernetes' default (nil: the default, 30 s).
	TerminationGracePeriodSeconds *int64
	// Indexed is true for a Job whose pods carry completion indexes.
	Indexed bool
	// Completions is the number of completion indexes (0..Completions-1).
	Completions int32
	// CompletedIndexes and FailedIndexes are the Job's own status, in the Job
	// controller's interval format; FailedIndexes is nil when the Job does not track them.
	CompletedIndexes string
	FailedIndexes    *string
	// Succeeded is the Job's count of succeeded pods.
	Succeeded int32
	// StartTime is the Job's status.startTime: when the Job controller started its pods
	// (nil while it never started, and again while suspended).
	StartTime *metav1.Time
	// SuccessRules is the Job's successPolicy (empty: every index must succeed).
	SuccessRules []SuccessRule
	// Conditions are the Job's conditions that are True.
	Conditions []Condition
}

// SuccessRule is one rule of a Job's successPolicy: the Job succeeds once the indexes
// SucceededIndexes (interval format) succeeded, or SucceededCount of them, or both.
type SuccessRule struct {
	SucceededIndexes *string
	SucceededCount   *int32
}

// Condition is a condition a Job recorded True.
type Condition struct {
	Type, Reason       string
	LastTransitionTime metav1.Time
}
