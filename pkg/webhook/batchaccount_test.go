package webhook

import (
	"strings"
	"testing"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

func admitted(ba *v1alpha1.BatchAccount) *v1alpha1.BatchAccount {
	ba.Status.Targets = []v1alpha1.TargetStatus{{Name: "job/j", Workload: &v1alpha1.WorkloadObservation{Name: "w", Admitted: true}}}
	return ba
}

func TestValidateCreate(t *testing.T) {
	cases := []struct {
		name string
		ba   *v1alpha1.BatchAccount
		want string // "" means allowed
	}{
		{"IJ245", wrappers.MakeBatchAccount("ij245", "ml").Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Obj(), ""},
		{"all to A", wrappers.MakeBatchAccount("a", "ml").Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "A", "A", "A").Obj(), "DuplicateShard: shard A is assigned twice"},
		{"other namespace", wrappers.MakeBatchAccount("a", "ml").Shards("A").AssignJob("j", "0", "A").TargetNamespace("prod").Obj(), `CrossNamespaceTarget: assignments[0] names a target in namespace "prod"`},
		{"acceptance rule that does not compile", wrappers.MakeBatchAccount("a", "ml").Shards("A").AssignJob("j", "0", "A").RequireResults("result.valid ==").Obj(), "spec.acceptance.rule"},
		{"acceptance rule that is not boolean", wrappers.MakeBatchAccount("a", "ml").Shards("A").AssignJob("j", "0", "A").RequireResults("result.records + 1").Obj(), "spec.acceptance.rule"},
		{"the seed's acceptance rule", wrappers.MakeBatchAccount("a", "ml").Shards("A").AssignJob("j", "0", "A").RequireResults("result.valid == result.records && result.records > 0").Obj(), ""},
		{"same namespace spelled out", wrappers.MakeBatchAccount("a", "ml").Shards("A").AssignJob("j", "0", "A").TargetNamespace("ml").Obj(), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BatchAccountValidator{}.ValidateCreate(t.Context(), tc.ba)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// withRepair gives ba one entry in spec.repairs: Job j-repair-1 re-runs shard D.
func withRepair(ba *v1alpha1.BatchAccount) *v1alpha1.BatchAccount {
	ba.Spec.Repairs = []v1alpha1.Assignment{{Target: v1alpha1.TargetRef{Job: "j-repair-1"}, Indexes: "0", Shards: []string{"D"}}}
	return ba
}

func TestValidateUpdate(t *testing.T) {
	base := func() *v1alpha1.BatchAccount {
		return wrappers.MakeBatchAccount("ij245", "ml").Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Obj()
	}
	cases := []struct {
		name   string
		old    *v1alpha1.BatchAccount
		mutate func(*v1alpha1.BatchAccount)
		want   string
	}{
		{"remap before admission", base(), func(ba *v1alpha1.BatchAccount) { ba.Spec.Assignments[0].Shards = []string{"D", "C", "B", "A"} }, ""},
		{"remap after admission", admitted(base()), func(ba *v1alpha1.BatchAccount) { ba.Spec.Assignments[0].Shards = []string{"D", "C", "B", "A"} }, "assignments are immutable once a target was admitted"},
		{"append repair after admission", admitted(base()), func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Assignments = append(ba.Spec.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "j-repair"}, Indexes: "0", Shards: []string{"D"}, Repair: true})
		}, ""},
		{"append non-repair after admission", admitted(base()), func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Assignments = append(ba.Spec.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "k"}, Indexes: "0", Shards: []string{"D"}})
		}, "DuplicateShard: shard D is assigned twice"},
		{"append to spec.repairs after admission", admitted(base()), func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Repairs = append(ba.Spec.Repairs, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "j-repair-1"}, Indexes: "0", Shards: []string{"D"}})
		}, ""},
		{"drop spec.repairs after admission", admitted(withRepair(base())), func(ba *v1alpha1.BatchAccount) { ba.Spec.Repairs = nil }, "repairs are immutable once a target was admitted"},
		{"spec.repairs onto an unassigned shard", base(), func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Repairs = append(ba.Spec.Repairs, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "j-repair-1"}, Indexes: "0", ShardOrdinals: "7"})
		}, "repairs[0].shardOrdinals reaches ordinal 7"},
		{"model revision after admission", admitted(base()), func(ba *v1alpha1.BatchAccount) { ba.Spec.ModelRevision = "m-2027-01" }, "revisions are immutable"},
		{"shards after admission", admitted(base()), func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Shards.Names = []string{"A", "B", "C", "D", "E"}
			ba.Spec.Assignments = append(ba.Spec.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "k"}, Indexes: "0", Shards: []string{"E"}})
		}, "spec.shards is immutable"},
		{"invalid update is rejected first", base(), func(ba *v1alpha1.BatchAccount) { ba.Spec.Assignments[0].Shards = []string{"A", "A", "A", "A"} }, "DuplicateShard"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ba := tc.old.DeepCopy()
			tc.mutate(ba)
			_, err := BatchAccountValidator{}.ValidateUpdate(t.Context(), tc.old, ba)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
