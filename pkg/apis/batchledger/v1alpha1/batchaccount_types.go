package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Condition types of a BatchAccount. Each is a separate observation: coverage never
// implies termination, and termination never implies accepted results.
const (
	// ConditionAssignmentValid says whether the assignment mapping is a partition of the
	// declared shards over the targets' required indexes.
	ConditionAssignmentValid = "AssignmentValid"
	// ConditionAdmitted says whether Kueue admitted every target's Workload.
	ConditionAdmitted = "Admitted"
	// ConditionShardsCovered says whether every declared shard has a completed index of
	// the current identity assigned to it.
	ConditionShardsCovered = "ShardsCovered"
	// ConditionTerminated says whether every target's Job reached a terminal condition
	// (Complete or Failed) as recorded by the Job controller.
	ConditionTerminated = "Terminated"
	// ConditionResultsAccepted says whether every shard has an accepted result.
	ConditionResultsAccepted = "ResultsAccepted"
	// ConditionAccepted is the batch verdict: valid mapping, all shards covered, every
	// target Complete, every shard's result accepted.
	ConditionAccepted = "Accepted"
)

// Condition types batchledger publishes on Kueue Workloads. Kueue caps a Workload at 16
// conditions and uses up to 9 itself, so we publish only these two.
const (
	// WorkloadConditionShardsCovered mirrors ConditionShardsCovered on each participating Workload.
	WorkloadConditionShardsCovered = "batchledger.dev/ShardsCovered"
	// WorkloadConditionAccepted mirrors ConditionAccepted on each participating Workload.
	WorkloadConditionAccepted = "batchledger.dev/Accepted"
)

