package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/explanation"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/repair"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// seedClient serves IJ245 at step i (0-based) with Job j, its Workload and, at the last
// step, the recorded results.
func seedClient(s clitest.IJ245, i int) client.Client {
	objs := []client.Object{s.Steps[i].DeepCopy(), s.Job.DeepCopy(), clitest.WorkloadOf(s.Job)}
	if i == len(s.Steps)-1 {
		for k := range s.Chunks {
			objs = append(objs, s.Chunks[k].DeepCopy())
		}
	}
	return clitest.FakeClient(objs...)
}

// TestExplainIJ245 renders the seed's worked case at each step; the golden files are
// the explanation a person reads.
func TestExplainIJ245(t *testing.T) {
	s := clitest.SeedSteps()
	names := []string{"explain_ij245_1_five_attempts", "explain_ij245_2_all_covered", "explain_ij245_3_complete", "explain_ij245_4_accepted"}
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := run(t, seedClient(s, i), "explain", "account", "ij245", "-n", ns)
			if code != options.ExitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			clitest.Golden(t, name, []byte(out))
		})
	}
}

// TestExplainIJ245Statements pins the statements the seed asks the explanation to make,
// so that a golden file regenerated carelessly cannot lose them.
func TestExplainIJ245Statements(t *testing.T) {
	s := clitest.SeedSteps()
	want := [][]string{
		{"NOT ACCEPTED (ShardsMissing)", "input revision D, model revision m-2026-11", "uid " + string(clitest.JobUID),
			"none: every index 0-3 must succeed", "0-2 (3 indexes), read at Job resourceVersion 48213",
			"5 successful attempts over 3 indexes {0,1,2}; repeated: 1,2", "D      job j index 3",
			"job-j-3f2c9: admitted to ClusterQueue ml-team-gpu on main=nvidia.com/gpu:h100", "3/4 shards covered: shard D waits for job j index 3"},
		{"6 successful attempts over 4 indexes {0,1,2,3}; repeated: 1,2", "Shards: 4 declared, 4 covered, 0 accepted",
			"job j must record Complete (or Failed): coverage does not imply termination."},
		{"Complete (CompletionsReached) recorded at 2026-11-29T10:00:00Z", "NOT ACCEPTED (ResultsPending)", "0/4 shard results accepted; waiting for A..D"},
		{"ACCEPTED (Accepted)", "Accepted (4 of 4 shards)", "D      job j index 3  j-3-x7k23  sha256:a3  s3://batches/ij245/D/D", "Nothing: the batch is Accepted."},
	}
	for i, w := range want {
		out, _, _ := run(t, seedClient(s, i), "explain", "account", "ij245", "-n", ns)
		for _, phrase := range w {
			if !strings.Contains(out, phrase) {
				t.Errorf("step %d: explanation lacks %q:\n%s", i+1, phrase, out)
			}
		}
	}
}

// TestExplainUnjudgedAccount: an account the controller has not written a status for
// declares its shards in the spec; the explanation counts them from there and says the
// account is not judged yet, not that nothing is declared or missing.
func TestExplainUnjudgedAccount(t *testing.T) {
	cases := map[string]struct {
		ba   *v1alpha1.BatchAccount
		want int32
	}{
		"shards by names": {ba: wrappers.MakeBatchAccount("fresh", ns).Shards("A", "B").AssignJob("j", "0-1", "A", "B").Generation(1).Obj(), want: 2},
		"shards by count": {ba: wrappers.MakeBatchAccount("fresh", ns).ShardCount("s", 100000).AssignJobOrdinals("j", "0-99999", "0-99999").Generation(1).Obj(), want: 100000},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, _, code := run(t, clitest.FakeClient(tc.ba), "explain", "account", "fresh", "-n", ns)
			if code != options.ExitOK {
				t.Fatalf("exit %d", code)
			}
			if want := fmt.Sprintf("Shards: %d declared; not judged yet, coverage unknown", tc.want); !strings.Contains(out, want) {
				t.Errorf("explanation lacks %q:\n%s", want, out)
			}
			js, _, _ := run(t, clitest.FakeClient(tc.ba), "explain", "account", "fresh", "-n", ns, "-o", "json")
			var ex explanation.Explanation
			if err := json.Unmarshal([]byte(js), &ex); err != nil {
				t.Fatal(err)
			}
			if ex.Shards.Total != tc.want || !ex.Shards.NotJudged {
				t.Errorf("shards = %+v, want total %d, not judged", ex.Shards, tc.want)
			}
		})
	}
	// Once judged, the status's counts stand and nothing says otherwise.
	out, _, _ := run(t, seedClient(clitest.SeedSteps(), 0), "explain", "account", "ij245", "-n", ns)
	if strings.Contains(out, "not judged") {
		t.Errorf("a judged account is said not judged:\n%s", out)
	}
}

