package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ChunkLabels are the labels that select an account's ShardResults chunks: by the
// account's UID, so that an account deleted and recreated under the same name never
// adopts its predecessor's results (which garbage collection deletes with it), and any
// valid account name works (a name may be longer than a label value).
func ChunkLabels(ba *BatchAccount) map[string]string {
	return map[string]string{LabelAccountUID: string(ba.UID)}
}

// OwnedBy reports whether the chunk's label, its AccountUID and the UID of its
// controller (a BatchAccount) are one non-empty UID: ba's, in ba's namespace, when ba is
// given; any one account's when ba is nil. The manager counts no other chunk, whatever
// its signature: a chunk anyone labelled for an account is not its record.
func (c *ShardResults) OwnedBy(ba *BatchAccount) bool {
	owner := metav1.GetControllerOfNoCopy(c)
	if owner == nil || owner.Kind != "BatchAccount" || owner.APIVersion != GroupVersion.String() {
		return false
	}
	uid := c.AccountUID
	if uid == "" || owner.UID != uid || c.Labels[LabelAccountUID] != string(uid) {
		return false
	}
	return ba == nil || (ba.UID == uid && ba.Namespace == c.Namespace && ba.Name == owner.Name)
}

// OwnedChunks are the chunks of chunks that ba owns (OwnedBy), in their order: those
// whose results the manager may count for ba.
func OwnedChunks(ba *BatchAccount, chunks []ShardResults) []ShardResults {
	out := make([]ShardResults, 0, len(chunks))
	for i := range chunks {
		if chunks[i].OwnedBy(ba) {
			out = append(out, chunks[i])
		}
	}
	return out
}

// Records reports whether the chunk records pod: its result judged under the spec whose
// Judging j is (Judging.Judged), or the pod dropped past a bound. A result judged under
// another rule, or read from another container, is no record of the pod: it never
// stands (RuleChanged), so the pod, while it is still held, is captured and judged again
// under the spec. That happens only when the rule or the result container changed
// between a capture and the status recording its first result.
func (c *ShardResults) Records(pod types.UID, j Judging) bool {
	for i := range c.Results {
		if r := &c.Results[i]; r.PodUID == pod && j.Judged(r.RuleDigest) {
			return true
		}
	}
	return slices.Contains(c.DroppedPods, pod)
}
