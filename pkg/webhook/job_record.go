package webhook

import (
	"slices"

	"gomodules.xyz/jsonpatch/v2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// recordFinalizerPatch adds v1alpha1.RecordFinalizer to a new Job an account names (or
// whose short form parses), after the finalizers it already has: the Job then outlives
// its deletion until its accounts recorded its end, also while no manager leads. A JobSet
// child gets it here too, when the JobSet controller creates it. A Job admitted while the
// webhook is unreachable gets it from the controller when it first sees the Job.
func recordFinalizerPatch(have []string) []jsonpatch.JsonPatchOperation {
	switch {
	case slices.Contains(have, v1alpha1.RecordFinalizer):
		return nil
	case len(have) == 0:
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/metadata/finalizers", []string{v1alpha1.RecordFinalizer})}
	default:
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/metadata/finalizers/-", v1alpha1.RecordFinalizer)}
	}
}
