package v1alpha1

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// ChunkLabels are the labels that select an account's ShardResults chunks: by the
// account's UID, so that an account deleted and recreated under the same name never
// adopts its predecessor's results (which garbage collection deletes with it), and any
// valid account name works (a name may be longer than a label value).
func ChunkLabels(ba *BatchAccount) map[string]string {
	return map[string]string{LabelAccountUID: string(ba.UID)}
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
