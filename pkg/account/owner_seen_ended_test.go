package account

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestOwnerSeenEndedThenDeleted: an account naming only children its JobSet never
// created (a replicatedJob that dependsOn one that failed, children a successPolicy
// Any left uncreated, a jobIndex beyond the replicas) sees the JobSet end: the children
// were never created and will not be. Its ttlSecondsAfterFinished (or a cleanup) then
// deletes the JobSet. The account saw the JobSet itself end, so it does not take the
// JobSet for one not created yet: the verdict stays, and no wait for the children to
// exist comes back. An account that never saw the JobSet still waits for it.
func TestOwnerSeenEndedThenDeleted(t *testing.T) {
	spec := makeCompactSpec("s", 4).AssignJobSet("pipe", "infer", 0, "0-1", "0-1").
		AssignJobSet("pipe", "infer", 1, "0-1", "2-3").SpecObj()
	i0, i1 := "jobset/pipe/infer/0", "jobset/pipe/infer/1"
	ended := func(how string) map[string]Observation {
		return map[string]Observation{i0: {OwnerEnded: how, ChildOwner: how}, i1: {OwnerEnded: how, ChildOwner: how}}
	}
	gone := ended(OwnerDeleted)
	rerun := map[string]Observation{i0: {Job: makeJob("pipe-infer-0", "uid-i0", 2).Completed("0", 1).Facts(), ChildOwner: OwnerRunning},
		i1: {ChildOwner: OwnerRunning}}
	for _, tc := range []struct {
		name           string
		steps          []map[string]Observation
		wantTerminated string
		wantAdmitted   string
	}{
		{"the JobSet Failed, then its TTL deleted it", []map[string]Observation{ended(string(jobset.JobSetFailed)), gone},
			v1alpha1.ReasonTargetDeleted, v1alpha1.ReasonTargetDeleted},
		{"the JobSet Completed, then its TTL deleted it", []map[string]Observation{ended(string(jobset.JobSetCompleted)), gone},
			v1alpha1.ReasonTargetDeleted, v1alpha1.ReasonTargetDeleted},
		{"the JobSet seen being deleted, then gone", []map[string]Observation{ended(OwnerBeingDeleted), gone},
			v1alpha1.ReasonTargetDeleted, v1alpha1.ReasonTargetDeleted},
		{"the JobSet never seen: the account waits for it", []map[string]Observation{gone},
			v1alpha1.ReasonAwaitingTermination, v1alpha1.ReasonTargetsNotFound},
		{"a JobSet of the name applied again: the account follows it", []map[string]Observation{ended(string(jobset.JobSetFailed)), gone, rerun},
			v1alpha1.ReasonAwaitingTermination, v1alpha1.ReasonTargetsNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st *v1alpha1.BatchAccountStatus
			for i, obs := range tc.steps {
				out := at(spec, st, time.Duration(i)*10*time.Second, obs)
				st = &out.Status
			}
			wantCond(t, *st, v1alpha1.ConditionTerminated, metav1.ConditionFalse, tc.wantTerminated, "")
			wantCond(t, *st, v1alpha1.ConditionAdmitted, metav1.ConditionFalse, tc.wantAdmitted, "")
			if tc.wantTerminated == v1alpha1.ReasonTargetDeleted {
				// Blocked until a repair: retention and the verdict metric see a finished batch.
				if Blocker(st) == nil {
					t.Errorf("no blocker in %+v", st.Conditions)
				}
				wantCond(t, *st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing,
					"0/4 shards covered; missing s0, s1 = jobset pipe infer[0] indexes 0,1, s2, s3 = jobset pipe infer[1] indexes 0,1; "+
						"jobset pipe infer[0] was never created and will not be (its JobSet was deleted); repair its missing shards; "+
						"jobset pipe infer[1] was never created and will not be (its JobSet was deleted); repair its missing shards")
			}
			wantFixedPoint(t, spec, *st, time.Hour, tc.steps[len(tc.steps)-1])
		})
	}
}
