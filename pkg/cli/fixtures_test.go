package cli

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the current output")

// golden compares got with testdata/<name>.golden, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/cli -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update after checking it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

const (
	ns       = "ml-team"
	seedRule = "result.valid == result.records && result.records > 0"
	jobUID   = types.UID("0f3c9a2e-5b7d-4c1a-9e8f-2d6b4a1c7e30")
	wlUID    = types.UID("7a1d2c3b-0e9f-4a8b-b6c5-d4e3f2a1b0c9")
)

var (
	time0     = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	completeT = metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	seedNow   = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

// seedJob is an Indexed Job of the seed's namespace, queued, one GPU a pod, stamped by the
// scope webhook for an account that requires results; its status setters (Completed,
// Complete, Failed) make it the snapshot the Job controller would have written.
func seedJob(name string, uid types.UID, completions int32) *wrappers.JobWrapper {
	return wrappers.MakeJob(name, ns).Indexed(completions).Queue("default").GPU(1).
		PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).UID(string(uid))
}

// attempts are the successful attempts of job's listed indexes, extracted by the
// controller's own rule from succeeded pods named <prefix>-<n>.
func attempts(job *batchv1.Job, prefix string, indexes ...int) []account.PodAttempt {
	return relations.SuccessfulAttempts(job, wrappers.SucceededIndexPods(job, prefix, time0, indexes...))
}

func workloadObs(finished bool) *v1alpha1.WorkloadObservation {
	return &v1alpha1.WorkloadObservation{
		Name: "job-j-3f2c9", UID: wlUID, Admitted: true, ClusterQueue: "ml-team-gpu",
		Flavors: []string{"main=nvidia.com/gpu:h100"}, Finished: finished, ObservedResourceVersion: "48190",
	}
}

// ij245 holds the account at each step of the seed's worked case, each computed by
// account.Compute on the previous status, as the controller would.
type ij245 struct {
	steps  []*v1alpha1.BatchAccount
	job    *batchv1.Job // Job j at the last step
	chunks []v1alpha1.ShardResults
}

func ij245Account() *v1alpha1.BatchAccount {
	ba := wrappers.MakeBatchAccount("ij245", ns).Shards("A", "B", "C", "D").
		AssignJob("j", "0-3", "A", "B", "C", "D").RequireResults(seedRule).
		Generation(1).UID("b1e2d3c4-0000-4000-8000-000000000245").Creation(time0.Add(-time.Hour)).Obj()
	return ba
}

// compute advances an account by one observation, on top of its previous status.
func compute(ba *v1alpha1.BatchAccount, now time.Time, obs map[string]account.Observation, results ...account.Result) *v1alpha1.BatchAccount {
	next := ba.DeepCopy()
	next.Status = account.Compute(account.Input{
		Namespace: ba.Namespace, Generation: ba.Generation, Spec: &ba.Spec, Previous: &ba.Status,
		Observations: obs, Results: results, Now: metav1.NewTime(now),
	}).Status
	return next
}

// seedSteps plays IJ245: (1) five successful attempts over {0,1,2}, D missing; (2) a
// sixth attempt on index 3, all covered, not terminated; (3) Complete recorded, results
// pending; (4) accepted results for A-D: Accepted.
func seedSteps() ij245 {
	var s ij245
	ba := ij245Account()
	j := seedJob("j", jobUID, 4).Completed("0-2", 3).ResourceVersion("48213").Obj()
	ba = compute(ba, time0, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), SuccessfulPods: attempts(j, "p", 0, 1, 1, 2, 2), Workload: workloadObs(false)}})
	s.steps = append(s.steps, ba)

	// The Job controller deleted the repeats meanwhile; the account's ledger kept them.
	j = seedJob("j", jobUID, 4).Completed("0-3", 4).ResourceVersion("48250").Obj()
	ba = compute(ba, time0.Add(5*time.Minute), map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), SuccessfulPods: attempts(j, "q", 3), Workload: workloadObs(false)}})
	s.steps = append(s.steps, ba)

	j = seedJob("j", jobUID, 4).Completed("0-3", 4).ResourceVersion("48262").Complete(completeT.Time).Obj()
	ba = compute(ba, completeT.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), Workload: workloadObs(true)}})
	s.steps = append(s.steps, ba)

	var results []account.Result
	var recorded []v1alpha1.RecordedResult
	for i, shard := range []string{"A", "B", "C", "D"} {
		rr := v1alpha1.RecordedResult{
			Ordinal: int32(i), Shard: shard, Target: "job/j", JobUID: jobUID, Index: int32(i),
			Pod: fmt.Sprintf("j-%d-x7k2%d", i, i), PodUID: types.UID(fmt.Sprintf("pod-%d", i)),
			InputRevision: "D", ModelRevision: "m-2026-11",
			Output: "s3://batches/ij245/D/" + shard, Digest: fmt.Sprintf("sha256:%x", 0xa0+i), Records: 1000, Valid: 1000,
			RecordedAt: metav1.NewTime(completeT.Add(time.Duration(i+1) * time.Second)),
		}
		recorded = append(recorded, rr)
		results = append(results, account.Result{
			Target: rr.Target, JobUID: rr.JobUID, Index: int(rr.Index), Pod: rr.Pod, PodUID: rr.PodUID,
			Shard: rr.Shard, InputRevision: rr.InputRevision, ModelRevision: rr.ModelRevision, Digest: rr.Digest,
			Output: rr.Output, Records: rr.Records, Valid: rr.Valid,
		})
	}
	ba = compute(ba, completeT.Add(time.Minute), map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), Workload: workloadObs(true)}}, results...)
	s.steps = append(s.steps, ba)
	s.job = j
	s.chunks = []v1alpha1.ShardResults{{
		ObjectMeta: metav1.ObjectMeta{Name: string(ba.UID) + "-0", Namespace: ns, Labels: v1alpha1.ChunkLabels(ba)},
		Account:    "ij245", Results: recorded,
	}}
	return s
}

// workloadOf is Job j's Kueue Workload object, owned by the Job.
func workloadOf(job *batchv1.Job) *kueue.Workload {
	return wrappers.MakeWorkload("job-j-3f2c9", ns).UID(string(wlUID)).ForJob(job).Obj()
}

// fakeClient serves objs like an API server with status subresources.
func fakeClient(objs ...client.Object) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(Scheme).
		WithStatusSubresource(&v1alpha1.BatchAccount{}, &batchv1.Job{}, &kueue.Workload{}).
		// The API server selects any kind by metadata.name (get NAME -w); the fake needs an index.
		WithIndex(&v1alpha1.BatchAccount{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
		WithObjects(objs...).Build()
}

// run executes the plugin against c with args and returns stdout, stderr and the exit code.
func run(t *testing.T, c client.Client, args ...string) (string, string, int) {
	t.Helper()
	// Hermetic: no kubeconfig of the machine; every test passes -n.
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o.NewClient = func() (client.Client, error) { return c, nil }
	o.Now = func() time.Time { return seedNow }
	cmd := NewCommand(o)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	code := exitCode(cmd.ExecuteContext(t.Context()), &errOut)
	return out.String(), errOut.String(), code
}