// TestExplainYAML: -o yaml prints the structured Explanation, not the raw object.
func TestExplainYAML(t *testing.T) {
	s := clitest.SeedSteps()
	out, _, code := run(t, seedClient(s, 0), "explain", "account", "ij245", "-n", ns, "-o", "yaml")
	if code != options.ExitOK {
		t.Fatalf("exit %d", code)
	}
	clitest.Golden(t, "explain_ij245_1_five_attempts_yaml", []byte(out))

	js, _, _ := run(t, seedClient(s, 0), "explain", "account", "ij245", "-n", ns, "-o", "json")
	var ex explanation.Explanation
	if err := json.Unmarshal([]byte(js), &ex); err != nil {
		t.Fatalf("-o json is not an Explanation: %v\n%s", err, js)
	}
	if ex.APIVersion != "cli.batchledger.dev/v1alpha1" || ex.Kind != "Explanation" {
		t.Errorf("-o json is %s %s, want the versioned kind cli.batchledger.dev/v1alpha1 Explanation", ex.APIVersion, ex.Kind)
	}
	if ex.Verdict.Accepted || ex.Shards.Missing != "D" || len(ex.Shards.MissingShards) != 1 ||
		ex.Shards.MissingShards[0].WaitsFor[0] != (explanation.Identity{Target: "job/j", Index: 3, State: "not completed yet; the Job is running"}) ||
		ex.Jobs[0].Attempts.Successful != 5 || ex.Jobs[0].Attempts.Indexes != 3 {
		t.Errorf("explanation = %+v", ex)
	}
}

// TestExplainOutputs: each -o prints the versioned Explanation through kubectl's printers;
// an object concerning several accounts prints an ExplanationList.
func TestExplainOutputs(t *testing.T) {
	s := clitest.SeedSteps()
	other := wrappers.MakeBatchAccount("ij245-twin", ns).Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Obj()
	cases := []struct {
		name string
		c    client.Client
		args []string
		want string
	}{
		{"jsonpath", seedClient(s, 0), []string{"explain", "account", "ij245", "-o", "jsonpath={.kind} {.shards.missing} {.verdict.reason}"}, "Explanation D ShardsMissing"},
		{"jsonpath-as-json", seedClient(s, 0), []string{"explain", "account", "ij245", "-o", "jsonpath-as-json={.verdict.accepted}"}, "[\n    false\n]\n"},
		{"go-template", seedClient(s, 0), []string{"explain", "account", "ij245", "-o", "go-template={{.apiVersion}}/{{.account}}"}, "cli.batchledger.dev/v1alpha1/ij245"},
		{"json head", seedClient(s, 0), []string{"explain", "account", "ij245", "-o", "json"}, "{\n    \"kind\": \"Explanation\",\n    \"apiVersion\": \"cli.batchledger.dev/v1alpha1\",\n    \"account\": \"ij245\","},
		{"several accounts", clitest.FakeClient(s.Steps[0].DeepCopy(), s.Job.DeepCopy(), other), []string{"explain", "job", "j", "-o", "jsonpath={.kind}: {.items[*].kind} {.items[*].account}"}, "ExplanationList: Explanation Explanation ij245 ij245-twin"},
		{"--template alone is a go-template", seedClient(s, 0), []string{"explain", "account", "ij245", "--template", "{{.kind}}"}, "Explanation"},
		{"text is the default", seedClient(s, 0), []string{"explain", "account", "ij245", "-o", "text"}, "BatchAccount ml-team/ij245\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, tc.c, append(tc.args, "-n", ns)...)
			if code != options.ExitOK || !strings.HasPrefix(out, tc.want) {
				t.Errorf("exit %d (stderr %q):\n%s\nwant it to start with:\n%s", code, errOut, out, tc.want)
			}
		})
	}
	if _, errOut, code := run(t, seedClient(s, 0), "explain", "account", "ij245", "-n", ns, "-o", "name"); code != options.ExitError || !strings.Contains(errOut, `unsupported output format "name"`) {
		t.Errorf("-o name: exit %d, %q; an Explanation has no name to print", code, errOut)
	}
}

