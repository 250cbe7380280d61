package account

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestAcceptedStandsWhenATerminatedJobsListWasLeftOut: a status too large for its index
// lists leaves lists out; a terminated Job's completed indexes are what its record keeps
// once the Job is deleted (its TTL), so they go with the records', never before: a
// verdict reached on them stands after the deletion.
func TestAcceptedStandsWhenATerminatedJobsListWasLeftOut(t *testing.T) {
	saved := statusLimits
	// Room for the terminated Jobs' completed indexes, not for their failed and required ones.
	statusLimits = func(n int) limits { l := limitsFor(n); l.indexLists = 12; return l }
	t.Cleanup(func() { statusLimits = saved })
	eight := []string{"A", "B", "C", "D", "E", "F", "G", "H"}
	spec := makeSpec(eight...).AssignJob("j", "0-7", eight...).Repair("r", "0-3", "B", "D", "F", "H").SpecObj()
	failed := makeJob("j", "uid-j", 8).Completed("0,2,4,6", 4).FailedIndexes("1,3,5,7").Failed("FailedIndexes", jobCondAt)
	repair := makeJob("r", "uid-r", 4).Completed("0-3", 4).Complete(jobCondAt)
	cases := []struct {
		name string
		obs  map[string]Observation
	}{
		{"the failed Job is deleted", map[string]Observation{"job/r": {Job: repair.Facts()}}},
		{"the repair Job is deleted", map[string]Observation{"job/j": {Job: failed.Facts()}}},
		{"both are deleted", map[string]Observation{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := at(spec, nil, 0, map[string]Observation{"job/j": {Job: failed.Facts()}, "job/r": {Job: repair.Facts()}}).Status
			wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
			gone := at(spec, &st, time.Minute, tc.obs)
			wantCond(t, gone.Status, v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered, "")
			wantCond(t, gone.Status, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
			for _, c := range gone.Changed {
				t.Errorf("deletion changed %s to %s/%s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
		})
	}
}
