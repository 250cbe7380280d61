package account

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestChildFirstSeenWithItsOwnerGone: an account names a child of a JobSet (or of the
// JobSet a TrainJob renders) that is not there, and finds a Job of the child's name,
// Complete, that it never observed before. A namespace editor can make such a Job (its
// name, labels and controller reference are theirs to write) for an owner that never ran,
// or one the account was written before: nothing vouches that the owner made it. The
// account does not follow it and waits for the owner, as for one never found; a child
// it observed while its owner was there keeps standing once the owner is gone.
func TestChildFirstSeenWithItsOwnerGone(t *testing.T) {
	complete := makeJob("vic-node-0", "forged-uid", 2).Completed("0-1", 2).Complete(jobCondAt)
	for _, tc := range []struct {
		name string
		spec *v1alpha1.BatchAccountSpec
		key  string
	}{
		{"a JobSet's child", makeCompactSpec("s", 2).AssignJobSet("vic", "node", 0, "0-1", "0-1").SpecObj(), "jobset/vic/node/0"},
		{"a TrainJob's child", makeCompactSpec("s", 2).AssignTrainJob("vic", "node", 0, "0-1", "0-1").SpecObj(), "trainjob/vic/node/0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := step(t, tc.spec, nil, map[string]Observation{tc.key: {Job: complete.Facts(), ChildOwner: OwnerDeleted}}).Status
			if len(st.Targets) != 1 || st.Targets[0].UID != "" {
				t.Errorf("targets %+v: the account follows a Job it first saw with its owner gone", st.Targets)
			}
			wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonTargetsNotFound, "")
			wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonTargetsNotFound, "")
		})
	}
}