// TestExplainResolves: a Workload resolves through its owner Job, a Job to the accounts
// targeting it; all explain the same account.
func TestExplainResolves(t *testing.T) {
	s := clitest.SeedSteps()
	want, _, _ := run(t, seedClient(s, 0), "explain", "account", "ij245", "-n", ns)
	for _, args := range [][]string{
		{"explain", "workload", "job-j-3f2c9"},
		{"explain", "job", "j"},
		{"explain", "job/j"},
		{"explain", "ba", "ij245"},
	} {
		got, errOut, code := run(t, seedClient(s, 0), append(args, "-n", ns)...)
		if code != options.ExitOK || got != want {
			t.Errorf("%v: exit %d stderr %q; output differs from explain account:\n%s", args, code, errOut, got)
		}
	}

	// A JobSet child resolves to the account targeting its JobSet replicatedJob.
	child := clitest.SeedJob("train-workers-1", "uid-w1", 4).ResourceVersion("7").
		JobSetChild(wrappers.MakeJobSet("train", ns).Obj(), "workers", 1, 0).Obj()
	other := wrappers.MakeBatchAccount("train", ns).ShardCount("s", 8).
		AssignJobSet("train", "workers", 0, "0-3", "0-3").AssignJobSet("train", "workers", 1, "0-3", "4-7").Obj()
	c := clitest.FakeClient(s.Steps[0].DeepCopy(), child, other)
	for _, args := range [][]string{{"explain", "job", "train-workers-1"}, {"explain", "jobset", "train"}} {
		out, errOut, code := run(t, c, append(args, "-n", ns)...)
		if code != options.ExitOK || !strings.Contains(out, "BatchAccount ml-team/train\n") || strings.Contains(out, "ij245") {
			t.Errorf("%v: exit %d stderr %q:\n%s", args, code, errOut, out)
		}
	}
}

