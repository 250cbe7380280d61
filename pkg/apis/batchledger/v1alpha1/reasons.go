package v1alpha1

// Reasons of the BatchAccount conditions. A condition's reason says why it has its
// status in one CamelCase word, so that a person, an alert or a test can tell the cases
// apart; the message says the rest.
const (
	// ReasonAllShardsCovered: ShardsCovered is True.
	ReasonAllShardsCovered = "AllShardsCovered"
	// ReasonShardsMissing: some shards have no completed index of a current identity yet.
	ReasonShardsMissing = "ShardsMissing"
	// ReasonAssignmentInvalid: the mapping is invalid (AssignmentValid is False), so no
	// verdict that depends on it can be True.
	ReasonAssignmentInvalid = "AssignmentInvalid"
	// ReasonTargetsNotFound: a target's Job does not exist (yet).
	ReasonTargetsNotFound = "TargetsNotFound"
	// ReasonAPINotServed: a target's kind needs an API the cluster does not serve (JobSet
	// not installed), so the target cannot exist until that API is installed.
	ReasonAPINotServed = "APINotServed"
	// ReasonAwaitingTermination: a target's Job has not reached Complete or Failed.
	ReasonAwaitingTermination = "AwaitingTermination"
	// ReasonComplete: every target's Job is Complete.
	ReasonComplete = "Complete"
	// ReasonTargetFailed: a target's Job Failed.
	ReasonTargetFailed = "TargetFailed"
	// ReasonResultsPending: covered shards whose result has not been recorded yet.
	ReasonResultsPending = "ResultsPending"
	// ReasonResultRejected: a shard's result was rejected and no accepted result stands.
	ReasonResultRejected = "ResultRejected"
	// ReasonResultsNotRequired: the account does not require results.
	ReasonResultsNotRequired = "ResultsNotRequired"
	// ReasonAllResultsAccepted: ResultsAccepted is True.
	ReasonAllResultsAccepted = "AllResultsAccepted"
	// ReasonAccepted: the batch verdict Accepted is True.
	ReasonAccepted = "Accepted"
	// ReasonAdmitted: Kueue admitted every target's Workload.
	ReasonAdmitted = "Admitted"
	// ReasonPending: a target's Workload waits for admission.
	ReasonPending = "Pending"
	// ReasonEvicted: a target's Workload was evicted.
	ReasonEvicted = "Evicted"
	// ReasonFinished: every target's Job ran to its end under its admission (its Job is
	// terminal; Kueue marks the Workload Finished after that).
	ReasonFinished = "Finished"
	// ReasonNoWorkload: a target runs without a Kueue Workload.
	ReasonNoWorkload = "NoWorkload"
	// ReasonTargetDeleted: a target's Job was deleted before it terminated; it can no
	// longer complete, and its uncovered shards need a repair.
	ReasonTargetDeleted = "TargetDeleted"
	// ReasonMissingResult: covered shards whose result can no longer arrive (the identity
	// terminated or was deleted, no result was recorded, no pod is left that can report one).
	ReasonMissingResult = "MissingResult"
	// ReasonRuleInvalid: spec.acceptance.rule does not compile in this controller, so
	// results are kept but not judged.
	ReasonRuleInvalid = "RuleInvalid"
	// ReasonVerdictPending: on a Workload, an account naming its Jobs has not judged its
	// current spec yet (new, or its spec changed since its status was written), so the
	// Workload's condition cannot be True for it.
	ReasonVerdictPending = "VerdictPending"
)

// Reasons of the AssignmentValid condition. Each way a mapping can fail has its own
// reason so that a person (and a test) can tell them apart.
const (
	ReasonValid              = "Valid"
	ReasonNoShards           = "NoShards"
	ReasonDuplicateShardName = "DuplicateShardName"
	ReasonUnknownShard       = "UnknownShard"
	ReasonMalformedIndexes   = "MalformedIndexes"
	ReasonShardCountMismatch = "ShardCountMismatch"
	ReasonDuplicateShard     = "DuplicateShard"
	ReasonUnassignedShard    = "UnassignedShard"
	// ReasonDuplicateIndex: one completion identity (Job UID, index) is assigned twice:
	// the same target's index by two assignments (found by Compile), or one Job reached
	// by two targets that spell it differently, e.g. by its name and as a JobSet child
	// (found once the Job is observed; its identities then count for neither shard).
	ReasonDuplicateIndex       = "DuplicateIndex"
	ReasonInvalidTarget        = "InvalidTarget"
	ReasonCrossNamespaceTarget = "CrossNamespaceTarget"
	ReasonRepairOfUnassigned   = "RepairOfUnassignedShard"
	ReasonUnmappedIndexes      = "UnmappedIndexes"
	ReasonIndexOutOfRange      = "IndexOutOfRange"
	ReasonNotIndexed           = "NotIndexedJob"
)

