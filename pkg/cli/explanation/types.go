// Package explanation is the plugin's model of a batch account: Explanation, the
// versioned kind `explain -o json|yaml` prints (cli.batchledger.dev/v1alpha1), and
// BuildExplanation, which derives it from the account's spec, status and recorded
// results alone. explain prints it; watch and repair read the same derivation (what each
// missing shard waits for, what is still needed), so the verbs cannot disagree.
package explanation

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// Explanation is a whole batch account as `explain -o json|yaml` prints it: the named
// Jobs with their revisions and success policy, the required and completed populations,
// the missing shards and the identity each waits for, attempts versus indexes, the
// observation points, the Kueue Workloads, the accepted results per shard, rejections,
// history and what is still needed for acceptance. Lists that grow with the batch are
// bounded (see the *More counts); timestamps are RFC3339 in UTC.
//
// It is a versioned kind of its own, ExplanationGroupVersion (cli.batchledger.dev/v1alpha1)
// kind Explanation: the plugin prints it, no API server serves it (as
// client.authentication.k8s.io's ExecCredential), and scripts can check apiVersion
// before they read it. Fields are added, not retyped or removed, within a version; while
// the kind is alpha a rename is listed in CHANGELOG.md.
type Explanation struct {
	metav1.TypeMeta `json:",inline"`
	// Account is the BatchAccount's name.
	Account string `json:"account"`
	// Namespace of the account and of all its targets.
	Namespace string `json:"namespace"`
	// Generation is the account's spec generation; ObservedGeneration the one its status
	// was computed from. They differ while the controller has not caught up.
	Generation         int64 `json:"generation"`
	ObservedGeneration int64 `json:"observedGeneration"`
	// Revisions are the input and model revision every shard must be processed under.
	Revisions Revisions `json:"revisions"`
	// Release is Revisions under its former key.
	//
	// Deprecated: read Revisions; Release is written with the same values until a later
	// minor release removes it.
	Release *Revisions `json:"release,omitempty"`
	// Verdict is the account's Accepted condition; VerdictPending, not accepted, while the
	// status judges an older spec generation.
	Verdict Verdict `json:"verdict"`
	// Jobs are the assignment targets: the named Jobs (or JobSet children).
	Jobs []JobExplanation `json:"jobs"`
	// Shards are coverage and acceptance over the declared shards.
	Shards ShardsExplanation `json:"shards"`
	// Results are the accepted shard results and the rejections.
	Results ResultsExplanation `json:"results"`
	// History lists identities superseded by a new one (a Job recreated under its name).
	History []HistoryEntry `json:"history,omitempty"`
	// Conditions are the account's conditions, in the order they build the verdict.
	Conditions []ConditionEntry `json:"conditions"`
	// StillNeeded says, derived from the conditions, what must happen before the batch is
	// Accepted; empty when it is.
	StillNeeded []string `json:"stillNeeded,omitempty"`
}

// ExplanationList is what `-o json|yaml` prints when an object concerns several
// accounts: kind ExplanationList of ExplanationGroupVersion.
type ExplanationList struct {
	metav1.TypeMeta `json:",inline"`
	Items           []Explanation `json:"items"`
}

// ExplanationGroupVersion is the group and version of the Explanation kinds: a group of
// the plugin's own, apart from batchledger.dev whose kinds the API server serves.
var ExplanationGroupVersion = schema.GroupVersion{Group: "cli.batchledger.dev", Version: "v1alpha1"}

// Kinds of ExplanationGroupVersion.
const (
	KindExplanation     = "Explanation"
	KindExplanationList = "ExplanationList"
)

// NewExplanationList lists exs, each with its kind, under kind ExplanationList.
func NewExplanationList(exs []Explanation) *ExplanationList {
	l := &ExplanationList{TypeMeta: metav1.TypeMeta{APIVersion: ExplanationGroupVersion.String(), Kind: KindExplanationList}, Items: exs}
	for i := range l.Items {
		l.Items[i].TypeMeta = metav1.TypeMeta{APIVersion: ExplanationGroupVersion.String(), Kind: KindExplanation}
	}
	return l
}

