package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Labels and finalizers of result capture.
const (
	// LabelAccount names the BatchAccount a ShardResults chunk belongs to. Deprecated:
	// an account name may be longer than a label value; chunks are found by
	// LabelAccountUID.
	LabelAccount = "batchledger.dev/account"
	// LabelAccountUID is the UID of the BatchAccount a ShardResults chunk belongs to.
	LabelAccountUID = "batchledger.dev/account-uid"
	// ResultFinalizer holds a succeeded pod of an accounted Job until its reported result
	// is recorded, so that a pod deleted right after it succeeded, while the controller
	// was down, still has its result read (the pattern of the Job controller's
	// batch.kubernetes.io/job-tracking finalizer).
	ResultFinalizer = "batchledger.dev/result-capture"
	// ResultsPerChunk is the span of shard ordinals one ShardResults object covers, so a
	// 100,000-shard batch spreads its results over 400 objects far below etcd's limit.
	ResultsPerChunk = 256
)

// The opt-in scope. batchledger touches only pods whose Job's pod template carries
// LabelScope: the pod webhook (failurePolicy Fail) sees only pods labelled ScopeResults,
// and the controller caches only pods that carry the label at all. Users never set it by
// hand: the Job and JobSet webhook stamps it at creation when an account names the Job
// (or the Job carries the short-form annotations), and the controller stamps it onto a
// suspended Job that never started when its account comes later (or raises it on one
// Kueue preempted, whose earlier pods keep theirs).
const (
	// LabelScope on a Job's pod template (and so on its pods) opts the Job's pods into
	// batchledger's scope; its value says how.
	LabelScope = "batchledger.dev/scope"
	// ScopeResults: an account naming the Job requires results, so its succeeded pods are
	// held by the result-capture finalizer until their result is recorded ("nothing lost").
	ScopeResults = "results"
	// ScopeCoverage: accounts naming the Job count coverage and attempts only; its pods are
	// never held.
	ScopeCoverage = "coverage"
)

// RecordedResult is one reported result as captured from a pod, with the verdict of the
// decoder and the acceptance rule at capture time. Whether it stands (assignment,
// revisions, first-result-wins) is decided by the account.
type RecordedResult struct {
	// Ordinal is the shard ordinal assigned to the pod's (Job, index); -1 when none is.
	Ordinal int32 `json:"ordinal"`
	// Shard is the shard the result claims.
	// +optional
	Shard string `json:"shard,omitempty"`
	// Target is the account target key of the pod's Job.
	Target string `json:"target"`
	// JobUID and Index are the pod's completion identity.
	JobUID types.UID `json:"jobUID"`
	// Index is the pod's completion index.
	Index int32 `json:"index"`
	// Pod is the name of the pod that reported the result.
	Pod string `json:"pod"`
	// PodUID is the UID of that pod.
	PodUID types.UID `json:"podUID"`
	// Cluster is the MultiKueue worker cluster the pod ran in, for a result the manager
	// copied from that worker's WorkerResult; empty for a pod of this cluster.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// InputRevision the result claims.
	// +optional
	InputRevision string `json:"inputRevision,omitempty"`
	// ModelRevision the result claims.
	// +optional
	ModelRevision string `json:"modelRevision,omitempty"`
	// Output is where the worker wrote the shard's output.
	// +optional
	Output string `json:"output,omitempty"`
	// Digest of the output.
	// +optional
	Digest string `json:"digest,omitempty"`
	// Records processed.
	// +optional
	Records int64 `json:"records,omitempty"`
	// Valid records.
	// +optional
	Valid int64 `json:"valid,omitempty"`
	// RejectReason is set when the message could not be decoded or failed the rule.
	// +optional
	RejectReason string `json:"rejectReason,omitempty"`
	// RejectMessage says why, in words.
	// +optional
	RejectMessage string `json:"rejectMessage,omitempty"`
	// RecordedAt is when the result was captured.
	RecordedAt metav1.Time `json:"recordedAt"`
	// Sequence orders the results of one account: the controller assigns the account's
	// highest sequence plus one when it records a result, and results are judged in this
	// order (the first accepted result of a shard stands). Results recorded before the
	// field existed have 0 and are ordered among themselves by RecordedAt, then Pod.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Sequence int64 `json:"sequence,omitempty"`
	// RuleDigest identifies what judged the result at capture: spec.acceptance.rule and
	// spec.acceptance.resultContainer (ResultDigest). A result judged under a rule, or
	// read from a container, that is no longer the spec's never stands (RuleChanged).
	// The digest of the rule alone (RuleDigest) marks a result recorded before digests
	// covered the container, and an empty one a result recorded before the field
	// existed: both are taken as judged under the spec.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	RuleDigest string `json:"ruleDigest,omitempty"`
}

// ShardResults holds the captured results of one span of shard ordinals of an account
// (ResultsPerChunk of them), owned by the account. Results live here, not in the account
// status, so that a batch of 100,000 shards never overflows one object.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=batchledger
// +kubebuilder:printcolumn:name="Account",type=string,JSONPath=`.account`
// +kubebuilder:printcolumn:name="First",type=integer,JSONPath=`.firstOrdinal`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ShardResults struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Account is the name of the BatchAccount the results belong to.
	Account string `json:"account"`
	// AccountUID is the UID of that BatchAccount: a chunk belongs to one account object,
	// never to a later account of the same name (its label LabelAccountUID says the same).
	// +optional
	AccountUID types.UID `json:"accountUID,omitempty"`
	// FirstOrdinal is the first shard ordinal of the chunk's span; -1 for results of
	// identities that are assigned no shard.
	FirstOrdinal int32 `json:"firstOrdinal"`
	// Results in capture order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4096
	Results []RecordedResult `json:"results,omitempty"`
	// DroppedPods are pods whose result was not kept because their shard already had
	// MaxResultsPerShard results from their Job identity (or the account
	// MaxUnassignedResults results of
	// unassigned identities): retries beyond that are counted, not stored, so that a
	// retry-heavy batch never grows a chunk past the API server's request limit. Their
	// pods are released like recorded ones.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16384
	DroppedPods []types.UID `json:"droppedPods,omitempty"`
}

// ShardResultsList is a list of ShardResults.
//
// +kubebuilder:object:root=true
type ShardResultsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ShardResults `json:"items"`
}

func init() {
	register(&ShardResults{}, &ShardResultsList{})
}