// TestExplainErrors: failures exit 1 with a message naming the object.
func TestExplainErrors(t *testing.T) {
	s := clitest.SeedSteps()
	orphan := clitest.WorkloadOf(s.Job)
	orphan.Name, orphan.OwnerReferences = "orphan", nil
	c := clitest.FakeClient(s.Steps[0].DeepCopy(), s.Job.DeepCopy(), orphan, wrappers.MakeJob("lonely", ns).Obj())
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"explain", "account", "nope"}, `error: BatchAccount "nope" not found in namespace "ml-team"`},
		{[]string{"explain", "workload", "nope"}, `error: Workload "nope" not found in namespace "ml-team"`},
		{[]string{"explain", "workload", "orphan"}, `error: Workload "orphan" in namespace "ml-team" is owned by no Job, JobSet or TrainJob`},
		{[]string{"explain", "job", "lonely"}, `error: no BatchAccount in namespace "ml-team" targets Job "lonely"`},
		{[]string{"explain", "job", "ghost"}, `error: Job "ghost" not found in namespace "ml-team", and no BatchAccount there targets it`},
		{[]string{"explain", "jobset", "train"}, `error: no BatchAccount in namespace "ml-team" targets JobSet "train"`},
		{[]string{"explain", "pod", "x"}, `error: unknown kind "pod"`},
		{[]string{"explain", "account", "ij245", "-o", "wide"}, `error: unsupported output format "wide"`},
		{[]string{"explain", "account", "ij245", "--max-rows", "-1"}, `error: --max-rows must not be negative`},
	}
	for _, tc := range cases {
		out, errOut, code := run(t, c, append(tc.args, "-n", ns)...)
		if code != options.ExitError || !strings.HasPrefix(errOut, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestExplainExitCode: --exit-code returns 2 while the batch is not Accepted, 0 once it is.
func TestExplainExitCode(t *testing.T) {
	s := clitest.SeedSteps()
	for i, want := range []int{options.ExitNotAccepted, options.ExitNotAccepted, options.ExitNotAccepted, options.ExitOK} {
		out, errOut, code := run(t, seedClient(s, i), "explain", "job", "j", "-n", ns, "--exit-code", "-o", "json")
		if code != want || errOut != "" || out == "" {
			t.Errorf("step %d: exit %d (stderr %q), want %d with the explanation printed", i+1, code, errOut, want)
		}
		if _, _, code := run(t, seedClient(s, i), "explain", "job", "j", "-n", ns); code != options.ExitOK {
			t.Errorf("step %d without --exit-code: exit %d, want 0", i+1, code)
		}
	}
}

// TestExplainBounded: 100,000 shards of which 99,990 are missing explain in a page:
// every table is bounded and says how much it left out.
func TestExplainBounded(t *testing.T) {
	ba := wrappers.MakeBatchAccount("big", ns).ShardCount("s", 100000).AssignJobOrdinals("big", "0-99999", "0-99999").Generation(1).Obj()
	job := clitest.SeedJob("big", "uid-big", 100000).Completed("0-9", 10).ResourceVersion("5").Obj()
	ba = clitest.Compute(ba, clitest.Time0, map[string]account.Observation{"job/big": {Job: jobkind.Facts(job)}})
	out, _, code := run(t, clitest.FakeClient(ba, job), "explain", "account", "big", "-n", ns, "--max-rows", "5")
	if code != options.ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, phrase := range []string{"missing s10..s99999", "s14    job big index 14",
		"+99985 more missing shards (`kubectl batchledger explain account big -n ml-team --max-rows=99990` lists them all)",
		"shards s10, s11, s12, s13 and 99986 more wait for job big index 10"} {
		if !strings.Contains(out, phrase) {
			t.Errorf("bounded explanation lacks %q", phrase)
		}
	}
	if lines := strings.Count(out, "\n"); lines > 60 {
		t.Errorf("explanation of a 100,000-shard batch is %d lines:\n%s", lines, out)
	}
}

// TestStillNeededPastTheFirstRows: what is still needed judges every missing shard the
// status lists, not only the rows the table shows, and counts each group whole; each
// table says how many rows it left out and how to list them.
func TestStillNeededPastTheFirstRows(t *testing.T) {
	s := clitest.SeedSteps()
	cases := map[string]struct {
		ba      *v1alpha1.BatchAccount
		objs    []client.Object
		args    []string
		want    []string
		mustNot []string
	}{
		"the only missing shard is lost": {ba: clitest.FailedAccount(), want: []string{
			"3/4 shards covered: shard D can no longer be covered by job j index 3", "Run `kubectl batchledger repair ij245 -n ml-team`"},
			mustNot: []string{"more missing shards"}},
		// big-7's 1,600 missing shards may still complete, as big-9's 10,000 may; big-8's
		// 200 failed ones come between them in ordinal order and never will.
		"lost shards behind 1,600 pending ones": {ba: clitest.BigAccount(), want: []string{
			"88200/100000 shards covered: shards shard-73000, shard-73001, shard-73002, shard-73003 and 11596 more wait for job big-7 index 3000",
			"88200/100000 shards covered: shards shard-85000, shard-85001, shard-85002, shard-85003 and 196 more can no longer be covered by job big-8 index 5000",
			"Run `kubectl batchledger repair big -n ml-team` to re-run them",
			"+11780 more missing shards (`kubectl batchledger explain account big -n ml-team --max-rows=11800` lists them all)"}},
		"all rows listed": {ba: clitest.BigAccount(), args: []string{"--max-rows=11800"}, want: []string{
			"shard-99999  job big-9 index 9999", "and 196 more can no longer be covered by job big-8 index 5000"},
			mustNot: []string{"more missing shards"}},
		"accepted results past the rows": {ba: s.Steps[3], objs: []client.Object{s.Job, &s.Chunks[0]}, args: []string{"--max-rows=2"}, want: []string{
			"+2 more (`kubectl batchledger explain account ij245 -n ml-team --max-rows=4` lists them all)"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := run(t, clitest.FakeClient(append([]client.Object{tc.ba}, tc.objs...)...), append([]string{"explain", "account", tc.ba.Name, "-n", ns}, tc.args...)...)
			if code != options.ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, phrase := range tc.want {
				if !strings.Contains(out, phrase) {
					t.Errorf("explanation lacks %q:\n%s", phrase, tail(out))
				}
			}
			for _, phrase := range tc.mustNot {
				if strings.Contains(out, phrase) {
					t.Errorf("explanation says %q:\n%s", phrase, tail(out))
				}
			}
		})
	}
}

// tail is the end of an explanation, from its shards on: what a failure is about.
func tail(out string) string {
	if i := strings.Index(out, "\nShards:"); i >= 0 {
		out = out[i:]
	}
	if lines := strings.Split(out, "\n"); len(lines) > 60 {
		return strings.Join(lines[:25], "\n") + "\n...\n" + strings.Join(lines[len(lines)-30:], "\n")
	}
	return out
}

// TestExplainRepaired renders an account whose Job failed on index 3 and whose shard D a
// repair Job covered: the failure, the repair identity and the verdict.
func TestExplainRepaired(t *testing.T) {
	ba, j, r := clitest.RepairedAccount()
	out, _, code := run(t, clitest.FakeClient(ba, j, r), "explain", "account", "ij245", "-n", ns)
	if code != options.ExitOK {
		t.Fatalf("exit %d", code)
	}
	clitest.Golden(t, "explain_repaired", []byte(out))
}

// TestStillNeededNamesRepairForFailedJobs: a shard whose Job failed can no longer be
// covered by it, and the explanation names the repair command.
func TestStillNeededNamesRepairForFailedJobs(t *testing.T) {
	ba := clitest.FailedAccount()
	ex := explanation.BuildExplanation(ba, nil, 0)
	got := strings.Join(ex.StillNeeded, "\n")
	want := "3/4 shards covered: shard D can no longer be covered by job j index 3 (job j Failed (BackoffLimitExceeded) without completing it). " +
		"Run `kubectl batchledger repair ij245 -n ml-team` to re-run it in a follow-up Job joined by a repair assignment."
	if !strings.Contains(got, want) {
		t.Errorf("still needed:\n%s\nwant it to contain:\n%s", got, want)
	}
}

// TestExplainRejected: a result with the wrong model revision and a forged claim are
// rejected; the explanation lists them and what replaces them.
func TestExplainRejected(t *testing.T) {
	s := clitest.SeedSteps()
	chunk := s.Chunks[0].DeepCopy()
	chunk.Results[2].ModelRevision = "m-2026-10"
	forged := chunk.Results[1]
	forged.Pod, forged.PodUID, forged.Shard, forged.Digest = "j-1-forged", "pod-forged", "D", "sha256:ff"
	forged.RecordedAt = metav1.NewTime(forged.RecordedAt.Add(time.Hour))
	chunk.Results = append(chunk.Results, forged)
	var results []account.Result
	for _, rr := range chunk.Results {
		results = append(results, account.Result{
			Target: rr.Target, JobUID: rr.JobUID, Index: int(rr.Index), Pod: rr.Pod, PodUID: rr.PodUID,
			Shard: rr.Shard, InputRevision: rr.InputRevision, ModelRevision: rr.ModelRevision, Digest: rr.Digest,
		})
	}
	ba := clitest.Compute(s.Steps[2], clitest.CompleteT.Add(2*time.Hour), map[string]account.Observation{"job/j": {Job: jobkind.Facts(s.Job), Workload: clitest.WorkloadObs(true)}}, results...)
	out, _, code := run(t, clitest.FakeClient(ba, s.Job, chunk), "explain", "account", "ij245", "-n", ns)
	if code != options.ExitOK {
		t.Fatalf("exit %d", code)
	}
	clitest.Golden(t, "explain_rejected", []byte(out))
	if !strings.Contains(out, "Accepted (3 of 4 shards)") || strings.Contains(out, "C      job j index 2  j-2-x7k22  sha256") {
		t.Errorf("shard C's rejected result must not be listed as accepted:\n%s", out)
	}
}

// TestExplainTargetMissing: an account whose Job never appeared says to create it.
func TestExplainTargetMissing(t *testing.T) {
	ba := wrappers.MakeBatchAccount("ghost", ns).Shards("A", "B").AssignJob("ghost", "0-1", "A", "B").Generation(1).Obj()
	ba = clitest.Compute(ba, clitest.Time0, nil)
	out, _, code := run(t, clitest.FakeClient(ba), "explain", "job", "ghost", "-n", ns)
	if code != options.ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, phrase := range []string{"Job:       the Job does not exist (yet, or any more)", "A      job ghost index 0  Job not found",
		"0/2 shards covered: shards A, B are assigned to job ghost index 0, job ghost index 1, which does not exist: create it."} {
		if !strings.Contains(out, phrase) {
			t.Errorf("explanation lacks %q:\n%s", phrase, out)
		}
	}
}

// TestHugeAccountBoundedStatus: a million shards with every other index missing make a
// status the controller bounds (completedIndexes omitted, missing ordinals truncated).
// explain still counts everything and says what was left out; repair refuses with a
// reason instead of repairing a partial list.
func TestHugeAccountBoundedStatus(t *testing.T) {
	const n = 1000000
	var done strings.Builder
	for i := 0; i < n; i += 2 {
		if i > 0 {
			done.WriteByte(',')
		}
		done.WriteString(strconv.Itoa(i))
	}
	ba := wrappers.MakeBatchAccount("huge", ns).ShardCount("s", n).AssignJobOrdinals("huge", fmt.Sprintf("0-%d", n-1), fmt.Sprintf("0-%d", n-1)).Generation(1).Obj()
	job := clitest.SeedJob("huge", "uid-huge", n).Completed(done.String(), n/2).ResourceVersion("7").Obj()
	ba = clitest.Compute(ba, clitest.Time0, map[string]account.Observation{"job/huge": {Job: jobkind.Facts(job)}})
	if !ba.Status.Shards.MissingOrdinalsTruncated || !ba.Status.Targets[0].CompletedIndexesOmitted {
		t.Fatalf("the status was not bounded: truncated=%v omitted=%v", ba.Status.Shards.MissingOrdinalsTruncated, ba.Status.Targets[0].CompletedIndexesOmitted)
	}

	out, _, code := run(t, clitest.FakeClient(ba, job), "explain", "account", "huge", "-n", ns, "--max-rows", "5")
	if code != options.ExitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, phrase := range []string{"500000/1000000 shards covered", "(500000 indexes)", "omitted from the account status", "+499995 more missing shards"} {
		if !strings.Contains(out, phrase) {
			t.Errorf("explanation lacks %q:\n%s", phrase, out)
		}
	}

	_, err := repair.NewPlan(repair.Input{Account: ba, Jobs: clitest.JobsByName(job)})
	if err == nil || !strings.Contains(err.Error(), "500000 shards are missing, more than the status can list") {
		t.Errorf("repair of a truncated list: %v", err)
	}
}

// TestExplainStaleVerdict: a status written for an older spec generation judges a spec
// that no longer is; its Accepted condition is no verdict on the current spec, so explain
// neither reports the batch ACCEPTED nor lets --exit-code pass it, as the Workload's
// conditions (VerdictPending) and watch do not.
func TestExplainStaleVerdict(t *testing.T) {
	s := clitest.SeedSteps()
	cases := map[string]struct {
		generation int64
		wantCode   int
		wantText   []string
	}{
		"current accepted status": {generation: 1, wantCode: options.ExitOK, wantText: []string{"ACCEPTED (Accepted)", "Nothing: the batch is Accepted."}},
		"spec changed since": {generation: 2, wantCode: options.ExitNotAccepted, wantText: []string{
			"NOT ACCEPTED (VerdictPending)", "STALE: the spec is at generation 2", "wait for the controller to observe the latest spec"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ba := s.Steps[len(s.Steps)-1].DeepCopy()
			ba.Generation = tc.generation
			objs := []client.Object{ba, s.Job.DeepCopy(), s.Chunks[0].DeepCopy()}
			if _, errOut, code := run(t, clitest.FakeClient(objs...), "explain", "account", "ij245", "-n", ns, "--exit-code", "-o", "json"); code != tc.wantCode {
				t.Errorf("--exit-code: exit %d (stderr %q), want %d", code, errOut, tc.wantCode)
			}
			out, _, _ := run(t, clitest.FakeClient(objs...), "explain", "account", "ij245", "-n", ns)
			for _, phrase := range tc.wantText {
				if !strings.Contains(out, phrase) {
					t.Errorf("explanation lacks %q:\n%s", phrase, out)
				}
			}
		})
	}
}

// TestExplainStatusOfLargerSpec: the spec may declare fewer shards than the status it has
// not been judged against yet describes (the population was corrected); ordinals of the
// status past the spec's shards name no shard, and explaining the account must not
// crash on them (watch explains every change it sees).
func TestExplainStatusOfLargerSpec(t *testing.T) {
	cases := map[string]func(ba *v1alpha1.BatchAccount){
		"rejected result of a shard no longer declared": func(ba *v1alpha1.BatchAccount) {},
		"missing result of a shard no longer declared": func(ba *v1alpha1.BatchAccount) {
			ba.Status.Results.MissingOrdinals, ba.Status.Results.Missing = ba.Status.Results.RejectedOrdinals, 1
			ba.Status.Results.RejectedOrdinals = ""
		},
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			ba := clitest.RejectedAccount() // shard C (ordinal 2) has only a rejected result
			if ba.Status.Results.RejectedOrdinals != "2" {
				t.Fatalf("fixture: rejected ordinals %q", ba.Status.Results.RejectedOrdinals)
			}
			edit(ba)
			ba.Spec.Shards.Names = []string{"A", "B"}
			ba.Spec.Assignments[0].Indexes, ba.Spec.Assignments[0].Shards = "0-1", []string{"A", "B"}
			ba.Generation = 2
			out, errOut, code := run(t, clitest.FakeClient(ba), "explain", "account", "ij245", "-n", ns)
			if code != options.ExitOK || !strings.Contains(out, "STALE: the spec is at generation 2") {
				t.Errorf("exit %d (stderr %q):\n%s", code, errOut, out)
			}
		})
	}
}

