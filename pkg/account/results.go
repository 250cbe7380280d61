package account

import (
	"cmp"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
)

// Reasons a reported result is not accepted.
const (
	ResultMalformed        = "Malformed"
	ResultStaleIdentity    = "StaleIdentity"
	ResultUnassigned       = "UnassignedIdentity"
	ResultForgedClaim      = "ForgedClaim"
	ResultRevisionMismatch = "RevisionMismatch"
	ResultCriterionNotMet  = "CriterionNotMet"
	ResultConflict         = "Conflict"
)

// Result is one shard result a worker reported, already decoded and evaluated against
// the acceptance rule by the result package. The account decides whether it stands.
type Result struct {
	// Target key and Job UID of the reporting pod: with Index, its completion identity.
	Target string
	JobUID types.UID
	Index  int
	// Pod that reported the result.
	Pod    string
	PodUID types.UID
	// Claim: what the result says it is.
	Shard         string
	InputRevision string
	ModelRevision string
	Digest        string
	// Output, Records and Valid are what the result reports of the shard's output; kept
	// with the result, not judged by the account.
	Output         string
	Records, Valid int64
	// RecordedAt is when the result was captured, for results read back from records.
	RecordedAt metav1.Time
	// RejectReason and RejectMessage are set when the result could not be decoded or
	// did not meet the acceptance rule.
	RejectReason  string
	RejectMessage string
}

type resultsState struct {
	accepted indexset.Set
	// standing maps a shard ordinal to the position in the input of its standing result.
	standing map[int]int
	summary  v1alpha1.ResultSummary
	// pendingRejections explain rejections of shards that have no accepted result yet.
	pendingRejections []string
}

// judgeResults verifies each result against its identity's assignment and the account's
// revisions. The first accepted result of a shard stands; a later one with another
// digest is a conflict, recorded, never silently dropped.
func judgeResults(m *Mapping, states []*targetState, in Input) resultsState {
	current := map[string]types.UID{}
	for _, ts := range states {
		if ts.found {
			current[ts.key] = ts.obs.Job.UID
		}
	}
	return judge(m, in.Spec, current, in.Results)
}

// StandingResults returns, per shard ordinal, the result that stands for the shard: the
// first result, in recording order, of the shard's current identity (current maps target
// keys to Job UIDs) that claims the assigned shard on the account's revisions and passed
// decoding and the rule. It is the rule Compute applies, for readers of recorded results.
func StandingResults(m *Mapping, spec *v1alpha1.BatchAccountSpec, current map[string]types.UID, results []Result) map[int]Result {
	rs := judge(m, spec, current, results)
	out := make(map[int]Result, len(rs.standing))
	for o, i := range rs.standing {
		out[o] = results[i]
	}
	return out
}

