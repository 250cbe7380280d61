package explain

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/explanation"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	"batchledger.dev/batchledger/pkg/cli/options"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
)

// TestExplainDeletedJob: the seed's accepted batch after Job j was deleted by its TTL
// stays ACCEPTED, with the record and the deletion stated; the results still stand.
func TestExplainDeletedJob(t *testing.T) {
	s := clitest.SeedSteps()
	accepted := s.Steps[len(s.Steps)-1]
	var results []account.Result
	for _, r := range s.Chunks[0].Results {
		results = append(results, account.FromRecorded(r))
	}
	ba := clitest.Compute(accepted, clitest.DeletedAt, map[string]account.Observation{}, results...)
	out, errOut, code := run(t, clitest.FakeClient(ba, s.Chunks[0].DeepCopy()), "explain", "account", "ij245", "-n", ns)
	if code != options.ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	clitest.Golden(t, "explain_deleted_job", []byte(out))
	for _, phrase := range []string{
		"ACCEPTED (Accepted)",
		"(DELETED at 2026-11-29T12:00:00Z; the record below stands)",
		"the Job was deleted at 2026-11-29T12:00:00Z, its record stands",
		"Accepted (4 of 4 shards)",
		"Nothing: the batch is Accepted.",
	} {
		if !strings.Contains(out, phrase) {
			t.Errorf("explanation lacks %q:\n%s", phrase, out)
		}
	}
	if strings.Contains(out, v1alpha1.RejectionStaleIdentity) {
		t.Errorf("accepted results turned stale after the Job was deleted:\n%s", out)
	}
}

// TestExplainRuleInvalid: the advice for a rule that does not compile is to fix it.
func TestExplainRuleInvalid(t *testing.T) {
	j := clitest.SeedJob("j", clitest.JobUID, 4).Completed("0-3", 4).ResourceVersion("1").Condition(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, clitest.CompleteT.Time).Obj()
	ba := clitest.IJ245Account()
	ba.Status = account.Compute(account.Input{
		Namespace: ns, Generation: 1, Spec: &ba.Spec, Observations: map[string]account.Observation{"job/j": {Job: jobkind.Facts(j)}},
		Now: metav1.NewTime(clitest.CompleteT.Time), RuleError: "undeclared reference to 'reslt'",
	}).Status
	needed := strings.Join(explanation.BuildExplanation(ba, nil, 0).StillNeeded, "\n")
	if !strings.Contains(needed, "Fix spec.acceptance.rule (ResultsAccepted=False, RuleInvalid): the acceptance rule does not compile in this controller: undeclared reference to 'reslt'") {
		t.Errorf("still needed:\n%s", needed)
	}
}

// TestExplainOnlyOwnedChunks: the manager counts a ShardResults chunk only when its
// label, accountUID and controller owner all name the account; explain lists as accepted
// only the results of such chunks, never those of a chunk someone else labelled for it.
func TestExplainOnlyOwnedChunks(t *testing.T) {
	s := clitest.SeedSteps()
	other := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "BatchAccount", Name: "ij245", UID: "another-account", Controller: ptr.To(true)}
	cases := map[string]struct {
		edit func(c *v1alpha1.ShardResults)
		want int
	}{
		"recorded by the manager": {edit: func(*v1alpha1.ShardResults) {}, want: 4},
		"no controller owner":     {edit: func(c *v1alpha1.ShardResults) { c.OwnerReferences = nil }, want: 0},
		"no accountUID":           {edit: func(c *v1alpha1.ShardResults) { c.AccountUID = "" }, want: 0},
		"controlled by another account": {edit: func(c *v1alpha1.ShardResults) {
			c.OwnerReferences, c.AccountUID = []metav1.OwnerReference{other}, other.UID
		}, want: 0},
		"owner not a BatchAccount": {edit: func(c *v1alpha1.ShardResults) { c.OwnerReferences[0].Kind = "ConfigMap" }, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			chunk := s.Chunks[0].DeepCopy()
			tc.edit(chunk)
			out, errOut, code := run(t, clitest.FakeClient(s.Steps[2].DeepCopy(), s.Job.DeepCopy(), chunk), "explain", "account", "ij245", "-n", ns, "-o", "json")
			if code != options.ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var ex explanation.Explanation
			if err := json.Unmarshal([]byte(out), &ex); err != nil {
				t.Fatal(err)
			}
			if got := len(ex.Results.Accepted); got != tc.want {
				t.Errorf("%d accepted results listed, want %d: %+v", got, tc.want, ex.Results.Accepted)
			}
		})
	}
}

// TestExplainRuleInvalidListsNoAcceptedResult: while the acceptance rule does not compile
// in the controller, no recorded result is judged and none stands (ResultsAccepted
// RuleInvalid, 0 accepted); the recorded results must not be listed as accepted. A batch
// Accepted before the rule broke keeps its verdicts, and its results stand.
func TestExplainRuleInvalidListsNoAcceptedResult(t *testing.T) {
	s := clitest.SeedSteps()
	results := account.RecordedInOrder(s.Chunks)
	judge := func(prev *v1alpha1.BatchAccount) *v1alpha1.BatchAccount {
		ba := prev.DeepCopy()
		ba.Status = account.Compute(account.Input{
			Namespace: ns, Generation: ba.Generation, Spec: &ba.Spec, Previous: &prev.Status,
			Observations: map[string]account.Observation{"job/j": {Job: jobkind.Facts(s.Job), Workload: clitest.WorkloadObs(true)}},
			Results:      results, Now: metav1.NewTime(clitest.CompleteT.Add(time.Hour)), RuleError: "undeclared reference to 'reslt'",
		}).Status
		return ba
	}
	cases := map[string]struct {
		prev *v1alpha1.BatchAccount
		want int
	}{
		"rule broke before the results were judged": {prev: s.Steps[2], want: 0},
		"rule broke after the batch was Accepted":   {prev: s.Steps[3], want: 4},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ba := judge(tc.prev)
			if int(ba.Status.Shards.Accepted) != tc.want {
				t.Fatalf("fixture: %d shards accepted, want %d", ba.Status.Shards.Accepted, tc.want)
			}
			ex := explanation.BuildExplanation(ba, s.Chunks, 0)
			if got := len(ex.Results.Accepted); got != tc.want {
				t.Errorf("%d results listed as accepted, the status accepts %d: %+v", got, tc.want, ex.Results.Accepted)
			}
		})
	}
}