// TestExplainWithoutTheCRD: on a cluster that does not serve the BatchAccount API (the
// CRD is not installed), the error says so, whichever way the account is looked up.
func TestExplainWithoutTheCRD(t *testing.T) {
	noMatch := &meta.NoKindMatchError{GroupKind: v1alpha1.GroupVersion.WithKind("BatchAccount").GroupKind(), SearchedVersions: []string{v1alpha1.GroupVersion.Version}}
	c := interceptor.NewClient(clitest.FakeClient(clitest.SeedJob("j", clitest.JobUID, 4).Obj()), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*v1alpha1.BatchAccount); ok {
				return noMatch
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*v1alpha1.BatchAccountList); ok {
				return noMatch
			}
			return c.List(ctx, list, opts...)
		},
	})
	for _, args := range [][]string{{"explain", "account", "ij245"}, {"explain", "job", "j"}} {
		_, errOut, code := run(t, c, append(args, "-n", ns)...)
		if code != options.ExitError || !strings.Contains(errOut, "the BatchAccount API (batchledger.dev/v1alpha1) is not served by this cluster: is batchledger installed?") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// TestStillNeededAgreesWithRepair: what is still needed sends the user to `kubectl
// batchledger repair` exactly when repair would plan the account. repair refuses the
// whole plan, the shards of plain Jobs too, while a shard it would re-run is assigned to
// a JobSet or TrainJob child, when the status names only the lowest missing shards, and
// while the status judges an older spec generation; the advice must then say so, not
// "run repair".
func TestStillNeededAgreesWithRepair(t *testing.T) {
	// Job j covered shard s0 and failed on s1; the child covered s2 and failed on s3,
	// and its owner ended.
	jobJ := clitest.SeedJob("j", "uid-j", 2).Completed("0", 1).ResourceVersion("9").
		Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj()
	child := clitest.SeedJob("train-node-0", "uid-n0", 2).Completed("0", 1).ResourceVersion("9").
		Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj()
	// This child failed before it covered either of its shards.
	childNone := clitest.SeedJob("train-node-0", "uid-n0", 2).ResourceVersion("9").
		Failed(batchv1.JobReasonBackoffLimitExceeded, clitest.FailedAt.Time).Obj()
	// Job k covered s0 and s1 and completed; no result can arrive for them.
	jobK := clitest.SeedJob("k", "uid-k", 2).Completed("0-1", 2).ResourceVersion("9").Complete(clitest.CompleteT.Time).Obj()
	mixed := func(childTarget func(*wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper, key string) *v1alpha1.BatchAccount {
		ba := childTarget(wrappers.MakeBatchAccount("mixed", ns).ShardCount("s", 4).AssignJobOrdinals("j", "0-1", "0-1")).Generation(1).Obj()
		return clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{
			"job/j": {Job: jobkind.Facts(jobJ)},
			key:     {Job: jobkind.Facts(child), OwnerEnded: "Failed"},
		})
	}
	truncated := clitest.FailedAccount()
	truncated.Status.Shards.MissingOrdinalsTruncated = true
	stale := clitest.FailedAccount()
	stale.Generation = 2
	cases := map[string]struct {
		ba   *v1alpha1.BatchAccount
		jobs []*batchv1.Job
		// want is what the advice says instead of "run repair" when repair refuses.
		want string
	}{
		"a plain Job's lost shard": {ba: clitest.FailedAccount(), jobs: []*batchv1.Job{clitest.FailedJob()}},
		"lost shards of a plain Job and a JobSet child": {
			ba: mixed(func(w *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
				return w.AssignJobSet("train", "node", 0, "0-1", "2-3")
			}, "jobset/train/node/0"),
			jobs: []*batchv1.Job{jobJ, child},
			want: "it refuses the whole plan while shards of JobSet children are to be re-run too",
		},
		"lost shards of a plain Job and a TrainJob node": {
			ba: mixed(func(w *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
				return w.AssignTrainJob("train", "node", 0, "0-1", "2-3")
			}, "trainjob/train/node/0"),
			jobs: []*batchv1.Job{jobJ, child},
			want: "it refuses the whole plan while shards of TrainJob children are to be re-run too",
		},
		"lost results of a plain Job and a lost shard of a JobSet child": {
			ba: func() *v1alpha1.BatchAccount {
				ba := wrappers.MakeBatchAccount("mixed", ns).ShardCount("s", 4).AssignJobOrdinals("k", "0-1", "0-1").
					AssignJobSet("train", "node", 0, "0-1", "2-3").RequireResults(clitest.SeedRule).Generation(1).Obj()
				return clitest.Compute(ba, clitest.CompleteT.Time, map[string]account.Observation{
					"job/k":               {Job: jobkind.Facts(jobK), PodsListed: true},
					"jobset/train/node/0": {Job: jobkind.Facts(childNone), OwnerEnded: "Failed", PodsListed: true},
				})
			}(),
			jobs: []*batchv1.Job{jobK, childNone},
			want: "it refuses the whole plan while shards of JobSet children are to be re-run too",
		},
		"a status of an older spec generation": {ba: stale, jobs: []*batchv1.Job{clitest.FailedJob()},
			want: "Once the controller has observed the latest spec, `kubectl batchledger repair ij245 -n ml-team` can re-run it"},
		"a status that names only the lowest missing shards": {ba: truncated, jobs: []*batchv1.Job{clitest.FailedJob()},
			want: "`kubectl batchledger repair` refuses this account: the status names only the lowest of the shards to re-run"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			needed := strings.Join(explanation.BuildExplanation(tc.ba, nil, 0).StillNeeded, "\n")
			_, err := repair.NewPlan(repair.Input{Account: tc.ba, Jobs: clitest.JobsByName(tc.jobs...)})
			advises := strings.Contains(needed, "Run `kubectl batchledger repair")
			if advises != (err == nil) {
				t.Errorf("still needed advises repair: %v, but repair plans: %v (%v):\n%s", advises, err == nil, err, needed)
			}
			if tc.want != "" && !strings.Contains(needed, tc.want) {
				t.Errorf("still needed lacks %q:\n%s", tc.want, needed)
			}
		})
	}
}

