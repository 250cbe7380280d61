package account

import (
	"fmt"

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
	// RejectReason and RejectMessage are set when the result could not be decoded or
	// did not meet the acceptance rule.
	RejectReason  string
	RejectMessage string
}

type resultsState struct {
	accepted indexset.Set
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
	var rs resultsState
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
	for _, r := range in.Results {
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
		case r.InputRevision != in.Spec.InputRevision:
			reject(r, ordinal, ResultRevisionMismatch, fmt.Sprintf("shard %s result of %s has inputRevision %q, the account requires %q", assignedName, who, r.InputRevision, in.Spec.InputRevision))
		case r.ModelRevision != in.Spec.ModelRevision:
			reject(r, ordinal, ResultRevisionMismatch, fmt.Sprintf("shard %s result of %s has modelRevision %q, the account requires %q", assignedName, who, r.ModelRevision, in.Spec.ModelRevision))
		default:
			if first, ok := digests[ordinal]; ok {
				if first != r.Digest {
					reject(r, -1, ResultConflict, fmt.Sprintf("shard %s already has an accepted result with digest %q; %s reports digest %q", assignedName, first, who, r.Digest))
				}
				continue
			}
			digests[ordinal] = r.Digest
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