// BatchAccountSpec declares a batch: its shard population under one input and one model
// revision, and the explicit mapping from (Job, completion index) identities onto shards.
//
// +kubebuilder:validation:XValidation:rule="self.inputRevision == oldSelf.inputRevision",message="inputRevision is immutable: an account is about one input revision; create a new BatchAccount"
// +kubebuilder:validation:XValidation:rule="self.modelRevision == oldSelf.modelRevision",message="modelRevision is immutable: an account is about one model revision; create a new BatchAccount"
type BatchAccountSpec struct {
	// InputRevision identifies the input dataset revision every shard belongs to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	InputRevision string `json:"inputRevision"`

	// ModelRevision identifies the model revision every shard must be processed with.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ModelRevision string `json:"modelRevision"`

	// Shards declares the shard population the batch must cover.
	// +required
	Shards ShardPopulation `json:"shards"`

	// Assignments map completion indexes of targets onto shards. A valid mapping is a
	// partition: every declared shard is assigned to exactly one (target, index), and no
	// (target, index) is assigned twice. Entries marked repair may give an already
	// assigned shard a further identity.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	Assignments []Assignment `json:"assignments"`

	// Repairs are repair assignments kept apart from Assignments: each gives shards that
	// are already assigned a further identity, exactly as an assignment marked repair
	// does (its own repair field is implied). `kubectl batchledger repair` writes here,
	// under its own field manager, so that a GitOps tool that applies the account's
	// manifest (which never sets this list) leaves the repairs alone. Once a target was
	// admitted, entries may only be appended.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	Repairs []Assignment `json:"repairs,omitempty"`

	// Acceptance is the agreed result criterion for shard outputs.
	// +optional
	Acceptance *AcceptanceCriterion `json:"acceptance,omitempty"`

	// TTLSecondsAfterFinished, when set, is how long the account is kept once its batch
	// finished: every target terminated (or was deleted) and the verdict can no longer
	// change without a repair (Accepted, or not acceptable as it stands). The manager then
	// deletes the account; its ShardResults go with it. Unset keeps the account, except
	// that a short-form account gets the manager's default (--short-form-ttl).
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// MaxShardCount is the largest shards.count: the Maximum of Count's marker below, which
// cannot name a constant, so a test pins the CRD's maximum to this one.
const MaxShardCount = 1000000

// ShardPopulation is the declared set of shards: either explicit names, or the compact
// form Prefix+Count (shards "<prefix>0" .. "<prefix><count-1>") so that 100,000 shards fit
// in one object. A shard's ordinal is its position in Names, or its number in the compact form.
//
// +kubebuilder:validation:XValidation:rule="has(self.names) || has(self.count)",message="declare shards by names or by count (with an optional prefix)"
// +kubebuilder:validation:XValidation:rule="!has(self.names) || (!has(self.count) && (!has(self.prefix) || size(self.prefix) == 0))",message="names and count exclude each other; prefix goes with count"
type ShardPopulation struct {
	// Names lists the shards explicitly, in ordinal order.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Names []string `json:"names,omitempty"`

	// Prefix is prepended to the ordinal to name each shard of the compact form.
	// +optional
	// +kubebuilder:validation:MaxLength=200
	Prefix string `json:"prefix,omitempty"`

	// Count is the number of shards of the compact form.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Count *int32 `json:"count,omitempty"`
}

// TargetRef names the Job whose completion indexes an assignment maps: a batch/v1 Job by
// name, or one child Job of a replicatedJob of a JobSet or of a Kubeflow Trainer TrainJob
// (whose JobSet runs it). Targets live in the account's namespace; Namespace exists only
// so that a reference to another namespace is reported instead of silently
// reinterpreted.
//
// The rules read an empty name as absent, as the controller does: MinLength refuses it,
// and a rule about a field it did not mean would contradict the target it is on.
//
// +kubebuilder:validation:XValidation:rule="[has(self.job) && size(self.job) > 0, has(self.jobSet) && size(self.jobSet) > 0, has(self.trainJob) && size(self.trainJob) > 0].filter(x, x).size() == 1",message="a target names exactly one of job, jobSet or trainJob"
// +kubebuilder:validation:XValidation:rule="!((has(self.jobSet) && size(self.jobSet) > 0) || (has(self.trainJob) && size(self.trainJob) > 0)) || (has(self.replicatedJob) && size(self.replicatedJob) > 0)",message="a jobSet or trainJob target needs replicatedJob"
// +kubebuilder:validation:XValidation:rule="!has(self.job) || size(self.job) == 0 || ((!has(self.replicatedJob) || size(self.replicatedJob) == 0) && !has(self.jobIndex))",message="replicatedJob and jobIndex apply only to jobSet and trainJob targets"
type TargetRef struct {
	// Job is the name of a batch/v1 Job in the account's namespace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Job string `json:"job,omitempty"`

	// JobSet is the name of a JobSet in the account's namespace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	JobSet string `json:"jobSet,omitempty"`

	// TrainJob is the name of a Kubeflow Trainer TrainJob (trainer.kubeflow.org) in the
	// account's namespace; its replicatedJobs are those of the JobSet it renders (the
	// torch runtime's "node" runs one completion index per node).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	TrainJob string `json:"trainJob,omitempty"`

	// ReplicatedJob is the replicatedJob of JobSet (or TrainJob) whose child Job is meant.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ReplicatedJob string `json:"replicatedJob,omitempty"`

	// JobIndex selects the child Job (label jobset.sigs.k8s.io/job-index); default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	JobIndex *int32 `json:"jobIndex,omitempty"`

	// Namespace, when set, must equal the account's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Assignment maps a target's completion indexes onto shards, in order: the k-th index of
// Indexes is assigned the k-th shard of Shards (or of ShardOrdinals).
//
// +kubebuilder:validation:XValidation:rule="has(self.shards) != has(self.shardOrdinals)",message="an assignment names its shards either by shards or by shardOrdinals"
type Assignment struct {
	// Target is the Job whose indexes are mapped.
	// +required
	Target TargetRef `json:"target"`

	// Indexes are completion indexes of the target, in the Job controller's interval
	// format ("0-3", "1,3-5,7").
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`
	Indexes string `json:"indexes"`

	// Shards names the shards assigned to Indexes, one per index, in order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	Shards []string `json:"shards,omitempty"`

	// ShardOrdinals are the ordinals of the shards assigned to Indexes, in the interval
	// format, one per index, in order; the compact way to map large batches.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`
	ShardOrdinals string `json:"shardOrdinals,omitempty"`

	// Repair marks a follow-up assignment: it gives shards that are already assigned a
	// further identity (typically a repair Job's index). A shard is covered when any of
	// its identities completed; the account records which one did.
	// +optional
	Repair bool `json:"repair,omitempty"`
}

// AcceptanceCriterion is the agreed criterion a shard's reported result must meet.
// Results are read and judged only when RequireResults is true, so a Rule or a
// ResultContainer without it is refused rather than silently never applied.
//
// +kubebuilder:validation:XValidation:rule="self.?requireResults.orValue(false) || ((!has(self.rule) || size(self.rule) == 0) && (!has(self.resultContainer) || size(self.resultContainer) == 0))",message="rule and resultContainer apply only with requireResults: true: without it no result is read or judged, and the batch is Accepted on coverage alone"
type AcceptanceCriterion struct {
	// RequireResults requires an accepted result for every shard before the batch is
	// Accepted. When false, coverage and termination suffice.
	// +optional
	RequireResults bool `json:"requireResults,omitempty"`

	// Rule is a CEL expression over `result` (the decoded termination-message result)
	// that must evaluate to true, e.g. `result.valid == result.records && result.records > 0`.
	// Requires RequireResults.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Rule string `json:"rule,omitempty"`

	// ResultContainer names the container whose termination message carries a worker's
	// result, e.g. "worker" beside an injected "istio-proxy". It may name a native sidecar
	// (an init container with restartPolicy Always); no pod annotation overrides it.
	// Default: per pod, the container the pod annotation batchledger.dev/result-container
	// names, else the one kubectl.kubernetes.io/default-container names, else the first
	// container of the pod spec. Requires RequireResults.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ResultContainer string `json:"resultContainer,omitempty"`
}

// BatchAccountStatus is the account as last observed.
type BatchAccountStatus struct {
	// ObservedGeneration is the spec generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// JudgedSpec identifies the spec this status judged, less what judges nothing
	// (ttlSecondsAfterFinished): BatchAccountSpec.JudgingDigest. An Accepted verdict stays
	// final through a change of the spec that leaves it as it was.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	JudgedSpec string `json:"judgedSpec,omitempty"`

	// Targets holds the current identity and observations of each assignment target
	// (one per target the assignments name, so at most as many as assignments).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	Targets []TargetStatus `json:"targets,omitempty"`

	// Shards summarizes coverage and acceptance over the declared shards.
	// +optional
	Shards ShardSummary `json:"shards,omitempty"`

	// History records identities superseded by a new one (a Job recreated under the same
	// name, e.g. by a JobSet restart) with the coverage they had, so that nothing is
	// silently lost. The current verdict is about the current identities only. Bounded:
	// the latest superseded identity of each target that has no identity now (a restart
	// in progress: it becomes the target's record again if its JobSet ends) is always
	// kept, and beside those the newest others; HistoryDropped counts the others left out.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1088
	History []SupersededIdentity `json:"history,omitempty"`

	// HistoryDropped counts superseded identities left out of History (the oldest first),
	// over the account's life.
	// +optional
	HistoryDropped int32 `json:"historyDropped,omitempty"`

	// Results summarizes reported shard results that were rejected or conflicted.
	// +optional
	Results ResultSummary `json:"results,omitempty"`

	// Conditions are AssignmentValid, Admitted, ShardsCovered, Terminated,
	// ResultsAccepted and Accepted.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TargetStatus is what was observed of one target.
type TargetStatus struct {
	// Name is the target's key: "job/<name>" or "jobset/<name>/<replicatedJob>/<jobIndex>".
	Name string `json:"name"`

	// Job is the name of the observed batch/v1 Job (for JobSet targets, the child Job).
	// +optional
	Job string `json:"job,omitempty"`

	// UID of the observed Job: with the completion index, the completion identity.
	// +optional
	UID types.UID `json:"uid,omitempty"`

	// RestartAttempt is the JobSet restart attempt of the observed child Job.
	// +optional
	RestartAttempt int32 `json:"restartAttempt,omitempty"`

	// Found is false while the target does not exist (yet), and after its Job was
	// deleted (then Deleted is true and the fields below are the identity's record).
	Found bool `json:"found"`

	// Deleted is true when the identity's Job was observed and later disappeared (a TTL,
	// a cascade, by hand). The record stands: coverage, results and the verdict are still
	// judged from what was last observed of it. A new Job under the same name (a new UID)
	// supersedes the record into history.
	// +optional
	Deleted bool `json:"deleted,omitempty"`

	// DeletedAt is when the Job was first observed missing.
	// +optional
	DeletedAt *metav1.Time `json:"deletedAt,omitempty"`

	// OwnerEndedSeen is true for a child target never observed whose owner (the JobSet,
	// the TrainJob) this account saw end, be deleted or lack the child: the child will not
	// be created, also once that owner is gone (nothing else would tell such an owner
	// from one not created yet).
	// +optional
	OwnerEndedSeen bool `json:"ownerEndedSeen,omitempty"`

	// Completions is the Job's spec.completions.
	// +optional
	Completions int32 `json:"completions,omitempty"`

	// NotIndexed is true when the Job is not an Indexed Job (completionMode NonIndexed):
	// its pods have no completion index, and the mapping onto it is invalid, also once
	// the Job is deleted and this is its record.
	// +optional
	NotIndexed bool `json:"notIndexed,omitempty"`

	// PodScope is the opt-in scope label on the Job's pod template (LabelScope):
	// "results" (its succeeded pods are held until their result is recorded),
	// "coverage" (counted, never held), or empty when the Job started before any account
	// named it (Kubernetes forbids relabelling a started Job): its pods are not held, and
	// their results do not count (the pod webhooks see, and mark as the Job controller's,
	// only the pods of a scoped template; no other pod reports a shard).
	// +optional
	PodScope string `json:"podScope,omitempty"`

	// TerminationGracePeriodSeconds is the termination grace period of the Job's pod
	// template, when it is not Kubernetes' default (30, which unset stands for). A
	// MultiKueue worker's pod that ended within it after the Job's admission there ended
	// was still running that admission, and its result is the identity's: the record
	// keeps this bound once the Job is deleted.
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// SuccessPolicy describes the Job's own success criterion in words; empty means
	// every index 0..completions-1 must succeed.
	// +optional
	SuccessPolicy string `json:"successPolicy,omitempty"`

	// Required is the index population the Job's own criterion requires, interval format.
	// +optional
	Required string `json:"required,omitempty"`

	// CompletedIndexes is the Job controller's status.completedIndexes as observed.
	// Empty, with CompletedIndexesOmitted, when the account's index lists would not fit
	// the status size budget: the Job's own status holds them.
	// +optional
	CompletedIndexes string `json:"completedIndexes,omitempty"`
	// CompletedIndexesOmitted is true when CompletedIndexes was left out of the status to
	// keep the account under the API server's object size limit (accounts of hundreds of
	// thousands of shards with fragmented coverage). Succeeded still counts them.
	// +optional
	CompletedIndexesOmitted bool `json:"completedIndexesOmitted,omitempty"`

	// FailedIndexes is the Job controller's status.failedIndexes as observed.
	// +optional
	FailedIndexes string `json:"failedIndexes,omitempty"`

	// IndexesOmitted lists, when the status index budget forced it, which other index
	// lists of this target were left out ("failedIndexes", "repeatedIndexes",
	// "required"): an omitted list is empty here, which does not mean "none".
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	IndexesOmitted []string `json:"indexesOmitted,omitempty"`

	// RequiredUnmapped is true when Required was left out (IndexesOmitted) while the
	// mapping assigned no shard to some of its indexes. A successPolicy's required
	// indexes are kept nowhere else: once the Job is deleted, its record keeps the
	// mapping invalid (UnmappedIndexes) on this alone, until the mapping assigns every
	// index below Completions.
	// +optional
	RequiredUnmapped bool `json:"requiredUnmapped,omitempty"`

	// Succeeded is the Job controller's status.succeeded: distinct succeeded indexes,
	// never attempts.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`

	// SuccessfulAttempts counts successful pods seen, including repeats of an index.
	// +optional
	SuccessfulAttempts int32 `json:"successfulAttempts,omitempty"`

	// RepeatedIndexes are indexes with more than one successful pod, interval format.
	// +optional
	RepeatedIndexes string `json:"repeatedIndexes,omitempty"`

	// AttemptLedger records the pods of repeated indexes so that attempts are counted
	// once across reconciles and after the Job controller deleted the extra pods.
	// Bounded, lowest indexes first, within a pod budget that shrinks with the number of
	// targets; a repeated index left out keeps its attempts in AttemptsUnledgered.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	AttemptLedger []IndexAttempts `json:"attemptLedger,omitempty"`

	// AttemptLedgerDropped counts the repeated indexes (of RepeatedIndexes) whose pods
	// AttemptLedger no longer lists.
	// +optional
	AttemptLedgerDropped int32 `json:"attemptLedgerDropped,omitempty"`

	// AttemptsUnledgered counts the repeat attempts (beyond each index's first) of the
	// indexes left out of AttemptLedger: they stay in SuccessfulAttempts, and later pods
	// of those indexes are not counted again.
	// +optional
	AttemptsUnledgered int32 `json:"attemptsUnledgered,omitempty"`

	// StartedAt is when this identity's Job first started (the Job controller's
	// status.startTime as first seen, kept through later suspensions): from then on its
	// pods are told their shards, so the mapping can no longer change.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// Terminal is the Job's terminal condition: "", Complete or Failed.
	// +optional
	Terminal string `json:"terminal,omitempty"`

	// TerminalReason is the reason of the terminal condition (e.g. CompletionsReached,
	// SuccessPolicy, BackoffLimitExceeded).
	// +optional
	TerminalReason string `json:"terminalReason,omitempty"`

	// SuccessCriteriaMet records the Job's SuccessCriteriaMet condition.
	// +optional
	SuccessCriteriaMet bool `json:"successCriteriaMet,omitempty"`

	// ObservedResourceVersion is the Job resourceVersion the membership was read at.
	// +optional
	ObservedResourceVersion string `json:"observedResourceVersion,omitempty"`

	// TerminalObservedAt is when the Job controller recorded the terminal condition.
	// +optional
	TerminalObservedAt *metav1.Time `json:"terminalObservedAt,omitempty"`

	// Workload is the Kueue Workload the target runs under, as last observed before the
	// Job's terminal condition was recorded: after that Kueue's changes to it (Finished,
	// deletion by its retention policy) are not followed, since they change nothing the
	// account decides.
	// +optional
	Workload *WorkloadObservation `json:"workload,omitempty"`

	// Admissions are the Kueue admissions of this identity, oldest first: where (queue,
	// flavors) it ran, when each was first seen, why it was evicted, and which completion
	// indexes completed under it. Bounded by a count that shrinks with the number of
	// targets: the first admission and the newest are kept, AdmissionsDropped counts
	// those left out between them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Admissions []Admission `json:"admissions,omitempty"`

	// AdmissionsDropped counts the admissions left out of Admissions.
	// +optional
	AdmissionsDropped int32 `json:"admissionsDropped,omitempty"`

	// Problems lists what is wrong with this target's mapping or observation, the first
	// ones, each clipped; how many and how long shrinks with the number of targets.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=512
	Problems []string `json:"problems,omitempty"`

	// ProblemsDropped counts the problems left out of Problems.
	// +optional
	ProblemsDropped int32 `json:"problemsDropped,omitempty"`
}

// Admission is one Kueue admission of a target's identity.
type Admission struct {
	// Workload is the name of the admitted Workload.
	// +optional
	Workload string `json:"workload,omitempty"`
	// ClusterQueue the Workload was admitted to.
	// +optional
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// Flavors lists "<podset>=<resource>:<flavor>" assignments of the admission, the
	// first ones (their number shrinks with the number of targets).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Flavors []string `json:"flavors,omitempty"`
	// FlavorsDropped counts the assignments left out of Flavors.
	// +optional
	FlavorsDropped int32 `json:"flavorsDropped,omitempty"`
	// Cluster is the MultiKueue worker cluster the admission ran on (the Workload's
	// status.clusterName); empty for a Workload that runs where it is queued.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// AdmittedAt is when the admission was first observed.
	AdmittedAt metav1.Time `json:"admittedAt"`
	// EvictedAt is when the end of this admission was first observed: its Workload's
	// eviction, or, when the eviction went unseen between two observations, the next
	// admission that replaced it (EvictionReason is then empty).
	// +optional
	EvictedAt *metav1.Time `json:"evictedAt,omitempty"`
	// EvictionReason is the reason of the Workload's Evicted condition (e.g. Preempted),
	// when the eviction was observed.
	// +optional
	EvictionReason string `json:"evictionReason,omitempty"`
	// CompletedIndexes are the completion indexes first observed completed while this
	// admission was the identity's latest, interval format.
	// +optional
	CompletedIndexes string `json:"completedIndexes,omitempty"`
	// CompletedIndexesOmitted is true when CompletedIndexes was left out to keep the
	// status within its index budget (or could not be attributed because the target's
	// own completed indexes were omitted); empty then does not mean "none".
	// +optional
	CompletedIndexesOmitted bool `json:"completedIndexesOmitted,omitempty"`
}

// IndexAttempts lists the successful pods of one completion index.
type IndexAttempts struct {
	// Index is the completion index.
	Index int32 `json:"index"`
	// Pods are the UIDs of its successful pods, first success first.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Pods []types.UID `json:"pods"`
}

// WorkloadObservation is what was observed of a target's Kueue Workload.
type WorkloadObservation struct {
	// Name of the Workload.
	Name string `json:"name"`
	// UID of the Workload; Kueue may recreate a Workload under the same name.
	// +optional
	UID types.UID `json:"uid,omitempty"`
	// Admitted is whether the Workload is currently admitted.
	Admitted bool `json:"admitted"`
	// ClusterQueue the Workload was admitted to.
	// +optional
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// Flavors lists "<podset>=<resource>:<flavor>" assignments of the admission, the
	// first ones (their number shrinks with the number of targets).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Flavors []string `json:"flavors,omitempty"`
	// FlavorsDropped counts the assignments left out of Flavors.
	// +optional
	FlavorsDropped int32 `json:"flavorsDropped,omitempty"`
	// Cluster is the MultiKueue worker cluster the Workload was dispatched to (its
	// status.clusterName); empty for a Workload that runs where it is queued, and while
	// it is being dispatched.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// NominatedClusters are the MultiKueue worker clusters the Workload is being
	// dispatched to (its status.nominatedClusterNames), the first ones.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	NominatedClusters []string `json:"nominatedClusters,omitempty"`
	// Evicted is whether the Workload is currently evicted (e.g. preempted).
	// +optional
	Evicted bool `json:"evicted,omitempty"`
	// EvictionReason is the reason of the Workload's Evicted condition, when evicted.
	// +optional
	EvictionReason string `json:"evictionReason,omitempty"`
	// Finished is whether Kueue marked the Workload Finished (usually false: Kueue does so
	// after the Job's terminal condition, when the observation is no longer followed).
	// +optional
	Finished bool `json:"finished,omitempty"`
	// ObservedResourceVersion is the Workload resourceVersion these were read at.
	// +optional
	ObservedResourceVersion string `json:"observedResourceVersion,omitempty"`
}

// SupersededIdentity is an identity a target had before it was replaced.
type SupersededIdentity struct {
	// Target is the target key.
	Target string `json:"target"`
	// Job is the name of the superseded Job.
	Job string `json:"job"`
	// UID of the superseded Job: its completions are a different identity.
	UID types.UID `json:"uid"`
	// RestartAttempt of the superseded JobSet child.
	// +optional
	RestartAttempt int32 `json:"restartAttempt,omitempty"`
	// Completions of the superseded Job (spec.completions), which CompletedIndexes is read
	// against.
	// +optional
	Completions int32 `json:"completions,omitempty"`
	// CompletedIndexes the superseded identity had covered when last observed.
	// +optional
	CompletedIndexes string `json:"completedIndexes,omitempty"`
	// CompletedIndexesOmitted is true when CompletedIndexes was left out to keep the
	// status within its index budget: empty then does not mean "nothing covered".
	// +optional
	CompletedIndexesOmitted bool `json:"completedIndexesOmitted,omitempty"`
	// Terminal is the superseded identity's terminal condition, if it had one.
	// +optional
	Terminal string `json:"terminal,omitempty"`
	// NotIndexed is true when the superseded Job was not an Indexed Job: the mapping
	// onto it is invalid, also once it is the target's record again (a JobSet that
	// ended instead of recreating the child).
	// +optional
	NotIndexed bool `json:"notIndexed,omitempty"`
	// Required is the index population the superseded Job's own criterion required,
	// interval format: what the mapping must assign (UnmappedIndexes), also once it is
	// the target's record again. Empty for an identity superseded before it was kept.
	// +optional
	Required string `json:"required,omitempty"`
	// RequiredOmitted is true when Required was left out to keep the status within its
	// index budget: the required indexes are then not checked, but for RequiredUnmapped.
	// +optional
	RequiredOmitted bool `json:"requiredOmitted,omitempty"`
	// RequiredUnmapped is true when Required was left out (RequiredOmitted), here or in
	// the target's status before it was superseded, while the mapping assigned no shard
	// to some of its indexes. Once the identity is the target's record again (a JobSet
	// that ended instead of recreating the child), it keeps the mapping invalid
	// (UnmappedIndexes) on this alone, as TargetStatus.RequiredUnmapped does.
	// +optional
	RequiredUnmapped bool `json:"requiredUnmapped,omitempty"`
	// SupersededAt is when the replacement was observed.
	SupersededAt metav1.Time `json:"supersededAt"`
}

// ShardSummary counts shards; sets are in compact forms, never unbounded lists.
type ShardSummary struct {
	// Total declared shards.
	Total int32 `json:"total"`
	// Covered shards: a current identity assigned to the shard completed.
	Covered int32 `json:"covered"`
	// Accepted shards: an accepted result is recorded for the shard.
	Accepted int32 `json:"accepted"`
	// Progress is the percentage (0-100, rounded down) of shards accepted when the
	// account requires results, else of shards covered. 100 only when all are.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Progress int32 `json:"progress"`
	// Missing names the shards not covered, compactly ("D", "shard-3..shard-9").
	// +optional
	Missing string `json:"missing,omitempty"`
	// MissingOrdinals are the ordinals of the missing shards, interval format; only the
	// first of them when MissingOrdinalsTruncated.
	// +optional
	MissingOrdinals string `json:"missingOrdinals,omitempty"`
	// MissingOrdinalsTruncated is true when MissingOrdinals lists only the lowest missing
	// ordinals, to keep the account under the API server's object size limit; Total
	// minus Covered is the number missing.
	// +optional
	MissingOrdinalsTruncated bool `json:"missingOrdinalsTruncated,omitempty"`
	// CoveredBy says, for shards covered only through a repair assignment, which identity
	// covered them: the lowest ordinals.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	CoveredBy []ShardCoverage `json:"coveredBy,omitempty"`
	// CoveredByDropped counts the shards covered only through a repair assignment that
	// CoveredBy does not name.
	// +optional
	CoveredByDropped int32 `json:"coveredByDropped,omitempty"`
}

// ShardCoverage records the identity that covered a shard.
type ShardCoverage struct {
	// Shard name.
	Shard string `json:"shard"`
	// Target is the key of the target whose index covered the shard.
	Target string `json:"target"`
	// Index is the completion index that covered the shard.
	Index int32 `json:"index"`
}

// ResultSummary counts result rejections and keeps a bounded sample of them; per-shard
// results of large batches live outside the account object.
type ResultSummary struct {
	// Recorded counts the results the account holds in its ShardResults chunks, accepted
	// or not. Once it is above 0, spec.acceptance.rule may no longer change: the results
	// were judged under the rule, and a verdict stands only on the spec's rule.
	// +optional
	Recorded int32 `json:"recorded,omitempty"`
	// Rejected counts results that were not accepted.
	// +optional
	Rejected int32 `json:"rejected,omitempty"`
	// Conflicts counts later results for an accepted shard that disagree with it (other digest).
	// +optional
	Conflicts int32 `json:"conflicts,omitempty"`
	// Missing counts covered shards whose result can no longer arrive: their identity
	// completed the index and terminated (or its Job was deleted), no result was recorded
	// and no pod of the index is left to report one (reason MissingResult). A repair
	// re-runs them.
	// +optional
	Missing int32 `json:"missing,omitempty"`
	// MissingOrdinals are the ordinals of those shards, interval format.
	// +optional
	MissingOrdinals string `json:"missingOrdinals,omitempty"`
	// RejectedOrdinals are the ordinals of shards with a rejected result, no accepted one
	// and no identity left that may still report one, interval format: their identity
	// completed, so a repair re-runs them. A shard whose repair may still report is
	// pending instead.
	// +optional
	RejectedOrdinals string `json:"rejectedOrdinals,omitempty"`
	// OrdinalsTruncated is true when MissingOrdinals or RejectedOrdinals list only their
	// lowest ordinals, to keep the status within its index budget.
	// +optional
	OrdinalsTruncated bool `json:"ordinalsTruncated,omitempty"`
	// Rejections is a bounded sample of rejected or conflicting results, newest last.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Rejections []ResultRejection `json:"rejections,omitempty"`
	// IgnoredChunks counts the ShardResults chunks labelled for the account that the
	// controller did not record (unsigned, signed with another key, changed after it
	// signed them, or not owned by the account): their results are not counted. Each is
	// reported once by an UnrecordedResultsIgnored Warning event.
	// +optional
	IgnoredChunks int32 `json:"ignoredChunks,omitempty"`
}

// ResultRejection records one result that was not accepted, and why.
type ResultRejection struct {
	// Pod that reported the result.
	Pod string `json:"pod"`
	// Target key of the pod's Job.
	Target string `json:"target"`
	// Index is the pod's completion index.
	Index int32 `json:"index"`
	// Shard the result claimed, if it could be read.
	// +optional
	Shard string `json:"shard,omitempty"`
	// Reason is a CamelCase reason: Malformed, ForgedClaim, RevisionMismatch, Conflict, CriterionNotMet, ...
	Reason string `json:"reason"`
	// Message says what was wrong in words.
	Message string `json:"message"`
}

// BatchAccount joins Kueue-admitted Indexed Jobs, JobSets and TrainJobs to a batch's
// declared shards and publishes whether the batch was processed and accepted.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ba;bacct,categories=batchledger
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.shards.progress`,description="Percent of shards accepted (results required) or covered"
// +kubebuilder:printcolumn:name="Covered",type=integer,JSONPath=`.status.shards.covered`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.shards.total`
// +kubebuilder:printcolumn:name="Accepted",type=integer,JSONPath=`.status.shards.accepted`
// +kubebuilder:printcolumn:name="Missing",type=string,JSONPath=`.status.shards.missing`,priority=1
// +kubebuilder:printcolumn:name="Verdict",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="(has(self.spec.acceptance) && has(self.spec.acceptance.rule)) == (has(oldSelf.spec.acceptance) && has(oldSelf.spec.acceptance.rule)) && (!has(self.spec.acceptance) || !has(self.spec.acceptance.rule) || self.spec.acceptance.rule == oldSelf.spec.acceptance.rule) || oldSelf.?status.?results.?recorded.orValue(0) == 0",message="spec.acceptance.rule cannot change once results were judged under it (status.results.recorded > 0): a verdict stands only on the rule that judged it. Keep the rule, or create a new BatchAccount with the new rule naming the same Jobs: it reads the results of the pods that still exist, and kubectl batchledger repair re-runs the shards whose pods are gone",reason=FieldValueForbidden,fieldPath=".spec.acceptance.rule"
type BatchAccount struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BatchAccountSpec   `json:"spec,omitempty"`
	Status BatchAccountStatus `json:"status,omitempty"`
}

// BatchAccountList is a list of BatchAccounts.
//
// +kubebuilder:object:root=true
type BatchAccountList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BatchAccount `json:"items"`
}

func init() {
	register(&BatchAccount{}, &BatchAccountList{})
}