// TestExplainRerunOfAcceptedJob: a Job re-run under the name of an Accepted account's
// target, and its Workload, are another batch's (account.Follows): explain does not show
// the account's verdict as theirs, and says which account names them and why it does not
// speak for them. The identities on record still explain the account.
func TestExplainRerunOfAcceptedJob(t *testing.T) {
	s := clitest.SeedSteps()
	accepted := s.Steps[len(s.Steps)-1]
	rerun := clitest.SeedJob("j", "uid-rerun", 4).ResourceVersion("9").Obj()
	rerunWL := wrappers.MakeWorkload("job-j-rerun", ns).UID("wl-rerun").ForJob(rerun).Obj()
	// An account naming j that has not judged yet follows every Job of the name.
	pending := wrappers.MakeBatchAccount("ij245-next", ns).Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Generation(1).Obj()
	const notThisRun = `BatchAccount "ij245" names Job "j" but was Accepted on an earlier run of the name (Job uid ` + string(clitest.JobUID) + `): it speaks for nothing of this run`
	cases := []struct {
		name     string
		objs     []client.Object
		args     []string
		wantCode int
		// wantOut is in stdout, wantErr in stderr; notOut must not be in stdout.
		wantOut, wantErr, notOut string
	}{
		{
			name: "re-run job", objs: []client.Object{accepted.DeepCopy(), rerun.DeepCopy(), rerunWL.DeepCopy()},
			args: []string{"explain", "job", "j", "--exit-code"}, wantCode: options.ExitError,
			wantErr: `error: no BatchAccount follows Job "j" (uid uid-rerun): ` + notThisRun, notOut: "ACCEPTED",
		},
		{
			name: "re-run workload", objs: []client.Object{accepted.DeepCopy(), rerun.DeepCopy(), rerunWL.DeepCopy()},
			args: []string{"explain", "workload", "job-j-rerun", "-o", "json"}, wantCode: options.ExitError,
			wantErr: `error: no BatchAccount follows Workload "job-j-rerun" (uid wl-rerun): ` + notThisRun, notOut: `"accepted": true`,
		},
		{
			name: "re-run job with an account following it", objs: []client.Object{accepted.DeepCopy(), pending.DeepCopy(), rerun.DeepCopy()},
			args: []string{"explain", "job", "j"}, wantCode: options.ExitOK,
			wantOut: "BatchAccount ml-team/ij245-next\n", wantErr: "Warning: " + notThisRun, notOut: "BatchAccount ml-team/ij245\n",
		},
		{
			name: "job on record", objs: []client.Object{accepted.DeepCopy(), s.Job.DeepCopy(), clitest.WorkloadOf(s.Job)},
			args: []string{"explain", "job", "j", "--exit-code"}, wantCode: options.ExitOK, wantOut: "ACCEPTED (Accepted)",
		},
		{
			name: "workload on record", objs: []client.Object{accepted.DeepCopy(), s.Job.DeepCopy(), clitest.WorkloadOf(s.Job)},
			args: []string{"explain", "workload", "job-j-3f2c9", "--exit-code"}, wantCode: options.ExitOK, wantOut: "ACCEPTED (Accepted)",
		},
		{
			name: "the account itself", objs: []client.Object{accepted.DeepCopy(), rerun.DeepCopy()},
			args: []string{"explain", "account", "ij245", "--exit-code"}, wantCode: options.ExitOK, wantOut: "ACCEPTED (Accepted)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, clitest.FakeClient(tc.objs...), append(tc.args, "-n", ns)...)
			if code != tc.wantCode || !strings.Contains(out, tc.wantOut) || !strings.Contains(errOut, tc.wantErr) ||
				(tc.notOut != "" && strings.Contains(out, tc.notOut)) || (tc.wantErr == "" && errOut != "") {
				t.Errorf("exit %d, want %d; stderr %q, want %q; stdout (want %q, not %q):\n%s", code, tc.wantCode, errOut, tc.wantErr, tc.wantOut, tc.notOut, out)
			}
		})
	}
}