func judge(m *Mapping, spec *v1alpha1.BatchAccountSpec, current map[string]types.UID, results []Result) resultsState {
	rs := resultsState{standing: map[int]int{}}
	digests := map[int]string{}
	type rejection struct {
		ordinal int
		text    string
	}
	var rejected []rejection
	var acceptedOrdinals []int
	reject := func(r Result, ordinal int, reason, msg string) {
		rs.summary.Rejected++
		if reason == ResultConflict {
			rs.summary.Rejected--
			rs.summary.Conflicts++
		}
		rec := v1alpha1.ResultRejection{Pod: r.Pod, Target: r.Target, Index: int32(r.Index), Shard: r.Shard, Reason: reason, Message: msg}
		rs.summary.Rejections = append(rs.summary.Rejections, rec)
		if n := len(rs.summary.Rejections); n > maxRejections {
			rs.summary.Rejections = rs.summary.Rejections[n-maxRejections:]
		}
		if ordinal >= 0 {
			rejected = append(rejected, rejection{ordinal, fmt.Sprintf("%s (%s): %s", m.Shards.Name(ordinal), reason, msg)})
		}
	}
	for i, r := range results {
		who := fmt.Sprintf("pod %s (%s index %d)", r.Pod, DescribeTarget(r.Target), r.Index)
		ordinal, assigned := m.ShardOf(r.Target, r.Index)
		if !assigned {
			reject(r, -1, ResultUnassigned, who+" is assigned no shard")
			continue
		}
		assignedName := m.Shards.Name(ordinal)
		switch {
		case r.RejectReason != "":
			reject(r, ordinal, r.RejectReason, who+": "+r.RejectMessage)
		case current[r.Target] != r.JobUID:
			reject(r, -1, ResultStaleIdentity, fmt.Sprintf("%s belongs to Job UID %s, not the target's current identity", who, r.JobUID))
		case r.Shard != assignedName:
			reject(r, ordinal, ResultForgedClaim, fmt.Sprintf("%s claims shard %q but its identity is assigned shard %s", who, r.Shard, assignedName))
		case r.InputRevision != spec.InputRevision:
			reject(r, ordinal, ResultRevisionMismatch, fmt.Sprintf("shard %s result of %s has inputRevision %q, the account requires %q", assignedName, who, r.InputRevision, spec.InputRevision))
		case r.ModelRevision != spec.ModelRevision:
			reject(r, ordinal, ResultRevisionMismatch, fmt.Sprintf("shard %s result of %s has modelRevision %q, the account requires %q", assignedName, who, r.ModelRevision, spec.ModelRevision))
		default:
			if first, ok := digests[ordinal]; ok {
				if first != r.Digest {
					reject(r, -1, ResultConflict, fmt.Sprintf("shard %s already has an accepted result with digest %q; %s reports digest %q", assignedName, first, who, r.Digest))
				}
				continue
			}
			digests[ordinal] = r.Digest
			rs.standing[ordinal] = i
			acceptedOrdinals = append(acceptedOrdinals, ordinal)
		}
	}
	rs.accepted = indexset.Of(acceptedOrdinals...)
	for _, rj := range rejected {
		if _, ok := digests[rj.ordinal]; !ok && len(rs.pendingRejections) < messageRunsLimit {
			rs.pendingRejections = append(rs.pendingRejections, rj.text)
		}
	}
	return rs
}

// FromRecorded is the Result a recorded (captured) result stands for.
func FromRecorded(r v1alpha1.RecordedResult) Result {
	return Result{
		Target: r.Target, JobUID: r.JobUID, Index: int(r.Index), Pod: r.Pod, PodUID: r.PodUID,
		Shard: r.Shard, InputRevision: r.InputRevision, ModelRevision: r.ModelRevision, Digest: r.Digest,
		Output: r.Output, Records: r.Records, Valid: r.Valid,
		RejectReason: r.RejectReason, RejectMessage: r.RejectMessage, RecordedAt: r.RecordedAt,
	}
}

// Recorded is the record of a result captured at at for shard ordinal (-1: unassigned).
func (r Result) Recorded(ordinal int, at metav1.Time) v1alpha1.RecordedResult {
	return v1alpha1.RecordedResult{
		Ordinal: int32(ordinal), Shard: r.Shard, Target: r.Target, JobUID: r.JobUID, Index: int32(r.Index),
		Pod: r.Pod, PodUID: r.PodUID, InputRevision: r.InputRevision, ModelRevision: r.ModelRevision,
		Output: r.Output, Digest: r.Digest, Records: r.Records, Valid: r.Valid,
		RejectReason: r.RejectReason, RejectMessage: r.RejectMessage, RecordedAt: at,
	}
}

// RecordedInOrder flattens recorded results in recording order, the order in which they
// are judged (the first accepted result of a shard stands).
func RecordedInOrder(chunks []v1alpha1.ShardResults) []Result {
	var all []v1alpha1.RecordedResult
	for _, c := range chunks {
		all = append(all, c.Results...)
	}
	slices.SortStableFunc(all, func(a, b v1alpha1.RecordedResult) int {
		return cmp.Or(a.RecordedAt.Compare(b.RecordedAt.Time), cmp.Compare(a.Pod, b.Pod))
	})
	out := make([]Result, len(all))
	for i, r := range all {
		out[i] = FromRecorded(r)
	}
	return out
}
