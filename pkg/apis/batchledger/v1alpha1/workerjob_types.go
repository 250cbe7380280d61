package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// WorkerJobFinalizer is the finalizer batchledger's worker role puts on each child Job of
// a JobSet that MultiKueue dispatched to its worker cluster: the Job outlives Kueue's
// deletion of the JobSet until its WorkerJob holds the Job's last status (or MaxHold has
// passed), also while the worker role is down.
const WorkerJobFinalizer = "batchledger.dev/worker-job-record"

// WorkerJob is what batchledger in the worker role of a MultiKueue worker cluster
// records of one child Job of a JobSet that MultiKueue dispatched there (directly, or
// rendered from a TrainJob): the manager Workload it ran for, where in the JobSet it
// stands, and its status, unjudged. No child Job of a dispatched JobSet exists on the
// manager: the manager reads these records with read-only credentials and covers the
// JobSet's targets from them (docs/multikueue.md). Named by the worker Job's UID; owned
// by nothing (Kueue deletes the JobSet and its Jobs once the Workload finished); deleted
// after the worker role's retention, as WorkerResults are.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=batchledger
// +kubebuilder:printcolumn:name="Workload",type=string,JSONPath=`.workload`
// +kubebuilder:printcolumn:name="JobSet",type=string,JSONPath=`.jobSet`
// +kubebuilder:printcolumn:name="ReplicatedJob",type=string,JSONPath=`.replicatedJob`
// +kubebuilder:printcolumn:name="JobIndex",type=integer,JSONPath=`.jobIndex`
// +kubebuilder:printcolumn:name="Attempt",type=integer,JSONPath=`.restartAttempt`
// +kubebuilder:printcolumn:name="Completed",type=string,JSONPath=`.completedIndexes`
// +kubebuilder:printcolumn:name="Terminal",type=string,JSONPath=`.terminal`
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.job`,priority=1
type WorkerJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Workload is the name of the manager's Workload, in the record's namespace, that
	// MultiKueue dispatched the JobSet (or TrainJob) for.
	// +kubebuilder:validation:MinLength=1
	Workload string `json:"workload"`
	// JobSet is the name of the JobSet whose child the Job is (the same on the manager
	// and on the worker).
	// +kubebuilder:validation:MinLength=1
	JobSet string `json:"jobSet"`
	// TrainJob is the name of the Kubeflow Trainer TrainJob that rendered the JobSet;
	// empty for a JobSet queued itself.
	// +optional
	TrainJob string `json:"trainJob,omitempty"`
	// ReplicatedJob is the JobSet replicatedJob the Job is a child of.
	// +kubebuilder:validation:MinLength=1
	ReplicatedJob string `json:"replicatedJob"`
	// JobIndex is the Job's index within its replicatedJob.
	// +kubebuilder:validation:Minimum=0
	JobIndex int32 `json:"jobIndex"`
	// RestartAttempt is the JobSet restart attempt the Job was created for.
	// +kubebuilder:validation:Minimum=0
	RestartAttempt int32 `json:"restartAttempt"`
	// Job is the name of the worker's child Job.
	// +kubebuilder:validation:MinLength=1
	Job string `json:"job"`
	// JobUID is the UID of the worker's child Job: the identity the manager accounts it
	// under.
	JobUID types.UID `json:"jobUID"`
	// JobCreated is the worker's child Job's creationTimestamp: of the children of one
	// target recorded on one worker, the newest is the one followed (a restart, or a new
	// copy after an eviction, creates its children after the old ones). Unset in records
	// of an earlier version, whose own creation stands for it.
	// +optional
	JobCreated *metav1.Time `json:"jobCreated,omitempty"`
	// Completions is the Job's spec.completions.
	// +optional
	Completions *int32 `json:"completions,omitempty"`
	// SuccessRules are the rules of the Job's spec.successPolicy: a Job that meets one is
	// Complete with only the indexes its completedIndexes lists, not every index. Unset
	// in records of an earlier version, which read as a Job without a successPolicy.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	SuccessRules []WorkerJobSuccessRule `json:"successRules,omitempty"`
	// NotIndexed is true when the Job is not an Indexed Job (its completionMode is
	// NonIndexed, which a JobSet's template may set): its pods have no completion index,
	// and the mapping onto it is invalid. Unset in records of an earlier version, which
	// read as an Indexed Job.
	// +optional
	NotIndexed bool `json:"notIndexed,omitempty"`
	// Scope is the batchledger.dev/scope label of the Job's pod template (the manager
	// stamped it on the JobSet's templates).
	// +optional
	Scope string `json:"scope,omitempty"`
	// Succeeded is the Job's status.succeeded.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// CompletedIndexes is the Job's status.completedIndexes.
	// +optional
	CompletedIndexes string `json:"completedIndexes,omitempty"`
	// FailedIndexes is the Job's status.failedIndexes.
	// +optional
	FailedIndexes *string `json:"failedIndexes,omitempty"`
	// Terminal is the Job's terminal condition that is True (Complete or Failed); empty
	// while it runs.
	// +optional
	// +kubebuilder:validation:Enum=Complete;Failed
	Terminal string `json:"terminal,omitempty"`
	// TerminalReason is the reason of that condition (BackoffLimitExceeded...).
	// +optional
	TerminalReason string `json:"terminalReason,omitempty"`
	// TerminalAt is when the Job recorded Terminal.
	// +optional
	TerminalAt *metav1.Time `json:"terminalAt,omitempty"`
	// DeletedAt is the Job's deletionTimestamp once its deletion was requested: the
	// record then holds the Job's last status. The retention counts from the latest of
	// the record's creation, TerminalAt and DeletedAt.
	// +optional
	DeletedAt *metav1.Time `json:"deletedAt,omitempty"`
}

// WorkerJobSuccessRule is one rule of a Job's spec.successPolicy, as batch/v1 has it.
type WorkerJobSuccessRule struct {
	// SucceededIndexes is the rule's succeededIndexes.
	// +optional
	SucceededIndexes *string `json:"succeededIndexes,omitempty"`
	// SucceededCount is the rule's succeededCount.
	// +optional
	SucceededCount *int32 `json:"succeededCount,omitempty"`
}

// WorkerJobList is a list of WorkerJob.
//
// +kubebuilder:object:root=true
type WorkerJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkerJob `json:"items"`
}

func init() {
	register(&WorkerJob{}, &WorkerJobList{})
}
