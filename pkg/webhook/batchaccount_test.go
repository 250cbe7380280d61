package webhook

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

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
		{"job name no Job can have", wrappers.MakeBatchAccount("a", "ml").Shards("A").AssignJob("Train_Job", "0", "A").Obj(), `InvalidTarget: assignments[0].target.job "Train_Job" can name no Job`},
		{"job name with a slash", wrappers.MakeBatchAccount("a", "ml").Shards("A").AssignJob("a/b", "0", "A").Obj(), `InvalidTarget: assignments[0].target.job "a/b" can name no Job`},
		{"replicatedJob no child Job can have", wrappers.MakeBatchAccount("a", "ml").Shards("A").AssignJobSet("train", "Workers!", 0, "0", "0").Obj(), `InvalidTarget: assignments[0].target.replicatedJob "Workers!" can name no child Job`},
		// The CRD refuses these too; an API server still serving an earlier CRD does not.
		{"acceptance rule without requireResults", withAcceptance(wrappers.MakeBatchAccount("a", "ml").Shards("A").AssignJob("j", "0", "A").Obj(),
			v1alpha1.AcceptanceCriterion{Rule: "result.valid == result.records"}), "rule and resultContainer apply only with requireResults: true"},
		{"result container without requireResults", withAcceptance(wrappers.MakeBatchAccount("a", "ml").Shards("A").AssignJob("j", "0", "A").Obj(),
			v1alpha1.AcceptanceCriterion{ResultContainer: "worker"}), "rule and resultContainer apply only with requireResults: true"},
		{"no results required, no criterion", withAcceptance(wrappers.MakeBatchAccount("a", "ml").Shards("A").AssignJob("j", "0", "A").Obj(),
			v1alpha1.AcceptanceCriterion{}), ""},
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

// withAcceptance sets ba's spec.acceptance to a.
func withAcceptance(ba *v1alpha1.BatchAccount, a v1alpha1.AcceptanceCriterion) *v1alpha1.BatchAccount {
	ba.Spec.Acceptance = &a
	return ba
}

// withRepair appends to ba's spec.repairs an entry: Job j-repair-<n> re-runs shard D.
func withRepair(ba *v1alpha1.BatchAccount) *v1alpha1.BatchAccount {
	name := fmt.Sprintf("j-repair-%d", len(ba.Spec.Repairs)+1)
	ba.Spec.Repairs = append(ba.Spec.Repairs, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: name}, Indexes: "0", Shards: []string{"D"}})
	return ba
}

// withRepairObserved adds to ba's status that the Job of its first repair was observed,
// with work done (an index completed) or none.
func withRepairObserved(ba *v1alpha1.BatchAccount, worked bool) *v1alpha1.BatchAccount {
	t := v1alpha1.TargetStatus{Name: "job/j-repair-1", Job: "j-repair-1", UID: "uid-r1", Found: true}
	if worked {
		t.CompletedIndexes = "0"
	}
	ba.Status.Targets = append(ba.Status.Targets, t)
	return ba
}

// withTarget gives ba the status of target job/j as mutate leaves it.
func withTarget(ba *v1alpha1.BatchAccount, mutate func(*v1alpha1.TargetStatus)) *v1alpha1.BatchAccount {
	t := v1alpha1.TargetStatus{Name: "job/j", Job: "j", UID: "uid-j", Found: true, Completions: 4}
	mutate(&t)
	ba.Status.Targets = []v1alpha1.TargetStatus{t}
	return ba
}

// withResults makes ba require results (in container c, "" for the default) with n
// results recorded.
func withResults(ba *v1alpha1.BatchAccount, c string, n int32) *v1alpha1.BatchAccount {
	ba.Spec.Acceptance = &v1alpha1.AcceptanceCriterion{RequireResults: true, ResultContainer: c}
	ba.Status.Results.Recorded = n
	return ba
}