// Reasons a reported result is rejected: status.results.rejections[].reason and the
// recorded result's reject reason. The first five are decided on the message alone (the
// message format repeats them, since it links no Kubernetes code: see pkg/result), the
// next two by the acceptance rule, the rest by the account against its assignment.
const (
	// RejectionMissingResult: the result container left no termination message.
	RejectionMissingResult = "MissingResult"
	// RejectionMalformed: the message is not a well-formed result (bad JSON, wrong field
	// types, impossible counts).
	RejectionMalformed = "Malformed"
	// RejectionOversized: the message reaches the kubelet's termination-message limit and
	// may have been truncated.
	RejectionOversized = "Oversized"
	// RejectionUnknownSchemaVersion: the message declares a schema version this
	// controller does not understand.
	RejectionUnknownSchemaVersion = "UnknownSchemaVersion"
	// RejectionMissingField: a required field is absent or empty.
	RejectionMissingField = "MissingField"
	// RejectionCriterionNotMet: the account's acceptance rule evaluated to false.
	RejectionCriterionNotMet = "CriterionNotMet"
	// RejectionCriterionError: the acceptance rule could not be evaluated on the result.
	RejectionCriterionError = "CriterionError"
	// RejectionStaleIdentity: the result comes from a Job identity the account no longer
	// follows (a replaced Job, a superseded JobSet restart attempt). It takes the place of
	// any other verdict on the result, which then neither covers nor rejects the shard.
	RejectionStaleIdentity = "StaleIdentity"
	// RejectionUnassignedIdentity: the reporting (Job, index) is assigned no shard.
	RejectionUnassignedIdentity = "UnassignedIdentity"
	// RejectionForgedClaim: the result claims a shard other than the one assigned to its
	// (Job, index).
	RejectionForgedClaim = "ForgedClaim"
	// RejectionRevisionMismatch: the result's input or model revision is not the account's.
	RejectionRevisionMismatch = "RevisionMismatch"
	// RejectionConflict: the shard already has an accepted result with another digest.
	RejectionConflict = "Conflict"
	// RejectionRuleChanged: the result was judged under an acceptance rule, or read from
	// a result container, that is no longer the spec's; it never stands (its pod, while
	// held, is read again; a repair re-runs its shard under the spec's rule).
	RejectionRuleChanged = "RuleChanged"
	// RejectionDuplicateIndex: the reporting (Job UID, index) is claimed by two
	// assignment targets that name the same Job (AssignmentValid DuplicateIndex), so its
	// result stands for neither shard.
	RejectionDuplicateIndex = "DuplicateIndex"
)

// Reasons of the events batchledger emits besides verdict changes (whose reasons are
// chosen in pkg/controller/events.go).
const (
	// EventReasonResultNotRecorded: a succeeded pod was released after holding it the
	// maximum time for a result that was never recorded.
	EventReasonResultNotRecorded = "ResultNotRecorded"
	// EventReasonInvalidShortForm: the short-form annotations of a Job or JobSet do not
	// declare a valid account, so none was created (and its pods were given no scope);
	// the note names the annotation to fix and what is wrong with it.
	EventReasonInvalidShortForm = "InvalidShortForm"
	// EventReasonShortFormRejected: the API server refused to create the account a short
	// form declares; the note carries its message.
	EventReasonShortFormRejected = "ShortFormRejected"
	// EventReasonShortFormMismatch: an account of the short form's name exists and its
	// spec is not what the annotations declare. It was left unchanged; the note names the
	// fields that differ and the way forward.
	EventReasonShortFormMismatch = "ShortFormMismatch"
	// EventReasonShortFormAlreadyAccepted: the account of the short form's name is what
	// the annotations declare, but it reached its final verdict (Accepted) on an earlier
	// object of the name and follows nothing of this one, which is not accounted.
	EventReasonShortFormAlreadyAccepted = "ShortFormAlreadyAccepted"
	// EventReasonLeftResultsScope: a pod batchledger held lost its LabelScope=ScopeResults
	// label (removed or changed by someone else), which took it out of the controller's
	// sight; it was released, and its result may not be recorded.
	EventReasonLeftResultsScope = "LeftResultsScope"
	// EventReasonUnrecordedResultsIgnored: a ShardResults chunk labelled for the account
	// was not written by the manager (no signature of its key, a content changed after it
	// signed, or an owner that is not the account): its results are not counted and
	// capture never appends to it. Emitted once per version of the chunk.
	EventReasonUnrecordedResultsIgnored = "UnrecordedResultsIgnored"
	// EventReasonRecordNotWritten: a Job was released (RecordFinalizer) before its
	// accounts recorded its end: held the maximum time after its deletion started, or its
	// scope label taken off.
	EventReasonRecordNotWritten = "RecordNotWritten"
)

// expectedWaits are the reasons a condition is False for while a batch makes normal
// progress. TargetsNotFound is one: an account that requires results is created before
// its Jobs on purpose (so that every pod is held).
var expectedWaits = map[string]bool{
	ReasonTargetsNotFound:     true,
	ReasonAwaitingTermination: true,
	ReasonResultsPending:      true,
	ReasonShardsMissing:       true,
	ReasonPending:             true,
}

// ExpectedWait reports whether a condition False for reason is a wait of a batch making
// normal progress rather than a problem: no cause for a Warning, and nothing a reader of
// the account's Workloads must learn at once.
func ExpectedWait(reason string) bool {
	return expectedWaits[reason]
}