// DeepCopyObject implements runtime.Object, so that kubectl's printers print it. A
// print-only kind is copied through JSON: its JSON is all there is of it.
func (e *Explanation) DeepCopyObject() runtime.Object { return jsonCopy(e) }

// DeepCopyObject implements runtime.Object.
func (l *ExplanationList) DeepCopyObject() runtime.Object { return jsonCopy(l) }

func jsonCopy[T any, P interface {
	*T
	runtime.Object
}](in P) runtime.Object {
	b, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("copying a %T: %v", in, err))
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("copying a %T: %v", in, err))
	}
	return P(&out)
}

// Revisions are the input and model revision an account is about.
type Revisions struct {
	InputRevision string `json:"inputRevision"`
	ModelRevision string `json:"modelRevision"`
}

// Verdict is the batch verdict.
type Verdict struct {
	// Accepted is true only when the Accepted condition is True.
	Accepted bool `json:"accepted"`
	// Reason of the Accepted condition ("Unknown" before the controller wrote one).
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// JobExplanation is one assignment target as observed.
type JobExplanation struct {
	// Target is the target key: job/<name> or jobset/<name>/<replicatedJob>/<jobIndex>.
	Target string `json:"target"`
	// Description is the target in words: "job j", "jobset train workers[0]".
	Description string `json:"description"`
	// Job is the observed Job's name (a JobSet child's own name).
	Job string `json:"job,omitempty"`
	// UID of the observed Job: with a completion index, a completion identity.
	UID string `json:"uid,omitempty"`
	// RestartAttempt is the JobSet restart attempt of a child Job.
	RestartAttempt int32 `json:"restartAttempt"`
	// Found is false while the Job does not exist.
	Found bool `json:"found"`
	// Deleted is true when the Job was deleted after the controller observed it: the
	// fields below are its record, which still counts (coverage, results, verdict).
	Deleted bool `json:"deleted,omitempty"`
	// DeletedAt is when the controller first observed the Job missing.
	DeletedAt string `json:"deletedAt,omitempty"`
	// Repair is true when the target is only a repair (follow-up) identity.
	Repair bool `json:"repair,omitempty"`
	// Assigned lists the target's assignments: "indexes 0-3 → shards A, B, C, D".
	Assigned []string `json:"assigned"`
	// Completions is the Job's spec.completions.
	Completions int32 `json:"completions"`
	// SuccessPolicy is the Job's own success criterion in words.
	SuccessPolicy string `json:"successPolicy"`
	// PodScope says whether the Job's pods are held for their results, in words.
	PodScope string `json:"podScope,omitempty"`
	// Required is the index population the Job's own criterion requires.
	Required IndexSet `json:"required"`
	// Completed is the Job controller's status.completedIndexes.
	Completed IndexSet `json:"completed"`
	// Failed is the Job controller's status.failedIndexes.
	Failed IndexSet `json:"failed"`
	// NotCompleted are required indexes not completed.
	NotCompleted IndexSet `json:"notCompleted"`
	// Attempts contrasts successful pods with distinct indexes.
	Attempts Attempts `json:"attempts"`
	// Membership is where completedIndexes was read: the Job's resourceVersion.
	Membership ObservationPoint `json:"membership"`
	// Terminal is the Job's terminal condition and when it was recorded.
	Terminal Terminal `json:"terminal"`
	// Workload is the Kueue Workload the Job runs under.
	Workload *WorkloadExplanation `json:"workload,omitempty"`
	// Admissions are the identity's Kueue admissions, oldest first, each with the
	// indexes, and so the shards, that completed under it: where each shard ran.
	Admissions []AdmissionExplanation `json:"admissions,omitempty"`
	// AdmissionsDropped counts the oldest admissions the account no longer keeps.
	AdmissionsDropped int32 `json:"admissionsDropped,omitempty"`
	// Problems are what is wrong with this target's mapping or observation.
	Problems []string `json:"problems,omitempty"`
}

// AdmissionExplanation is one Kueue admission of an identity.
type AdmissionExplanation struct {
	Workload     string `json:"workload,omitempty"`
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// Cluster is the MultiKueue worker cluster the admission ran on; empty when the
	// Workload ran where it was queued.
	Cluster    string   `json:"cluster,omitempty"`
	Flavors    []string `json:"flavors,omitempty"`
	AdmittedAt string   `json:"admittedAt"`
	EvictedAt  string   `json:"evictedAt,omitempty"`
	// EvictionReason is why Kueue evicted the Workload (e.g. Preempted).
	EvictionReason string `json:"evictionReason,omitempty"`
	// Completed are the indexes that completed under this admission.
	Completed IndexSet `json:"completed"`
	// Shards names the shards those indexes are assigned.
	Shards string `json:"shards,omitempty"`
	// Summary says it in words.
	Summary string `json:"summary"`
}

// IndexSet is a set of completion indexes in the Job controller's interval format, with
// its size.
type IndexSet struct {
	Indexes string `json:"indexes"`
	Count   int    `json:"count"`
}

// Attempts are successful pods versus distinct completed indexes: attempts are not indexes.
type Attempts struct {
	// Successful counts successful pods seen, repeats of an index included.
	Successful int32 `json:"successful"`
	// Indexes counts distinct completed indexes.
	Indexes int `json:"indexes"`
	// Repeated are indexes with more than one successful pod.
	Repeated string `json:"repeated,omitempty"`
	// Summary says it in words: "5 successful attempts over 3 indexes {0,1,2}; repeated: 1,2".
	Summary string `json:"summary"`
}

// ObservationPoint is where an observation was read.
type ObservationPoint struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// Terminal is a Job's terminal observation.
type Terminal struct {
	// Condition is Complete, Failed, or empty while none is recorded.
	Condition string `json:"condition,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// RecordedAt is when the Job controller recorded the condition.
	RecordedAt string `json:"recordedAt,omitempty"`
	// SuccessCriteriaMet is recorded before Complete.
	SuccessCriteriaMet bool `json:"successCriteriaMet,omitempty"`
	// Summary says it in words.
	Summary string `json:"summary"`
}

// WorkloadExplanation is a target's Kueue Workload.
type WorkloadExplanation struct {
	Name         string `json:"name"`
	UID          string `json:"uid,omitempty"`
	Admitted     bool   `json:"admitted"`
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// Cluster is the MultiKueue worker cluster the Workload was dispatched to, and
	// NominatedClusters those it is being dispatched to.
	Cluster           string   `json:"cluster,omitempty"`
	NominatedClusters []string `json:"nominatedClusters,omitempty"`
	Flavors           []string `json:"flavors,omitempty"`
	Evicted           bool     `json:"evicted,omitempty"`
	Finished          bool     `json:"finished,omitempty"`
	// ResourceVersion is where the Workload was read.
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Summary says it in words.
	Summary string `json:"summary"`
}

// ShardsExplanation is coverage and acceptance over the declared shards.
type ShardsExplanation struct {
	// Total is the number of shards declared: the status's count, or the spec's while
	// NotJudged.
	Total    int32 `json:"total"`
	Covered  int32 `json:"covered"`
	Accepted int32 `json:"accepted"`
	// Missing names the missing shards compactly ("D", "s3..s9").
	Missing string `json:"missing,omitempty"`
	// MissingShards are the first missing shards with the identities each waits for.
	MissingShards []MissingShard `json:"missingShards,omitempty"`
	// MissingMore counts missing shards left out of MissingShards.
	MissingMore int `json:"missingMore,omitempty"`
	// MissingUnrecorded counts, of MissingMore, the missing shards the status itself does
	// not name: it lists only the lowest missing ordinals of a batch too large for it, so
	// no --max-rows lists them.
	MissingUnrecorded int `json:"missingUnrecorded,omitempty"`
	// CoveredByRepair are shards covered only by a repair identity, and which one.
	CoveredByRepair []ShardIdentity `json:"coveredByRepair,omitempty"`
	// NotJudged is true while the controller has written no status for the account:
	// nothing is known of coverage, so Covered, Accepted and Missing say nothing.
	NotJudged bool `json:"notJudged,omitempty"`
}

// MissingShard is a shard no identity has covered yet.
type MissingShard struct {
	Shard   string `json:"shard"`
	Ordinal int    `json:"ordinal"`
	// WaitsFor are the identities assigned the shard: the original first, then repairs.
	WaitsFor []Identity `json:"waitsFor"`
}

// Identity is a (Job, completion index) assigned a shard, and whether it can still complete.
type Identity struct {
	Target string `json:"target"`
	Index  int    `json:"index"`
	// Repair is true for an identity of a repair assignment.
	Repair bool `json:"repair,omitempty"`
	// State says where the identity stands: "not completed yet", "index failed", ...
	State string `json:"state"`
	// Final is true when the identity can no longer complete (its Job terminated, or the
	// index failed, or the Job is gone): only a repair can cover the shard then.
	Final bool `json:"final"`
}

// ShardIdentity names the identity that covered a shard.
type ShardIdentity struct {
	Shard  string `json:"shard"`
	Target string `json:"target"`
	Index  int    `json:"index"`
}

// ResultsExplanation is the application-acceptance observation.
type ResultsExplanation struct {
	// Required mirrors spec.acceptance.requireResults.
	Required bool `json:"required"`
	// Rule is the agreed CEL criterion over `result`.
	Rule string `json:"rule,omitempty"`
	// Accepted are the first accepted results per shard, in shard order (bounded).
	Accepted []AcceptedResult `json:"accepted,omitempty"`
	// AcceptedMore counts accepted results left out of Accepted.
	AcceptedMore int `json:"acceptedMore,omitempty"`
	// Rejected and Conflicts are the account's counts.
	Rejected  int32 `json:"rejected"`
	Conflicts int32 `json:"conflicts"`
	// Rejections are the newest rejections the account keeps (bounded).
	Rejections []v1alpha1.ResultRejection `json:"rejections,omitempty"`
	// RejectionsMore counts rejections kept by the account but left out here.
	RejectionsMore int `json:"rejectionsMore,omitempty"`
	// Missing counts covered shards whose result can no longer arrive (MissingResult).
	Missing int32 `json:"missing,omitempty"`
	// MissingShards names them compactly.
	MissingShards string `json:"missingShards,omitempty"`
	// RejectedShards names the shards whose results were all rejected.
	RejectedShards string `json:"rejectedShards,omitempty"`
}

// AcceptedResult is the result that stands for a shard.
type AcceptedResult struct {
	Shard string `json:"shard"`
	// Identity is the (Job, index) that reported it: "job j index 0".
	Identity   string `json:"identity"`
	Pod        string `json:"pod"`
	Digest     string `json:"digest,omitempty"`
	Output     string `json:"output,omitempty"`
	Records    int64  `json:"records,omitempty"`
	Valid      int64  `json:"valid,omitempty"`
	RecordedAt string `json:"recordedAt"`
	// RanOn is the Kueue admission the identity's index completed under: ClusterQueue
	// and flavors.
	RanOn string `json:"ranOn,omitempty"`
	// Cluster is the MultiKueue worker cluster the result was recorded from (the
	// recorded result's cluster); empty for a pod of the account's own cluster.
	Cluster string `json:"cluster,omitempty"`
}

// HistoryEntry is a superseded identity.
type HistoryEntry struct {
	Target           string `json:"target"`
	Job              string `json:"job"`
	UID              string `json:"uid"`
	RestartAttempt   int32  `json:"restartAttempt"`
	CompletedIndexes string `json:"completedIndexes"`
	// Terminal is the superseded identity's terminal condition, if it had one.
	Terminal     string `json:"terminal,omitempty"`
	SupersededAt string `json:"supersededAt"`
}

// ConditionEntry is one account condition.
type ConditionEntry struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Since   string `json:"since,omitempty"`
}