func TestValidateUpdate(t *testing.T) {
	base := func() *v1alpha1.BatchAccount {
		return wrappers.MakeBatchAccount("ij245", "ml").Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Obj()
	}
	remap := func(ba *v1alpha1.BatchAccount) { ba.Spec.Assignments[0].Shards = []string{"D", "C", "B", "A"} }
	stopResults := func(ba *v1alpha1.BatchAccount) { ba.Spec.Acceptance.RequireResults = false }
	cases := []struct {
		name   string
		old    *v1alpha1.BatchAccount
		mutate func(*v1alpha1.BatchAccount)
		want   string
	}{
		{"remap before admission", base(), func(ba *v1alpha1.BatchAccount) { ba.Spec.Assignments[0].Shards = []string{"D", "C", "B", "A"} }, ""},
		{"remap after admission", admitted(base()), func(ba *v1alpha1.BatchAccount) { ba.Spec.Assignments[0].Shards = []string{"D", "C", "B", "A"} }, "assignments are immutable once work was done under them (job/j was admitted)"},
		{"append repair after admission", admitted(base()), func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Assignments = append(ba.Spec.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "j-repair"}, Indexes: "0", Shards: []string{"D"}, Repair: true})
		}, ""},
		{"append non-repair after admission", admitted(base()), func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Assignments = append(ba.Spec.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "k"}, Indexes: "0", Shards: []string{"D"}})
		}, "DuplicateShard: shard D is assigned twice"},
		{"append to spec.repairs after admission", admitted(base()), func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Repairs = append(ba.Spec.Repairs, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "j-repair-1"}, Indexes: "0", Shards: []string{"D"}})
		}, ""},
		{"drop spec.repairs whose Job ran", withRepairObserved(admitted(withRepair(base())), true), func(ba *v1alpha1.BatchAccount) { ba.Spec.Repairs = nil }, "repairs are immutable once work was done"},
		{"take out a repair whose Job was never observed", admitted(withRepair(base())), func(ba *v1alpha1.BatchAccount) { ba.Spec.Repairs = nil }, ""},
		{"take out repairs whose Jobs were observed, never run", withRepairObserved(admitted(withRepair(withRepair(base()))), false), func(ba *v1alpha1.BatchAccount) { ba.Spec.Repairs = nil }, ""},
		{"reorder repairs", withRepairObserved(admitted(withRepair(withRepair(base()))), true), func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Repairs[0].Target.Job, ba.Spec.Repairs[1].Target.Job = "j-repair-2", "j-repair-1"
		}, "repairs are immutable once work was done"},
		{"spec.repairs onto an unassigned shard", base(), func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Repairs = append(ba.Spec.Repairs, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "j-repair-1"}, Indexes: "0", ShardOrdinals: "7"})
		}, "repairs[0].shardOrdinals reaches ordinal 7"},
		{"model revision after admission", admitted(base()), func(ba *v1alpha1.BatchAccount) { ba.Spec.ModelRevision = "m-2027-01" }, "revisions are immutable"},
		{"shards after admission", admitted(base()), func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Shards.Names = []string{"A", "B", "C", "D", "E"}
			ba.Spec.Assignments = append(ba.Spec.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "k"}, Indexes: "0", Shards: []string{"E"}})
		}, "spec.shards is immutable"},
		{"remap while the Job, run without Kueue, ended no index", withTarget(base(), func(*v1alpha1.TargetStatus) {}), remap, ""},
		{"remap after the Job started (its pods told their shards)", withTarget(base(), func(t *v1alpha1.TargetStatus) { t.StartedAt = &metav1.Time{} }), remap,
			"assignments are immutable once work was done under them (job/j started)"},
		{"remap after a Job run without Kueue completed an index", withTarget(base(), func(t *v1alpha1.TargetStatus) { t.CompletedIndexes = "1" }), remap,
			"assignments are immutable once work was done under them (job/j ended indexes)"},
		{"remap after an index failed", withTarget(base(), func(t *v1alpha1.TargetStatus) { t.FailedIndexes = "0" }), remap, "job/j ended indexes"},
		{"remap after the Job terminated", withTarget(base(), func(t *v1alpha1.TargetStatus) { t.Terminal = "Failed" }), remap, "job/j terminated"},
		{"remap after an eviction left only an admission record", withTarget(base(), func(t *v1alpha1.TargetStatus) {
			t.Admissions = []v1alpha1.Admission{{ClusterQueue: "cq"}}
		}), remap, "job/j was admitted"},
		{"remap after the Job was replaced", func() *v1alpha1.BatchAccount {
			ba := base()
			ba.Status.History = []v1alpha1.SupersededIdentity{{Target: "job/j", UID: "uid-old"}}
			return ba
		}(), remap, "a target's Job was replaced"},
		{"remap after a result was recorded", withResults(base(), "", 1), remap, "1 results recorded"},
		{"stop requiring results before any work", withResults(base(), "", 0), stopResults, ""},
		{"stop requiring results after a result was recorded", withResults(base(), "", 2), stopResults,
			"spec.acceptance.requireResults cannot be turned off once work was done under it (2 results recorded)"},
		{"stop requiring results after an index completed, none recorded", withTarget(withResults(base(), "", 0), func(t *v1alpha1.TargetStatus) { t.CompletedIndexes = "0-3" }),
			stopResults, "requireResults cannot be turned off"},
		{"drop spec.acceptance after admission", admitted(withResults(base(), "", 0)), func(ba *v1alpha1.BatchAccount) { ba.Spec.Acceptance = nil }, "requireResults cannot be turned off"},
		{"start requiring results after an index completed", withTarget(base(), func(t *v1alpha1.TargetStatus) { t.CompletedIndexes = "0" }), func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Acceptance = &v1alpha1.AcceptanceCriterion{RequireResults: true}
		}, ""},
		{"result container after a result was recorded", withResults(base(), "worker", 1), func(ba *v1alpha1.BatchAccount) { ba.Spec.Acceptance.ResultContainer = "sidecar" },
			"spec.acceptance.resultContainer cannot change once results were read from it"},
		{"result container after admission, none recorded", admitted(withResults(base(), "worker", 0)), func(ba *v1alpha1.BatchAccount) { ba.Spec.Acceptance.ResultContainer = "sidecar" }, ""},
		{"stop requiring results, keeping the rule", withAcceptance(base(), v1alpha1.AcceptanceCriterion{RequireResults: true, Rule: "result.valid > 0"}), stopResults,
			"rule and resultContainer apply only with requireResults: true"},
		{"add a rule without requiring results", base(), func(ba *v1alpha1.BatchAccount) {
			ba.Spec.Acceptance = &v1alpha1.AcceptanceCriterion{Rule: "result.valid > 0"}
		}, "rule and resultContainer apply only with requireResults: true"},
		// As the API server ratchets the CRD's rule: an account admitted before it keeps its
		// unchanged acceptance, and can be edited into a valid one.
		{"an earlier account's rule without requireResults, left as it was", withAcceptance(base(), v1alpha1.AcceptanceCriterion{Rule: "result.valid > 0"}),
			func(ba *v1alpha1.BatchAccount) { ba.Spec.TTLSecondsAfterFinished = ptr.To(int32(60)) }, ""},
		{"an earlier account's rule without requireResults, results now required", withAcceptance(base(), v1alpha1.AcceptanceCriterion{Rule: "result.valid > 0"}),
			func(ba *v1alpha1.BatchAccount) { ba.Spec.Acceptance.RequireResults = true }, ""},
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

