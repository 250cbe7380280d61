package repair

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/explanation"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
)

// completeAccount is the seed observed Complete with its pods listed, and results.
func completeAccount(results ...account.Result) (*v1alpha1.BatchAccount, *batchv1.Job) {
	j := clitest.Admitted(clitest.SeedJob("j", clitest.JobUID, 4).Completed("0-3", 4).ResourceVersion("48262").Complete(clitest.CompleteT.Time).Obj())
	return clitest.Compute(clitest.IJ245Account(), clitest.CompleteT.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), Workload: clitest.WorkloadObs(true), PodsListed: true}}, results...), j
}

func seedResult(i int, shard string) account.Result {
	return account.Result{Target: "job/j", JobUID: clitest.JobUID, Index: i, Pod: "j-" + shard, Shard: shard, InputRevision: "D", ModelRevision: "m-2026-11", Digest: "sha256:" + shard}
}

// TestRepairResults: repair re-runs covered shards whose result is missing or was
// rejected, not only uncovered shards; the still-needed advice offers it.
func TestRepairResults(t *testing.T) {
	rejectedC := seedResult(2, "C")
	rejectedC.RejectReason, rejectedC.RejectMessage = v1alpha1.RejectionMalformed, "no JSON object in the termination message"
	cases := []struct {
		name       string
		results    []account.Result
		deleteJob  bool
		extraJobs  []*batchv1.Job
		wantShards string
		wantWhy    string
		wantNeeded string
		wantErr    string
	}{
		{
			name:       "account created after the pods were gone: every result missing",
			wantShards: "A..D", wantWhy: "job j indexes 0-3: completed, but no result can arrive (MissingResult)",
			wantNeeded: "0/4 shard results accepted: no result can arrive for shards A..D (the identity terminated or was deleted, and no pod is left that can report one); " +
				"the identities that completed them cannot report again. Run `kubectl batchledger repair ij245 -n ml-team` to re-run them",
		},
		{
			name:       "a malformed result on a completed index, the others accepted",
			results:    []account.Result{seedResult(0, "A"), seedResult(1, "B"), rejectedC, seedResult(3, "D")},
			wantShards: "C", wantWhy: "job j index 2: completed, its result rejected",
			wantNeeded: "3/4 shard results accepted: shard C has only rejected results; the identities that completed them cannot report again.",
		},
		{
			name:    "the Job deleted before B's result: its record stands, no template left",
			results: []account.Result{seedResult(0, "A"), seedResult(2, "C"), seedResult(3, "D")}, deleteJob: true,
			wantErr: `Job "j" was deleted and its pod template with it (shards B were assigned to it), and no repair Job of it is left to copy one from`,
		},
		{
			name:    "the Job deleted, an earlier repair Job of it carries its template",
			results: []account.Result{seedResult(0, "A"), seedResult(2, "C"), seedResult(3, "D")}, deleteJob: true,
			extraJobs:  []*batchv1.Job{repairOf("j-repair-1", "j")},
			wantShards: "B", wantWhy: "job j index 1: completed, but no result can arrive (MissingResult)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ba, j := completeAccount(tc.results...)
			jobs := append([]*batchv1.Job{j}, tc.extraJobs...)
			if tc.deleteJob {
				ba = clitest.Compute(ba, clitest.DeletedAt, map[string]account.Observation{}, tc.results...)
				jobs = jobs[1:]
			}
			if tc.wantNeeded != "" {
				needed := strings.Join(explanation.BuildExplanation(ba, nil, 0).StillNeeded, "\n")
				if !strings.Contains(needed, tc.wantNeeded) {
					t.Errorf("still needed:\n%s\nwant it to contain:\n%s", needed, tc.wantNeeded)
				}
			}
			plan, err := NewPlan(Input{Account: ba, Jobs: clitest.JobsByName(jobs...)})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Repairs) != 1 || plan.Repairs[0].Shards != tc.wantShards || plan.Repairs[0].Why != tc.wantWhy {
				t.Fatalf("plan = %+v", plan.Repairs)
			}
			r := plan.Repairs[0]
			if r.Job.Annotations[v1alpha1.AnnotationRepairOf] != "j" || !slices.Contains(r.Job.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: EnvRepairOf, Value: "j"}) {
				t.Errorf("repair Job does not name the original: annotations %v env %v", r.Job.Annotations, r.Job.Spec.Template.Spec.Containers[0].Env)
			}
		})
	}
}

// repairOf is an earlier repair Job of original, as repair created it.
func repairOf(name, original string) *batchv1.Job {
	j := clitest.Admitted(clitest.SeedJob(name, types.UID("uid-"+name), 1).Completed("0", 1).ResourceVersion("1").Obj())
	j.Annotations = map[string]string{v1alpha1.AnnotationRepairOf: original, v1alpha1.AnnotationRepairFor: "ij245"}
	return j
}

