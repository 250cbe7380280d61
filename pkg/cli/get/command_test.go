package get

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	"batchledger.dev/batchledger/pkg/cli/options"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestGet lists accounts of a namespace, and of every namespace with -A.
func TestGet(t *testing.T) {
	s := clitest.SeedSteps()
	pending := s.Steps[0].DeepCopy()
	done := s.Steps[3].DeepCopy()
	done.Name = "ij245-done"
	repaired, _, _ := clitest.RepairedAccount()
	repaired.Name, repaired.CreationTimestamp = "ij245-repaired", metav1.NewTime(clitest.SeedNow.Add(-26*time.Hour))
	// A large batch whose missing shards do not fit a column.
	big := wrappers.MakeBatchAccount("big", ns).ShardCount("shard-", 100000).AssignJobOrdinals("big", "0-99999", "0-99999").Obj()
	big.Generation, big.CreationTimestamp = 1, metav1.NewTime(clitest.SeedNow.Add(-90*time.Second))
	bigJob := clitest.SeedJob("big", "uid-big", 100000).Completed("0-9,20-29,40-49,60-69,80-89,100-109,120-129,140-149,160-169", 90).ResourceVersion("5").Obj()
	big = clitest.Compute(big, clitest.Time0, map[string]account.Observation{"job/big": {Job: jobkind.Facts(bigJob)}})
	// An account the controller has not seen yet, in another namespace.
	fresh := wrappers.MakeBatchAccount("fresh", "vision").Shards("A").AssignJob("v", "0", "A").Obj()
	fresh.CreationTimestamp = metav1.NewTime(clitest.SeedNow.Add(-3 * time.Second))
	c := clitest.FakeClient(pending, done, repaired, big, fresh)

	out, errOut, code := run(t, c, "get", "-n", ns)
	if code != options.ExitOK || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	clitest.Golden(t, "get", []byte(out))

	out, _, _ = run(t, c, "get", "-A")
	clitest.Golden(t, "get_all_namespaces", []byte(out))

	out, _, _ = run(t, c, "get", "ij245", "-n", ns)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "ij245 ") {
		t.Errorf("get ij245:\n%s", out)
	}
	_, errOut, code = run(t, c, "get", "nope", "-n", ns)
	if code != options.ExitError || !strings.Contains(errOut, `BatchAccount "nope" not found in namespace "ml-team"`) {
		t.Errorf("get nope: exit %d, %q", code, errOut)
	}
	out, errOut, code = run(t, c, "get", "-n", "empty")
	if code != options.ExitOK || out != "" || errOut != "No BatchAccounts found in namespace \"empty\".\n" {
		t.Errorf("get in an empty namespace: exit %d, %q, %q", code, out, errOut)
	}
}

// TestGetSortsByVerdict: accounts that need someone come first, then those still moving
// in the order a batch moves, then those without a verdict, Accepted last; PROGRESS is
// status.shards.progress (accepted shards here: every account requires results).
func TestGetSortsByVerdict(t *testing.T) {
	s := clitest.SeedSteps()
	named := func(name string, ba *v1alpha1.BatchAccount) *v1alpha1.BatchAccount {
		ba = ba.DeepCopy()
		ba.Name, ba.CreationTimestamp = name, metav1.NewTime(clitest.SeedNow.Add(-time.Hour))
		return ba
	}
	fresh := named("a-fresh", clitest.IJ245Account())
	c := clitest.FakeClient(
		named("a-accepted", s.Steps[3]), named("b-pending-results", s.Steps[2]), named("c-awaiting-termination", s.Steps[1]),
		named("d-missing-d", s.Steps[0]), named("e-rejected", clitest.RejectedAccount()), named("f-results-lost", clitest.MissingResultAccount()), fresh,
	)
	out, errOut, code := run(t, c, "get", "-n", ns)
	if code != options.ExitOK || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	clitest.Golden(t, "get_sorted_by_verdict", []byte(out))
	var order []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		order = append(order, strings.Fields(l)[0])
	}
	want := []string{"f-results-lost", "e-rejected", "d-missing-d", "c-awaiting-termination", "b-pending-results", "a-fresh", "a-accepted"}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("order = %v\nwant    %v", order, want)
	}
}

// TestGetStaleVerdict: a status written for an older spec generation judges a spec that
// no longer is. Its Accepted condition is no verdict on the current spec, so VERDICT says
// VerdictPending (as explain does) and the account does not sort among the Accepted.
func TestGetStaleVerdict(t *testing.T) {
	s := clitest.SeedSteps()
	cases := map[string]struct {
		generation  int64
		wantVerdict string
	}{
		"current accepted status": {generation: 1, wantVerdict: v1alpha1.ReasonAccepted},
		"spec changed since":      {generation: 2, wantVerdict: v1alpha1.ReasonVerdictPending},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ba := s.Steps[len(s.Steps)-1].DeepCopy()
			ba.Generation = tc.generation
			accepted := s.Steps[len(s.Steps)-1].DeepCopy()
			accepted.Name = "a-accepted"
			out, errOut, code := run(t, clitest.FakeClient(ba, accepted), "get", "-n", ns)
			if code != options.ExitOK || errOut != "" {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			verdicts := map[string]string{}
			var order []string
			header := strings.Fields(strings.Split(out, "\n")[0])
			col := slices.Index(header, "VERDICT")
			for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
				f := strings.Fields(l)
				verdicts[f[0]] = f[col]
				order = append(order, f[0])
			}
			if verdicts["ij245"] != tc.wantVerdict {
				t.Errorf("VERDICT of ij245 = %q, want %q:\n%s", verdicts["ij245"], tc.wantVerdict, out)
			}
			if tc.wantVerdict != v1alpha1.ReasonAccepted && order[len(order)-1] != "a-accepted" {
				t.Errorf("a stale verdict sorts among the Accepted: %v", order)
			}
		})
	}
}