// TestRuleWarnings: a new or changed acceptance rule that reads a field the result
// schema does not declare is admitted with a warning (acceptance.Warnings); an update
// that leaves the rule as it was repeats none.
func TestRuleWarnings(t *testing.T) {
	const typo = "result.valid == result.record && result.records > 0"
	withRule := func(rule string) *v1alpha1.BatchAccount {
		return wrappers.MakeBatchAccount("a", "ml").Shards("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults(rule).Obj()
	}
	warned := admission.Warnings{`rule reads result.record, not a result schema field (did you mean result.records?): a result without it fails the rule unless it tests has(result.record)`}
	cases := []struct {
		name string
		old  *v1alpha1.BatchAccount // nil: a create
		ba   *v1alpha1.BatchAccount
		want admission.Warnings
	}{
		{name: "create, schema fields only", ba: withRule("result.valid == result.records")},
		{name: "create, a misspelt field", ba: withRule(typo), want: warned},
		{name: "update to a misspelt field", old: withRule("result.valid == result.records"), ba: withRule(typo), want: warned},
		{name: "update of something else, the rule unchanged", old: withRule(typo), ba: func() *v1alpha1.BatchAccount {
			ba := withRule(typo)
			ba.Spec.ModelRevision = "m-2"
			return ba
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got admission.Warnings
			var err error
			if tc.old == nil {
				got, err = BatchAccountValidator{}.ValidateCreate(t.Context(), tc.ba)
			} else {
				got, err = BatchAccountValidator{}.ValidateUpdate(t.Context(), tc.old, tc.ba)
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}
