package v1alpha1

import "k8s.io/apimachinery/pkg/types"

// Annotations of the short form: on a Job, JobSet or TrainJob they declare a batch, and
// the controller creates the BatchAccount of the same name. The account is not owned by
// the object: a ledger outlives the Jobs it describes (TTL, cleanup), so deleting the Job
// keeps the account and its results; delete the account when its record is no longer
// needed (LabelShortFormOf finds the accounts made from short forms). Indexes map onto
// shards in order; for a JobSet, child Job i of the replicatedJob takes the i-th block.
const (
	AnnotationShards        = "batchledger.dev/shards"         // "A,B,C,D"
	AnnotationShardCount    = "batchledger.dev/shard-count"    // "100000"
	AnnotationShardPrefix   = "batchledger.dev/shard-prefix"   // "shard-"
	AnnotationInputRev      = "batchledger.dev/input-revision" // required
	AnnotationModelRev      = "batchledger.dev/model-revision" // required
	AnnotationReplicatedJob = "batchledger.dev/replicated-job" // JobSet (required), TrainJob (default "node")
	AnnotationRequire       = "batchledger.dev/require-results"
	AnnotationRule          = "batchledger.dev/acceptance-rule" // only with AnnotationRequire "true"
	// LabelShortFormOf on a BatchAccount the controller created from a short form names
	// the kind of object that declared it ("Job", "JobSet" or "TrainJob"); the name is
	// the account's.
	LabelShortFormOf = "batchledger.dev/short-form-of"
)

// AnnotationShortFormCreated is set by the controller on a Job, JobSet or TrainJob
// whose short form it created the account of (or found that account made from it):
// the object's own UID, so that a copy of its manifest, a new object, carries none that
// counts. An account so created and deleted since is not created again for that object:
// deleting it is what its user asked. Removing the annotation asks for it again.
const AnnotationShortFormCreated = "batchledger.dev/short-form-created"

// AnnotationResultContainer on a worker pod (set it in the Job's pod template) names the
// container whose termination message carries the result, when the account's
// spec.acceptance.resultContainer names none.
const AnnotationResultContainer = "batchledger.dev/result-container"

// Annotations on a repair Job (kubectl batchledger repair), pointing back at what it repairs.
const (
	// AnnotationRepairFor names the BatchAccount the repair Job was created for.
	AnnotationRepairFor = "batchledger.dev/repair-for"
	// AnnotationRepairOf names the original Job whose identities could not complete.
	AnnotationRepairOf = "batchledger.dev/repair-of"
	// AnnotationRepairShards names the repaired shards compactly, in index order.
	AnnotationRepairShards = "batchledger.dev/repair-shards"
)

// Annotations the pod webhook sets on a new index pod of a Job a BatchAccount names (or a
// short form declares): the assignment the account makes for the pod's (Job, completion
// index), as of the pod's creation, so that the worker is told its shard through the
// downward API instead of deriving it from a copied list. The revisions reuse the short
// form's annotation names (AnnotationInputRev, AnnotationModelRev): on a pod they are
// the revisions its result must report.
const (
	// AnnotationShard is the shard assigned to the pod's (Job, completion index).
	AnnotationShard = "batchledger.dev/shard"
	// AnnotationAccount names the BatchAccount(s) making the assignment, comma-separated
	// when several agree.
	AnnotationAccount = "batchledger.dev/account"
)

// AnnotationIndexPod marks a pod Kubernetes' Job controller created for a Job's
// completion index: the pod webhooks write it, as IndexPodMark of the pod's controlling
// Job and its completion index, only on a pod whose creator is the Job controller, and
// remove one any other creator wrote. A result is read only from a pod whose mark still
// names its Job and index: anyone with pod rights may put a Job's ownerReference and an
// index on a pod of their own, and the index-pod admission policy keeps anyone from
// writing the mark but through the Job controller's creation.
const AnnotationIndexPod = "batchledger.dev/index-pod"

// IndexPodMark is the value of AnnotationIndexPod on the pod the Job of UID job created
// for completion index index (the pod's batch.kubernetes.io/job-completion-index
// annotation, as written).
func IndexPodMark(job types.UID, index string) string { return string(job) + "/" + index }