// TestRepairNothingToRepair: with every shard covered and accepted, repair says so.
func TestRepairNothingToRepair(t *testing.T) {
	ba, j := completeAccount(seedResult(0, "A"), seedResult(1, "B"), seedResult(2, "C"), seedResult(3, "D"))
	_, err := NewPlan(Input{Account: ba, Jobs: clitest.JobsByName(j)})
	if err == nil || !strings.Contains(err.Error(), "nothing to repair: all 4 shards are covered and no result is missing or rejected") {
		t.Errorf("err = %v", err)
	}
}

// TestRepairNothingToRepairWhileResultsPend: a shard whose result was rejected while a
// repair identity may still report one is pending, so repair plans nothing; it must not
// say that no result was rejected, and it says what the results wait for.
func TestRepairNothingToRepairWhileResultsPend(t *testing.T) {
	rejectedC := seedResult(2, "C")
	rejectedC.RejectReason, rejectedC.RejectMessage = v1alpha1.RejectionMalformed, "no JSON object in the termination message"
	all := []account.Result{seedResult(0, "A"), seedResult(1, "B"), seedResult(2, "C"), seedResult(3, "D")}
	cases := []struct {
		name      string
		repairC   bool
		results   []account.Result
		want      []string
		wantNever string
	}{
		{name: "C rejected, its repair Job not created yet",
			repairC: true, results: []account.Result{seedResult(0, "A"), seedResult(1, "B"), rejectedC, seedResult(3, "D")},
			want: []string{"nothing to repair now: all 4 shards are covered and no result is lost yet; ResultsAccepted is ResultsPending",
				"rejected, awaiting a result that may still come: C (Malformed)"},
			wantNever: "no result is missing or rejected"},
		{name: "every result accepted",
			results: all, want: []string{"nothing to repair: all 4 shards are covered and no result is missing or rejected"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ba := clitest.IJ245Account()
			if tc.repairC {
				ba.Spec.Repairs = []v1alpha1.Assignment{{Target: v1alpha1.TargetRef{Job: "j-repair-1"}, Indexes: "0", Shards: []string{"C"}}}
			}
			j := clitest.Admitted(clitest.SeedJob("j", clitest.JobUID, 4).Completed("0-3", 4).ResourceVersion("48262").Complete(clitest.CompleteT.Time).Obj())
			ba = clitest.Compute(ba, clitest.CompleteT.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), Workload: clitest.WorkloadObs(true), PodsListed: true}}, tc.results...)
			_, err := NewPlan(Input{Account: ba, Jobs: clitest.JobsByName(j)})
			if err == nil {
				t.Fatal("planned a repair")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v\nwant it to contain %q", err, want)
				}
			}
			if tc.wantNever != "" && strings.Contains(err.Error(), tc.wantNever) {
				t.Errorf("err = %v\nmust not say %q", err, tc.wantNever)
			}
		})
	}
}

// TestRepairJobDeletedBeforeItTerminated: the missing shards of a Job deleted while it
// ran are offered for repair: from an earlier repair Job's template, or, with none left,
// with the exact assignment to append by hand.
func TestRepairJobDeletedBeforeItTerminated(t *testing.T) {
	running := clitest.Admitted(clitest.SeedJob("j", clitest.JobUID, 4).Completed("0,1", 2).ResourceVersion("48220").Obj())
	ab := []account.Result{seedResult(0, "A"), seedResult(1, "B")}
	ba := clitest.Compute(clitest.IJ245Account(), clitest.Time0, map[string]account.Observation{"job/j": {Job: jobkind.Facts(running), Workload: clitest.WorkloadObs(false)}}, ab...)
	ba = clitest.Compute(ba, clitest.DeletedAt, map[string]account.Observation{}, ab...)
	ex := explanation.BuildExplanation(ba, nil, 0)
	if ex.Verdict.Reason != v1alpha1.ReasonTargetDeleted || !ex.Jobs[0].Deleted || ex.Shards.Covered != 2 {
		t.Fatalf("verdict %+v, job deleted %v, covered %d", ex.Verdict, ex.Jobs[0].Deleted, ex.Shards.Covered)
	}
	needed := strings.Join(ex.StillNeeded, "\n")
	for _, want := range []string{
		"2/4 shards covered: shards C, D can no longer be covered by job j index 2, job j index 3 (job j deleted before completing it). Run `kubectl batchledger repair ij245 -n ml-team`",
		"job j was deleted before it terminated: it can never record Complete.",
	} {
		if !strings.Contains(needed, want) {
			t.Errorf("still needed:\n%s\nwant it to contain:\n%s", needed, want)
		}
	}

	_, err := NewPlan(Input{Account: ba, Jobs: clitest.JobsByName()})
	if want := `{target: {job: <new name>}, indexes: "0,1", shards: [C, D]}`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want it to name the assignment %s", err, want)
	}
	plan, err := NewPlan(Input{Account: ba, Jobs: clitest.JobsByName(repairOf("j-repair-1", "j"))})
	if err != nil {
		t.Fatal(err)
	}
	if r := plan.Repairs[0]; r.Shards != "C, D" || r.Job.Name != "j-repair-2" || r.Why != "job j indexes 2,3: job j deleted before completing it" {
		t.Errorf("repair = %+v (job %s)", r, r.Job.Name)
	}
}
