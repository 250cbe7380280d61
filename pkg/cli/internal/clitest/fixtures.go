// Package clitest holds the fixtures the verbs' tests share: the seed's worked case
// IJ245 played through account.Compute, a fake API server, Golden files, and Run, which
// runs a verb's command as the plugin's root command would.
package clitest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/options"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

var update = flag.Bool("update", false, "rewrite the Golden files in testdata from the current output")

// Golden compares got with testdata/<name>.golden, or rewrites it with -update.
func Golden(t *testing.T, name string, got []byte) {
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
		t.Fatalf("%v (run go test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update after checking it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

const (
	Namespace   = "ml-team"
	SeedRule    = "result.valid == result.records && result.records > 0"
	JobUID      = types.UID("0f3c9a2e-5b7d-4c1a-9e8f-2d6b4a1c7e30")
	WorkloadUID = types.UID("7a1d2c3b-0e9f-4a8b-b6c5-d4e3f2a1b0c9")
)

var (
	Time0     = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	CompleteT = metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	SeedNow   = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

// SeedJob is an Indexed Job of the seed's namespace, queued, one GPU a pod, stamped by the
// scope webhook for an account that requires results; its status setters (Completed,
// Complete, Failed) make it the snapshot the Job controller would have written.
func SeedJob(name string, uid types.UID, completions int32) *wrappers.JobWrapper {
	return wrappers.MakeJob(name, Namespace).Indexed(completions).Queue("default").GPU(1).
		PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).UID(string(uid))
}

// Attempts are the successful Attempts of job's listed indexes, extracted by the
// controller's own rule from succeeded pods named <prefix>-<n>.
func Attempts(job *batchv1.Job, prefix string, indexes ...int) []account.PodAttempt {
	return relations.SuccessfulAttempts(job, wrappers.SucceededIndexPods(job, prefix, Time0, indexes...))
}

func WorkloadObs(finished bool) *v1alpha1.WorkloadObservation {
	return &v1alpha1.WorkloadObservation{
		Name: "job-j-3f2c9", UID: WorkloadUID, Admitted: true, ClusterQueue: "ml-team-gpu",
		Flavors: []string{"main=nvidia.com/gpu:h100"}, Finished: finished, ObservedResourceVersion: "48190",
	}
}

// IJ245 holds the account at each step of the seed's worked case, each computed by
// account.Compute on the previous status, as the controller would.
type IJ245 struct {
	Steps  []*v1alpha1.BatchAccount
	Job    *batchv1.Job // Job j at the last step
	Chunks []v1alpha1.ShardResults
}

func IJ245Account() *v1alpha1.BatchAccount {
	ba := wrappers.MakeBatchAccount("ij245", Namespace).Shards("A", "B", "C", "D").
		AssignJob("j", "0-3", "A", "B", "C", "D").RequireResults(SeedRule).
		Generation(1).UID("b1e2d3c4-0000-4000-8000-000000000245").Creation(Time0.Add(-time.Hour)).Obj()
	return ba
}

// Compute advances an account by one observation, on top of its previous status.
func Compute(ba *v1alpha1.BatchAccount, now time.Time, obs map[string]account.Observation, results ...account.Result) *v1alpha1.BatchAccount {
	next := ba.DeepCopy()
	next.Status = account.Compute(account.Input{
		Namespace: ba.Namespace, Generation: ba.Generation, Spec: &ba.Spec, Previous: &ba.Status,
		Observations: obs, Results: results, Now: metav1.NewTime(now),
	}).Status
	return next
}

// SeedSteps plays IJ245: (1) five successful Attempts over {0,1,2}, D missing; (2) a
// sixth attempt on index 3, all covered, not terminated; (3) Complete recorded, results
// pending; (4) accepted results for A-D: Accepted.
func SeedSteps() IJ245 {
	var s IJ245
	ba := IJ245Account()
	j := SeedJob("j", JobUID, 4).Completed("0-2", 3).ResourceVersion("48213").Obj()
	ba = Compute(ba, Time0, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), SuccessfulPods: Attempts(j, "p", 0, 1, 1, 2, 2), Workload: WorkloadObs(false)}})
	s.Steps = append(s.Steps, ba)

	// The Job controller deleted the repeats meanwhile; the account's ledger kept them.
	j = SeedJob("j", JobUID, 4).Completed("0-3", 4).ResourceVersion("48250").Obj()
	ba = Compute(ba, Time0.Add(5*time.Minute), map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), SuccessfulPods: Attempts(j, "q", 3), Workload: WorkloadObs(false)}})
	s.Steps = append(s.Steps, ba)

	j = SeedJob("j", JobUID, 4).Completed("0-3", 4).ResourceVersion("48262").Complete(CompleteT.Time).Obj()
	ba = Compute(ba, CompleteT.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), Workload: WorkloadObs(true)}})
	s.Steps = append(s.Steps, ba)

	var results []account.Result
	var recorded []v1alpha1.RecordedResult
	for i, shard := range []string{"A", "B", "C", "D"} {
		rr := v1alpha1.RecordedResult{
			Ordinal: int32(i), Shard: shard, Target: "job/j", JobUID: JobUID, Index: int32(i),
			Pod: fmt.Sprintf("j-%d-x7k2%d", i, i), PodUID: types.UID(fmt.Sprintf("pod-%d", i)),
			InputRevision: "D", ModelRevision: "m-2026-11",
			Output: "s3://batches/ij245/D/" + shard, Digest: fmt.Sprintf("sha256:%x", 0xa0+i), Records: 1000, Valid: 1000,
			RecordedAt: metav1.NewTime(CompleteT.Add(time.Duration(i+1) * time.Second)),
		}
		recorded = append(recorded, rr)
		results = append(results, account.Result{
			Target: rr.Target, JobUID: rr.JobUID, Index: int(rr.Index), Pod: rr.Pod, PodUID: rr.PodUID,
			Shard: rr.Shard, InputRevision: rr.InputRevision, ModelRevision: rr.ModelRevision, Digest: rr.Digest,
			Output: rr.Output, Records: rr.Records, Valid: rr.Valid,
		})
	}
	ba = Compute(ba, CompleteT.Add(time.Minute), map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), Workload: WorkloadObs(true)}}, results...)
	s.Steps = append(s.Steps, ba)
	s.Job = j
	s.Chunks = []v1alpha1.ShardResults{*OwnedChunk(ba, recorded)}
	return s
}

// OwnedChunk is a ShardResults chunk of ba's results as the manager records it: labelled
// for ba, naming its UID and controlled by it.
func OwnedChunk(ba *v1alpha1.BatchAccount, results []v1alpha1.RecordedResult) *v1alpha1.ShardResults {
	return &v1alpha1.ShardResults{
		ObjectMeta: metav1.ObjectMeta{
			Name: string(ba.UID) + "-0", Namespace: ba.Namespace, Labels: v1alpha1.ChunkLabels(ba),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ba, v1alpha1.GroupVersion.WithKind("BatchAccount"))},
		},
		Account: ba.Name, AccountUID: ba.UID, Results: results,
	}
}

// WorkloadOf is Job j's Kueue Workload object, owned by the Job.
func WorkloadOf(job *batchv1.Job) *kueue.Workload {
	return wrappers.MakeWorkload("job-j-3f2c9", Namespace).UID(string(WorkloadUID)).ForJob(job).Obj()
}

// FakeClient serves objs like an API server with status subresources.
func FakeClient(objs ...client.Object) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(options.Scheme).
		WithStatusSubresource(&v1alpha1.BatchAccount{}, &batchv1.Job{}, &kueue.Workload{}).
		// The API server selects any kind by metadata.name (get NAME -w); the fake needs an index.
		WithIndex(&v1alpha1.BatchAccount{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
		WithObjects(objs...).Build()
}

// Run executes newCommand, one of the plugin's verbs, against c as the root command
// would (with kubectl's flags; args start with the verb's name) and returns stdout,
// stderr and the exit code.
func Run(t *testing.T, c client.Client, newCommand func(*options.Options) *cobra.Command, args ...string) (string, string, int) {
	t.Helper()
	return RunRoot(t, c, func(o *options.Options) *cobra.Command { return Root(o, newCommand) }, args...)
}

// Root is a root command with kubectl's flags, as the plugin's, over the one verb
// newCommand builds.
func Root(o *options.Options, newCommand func(*options.Options) *cobra.Command) *cobra.Command {
	root := &cobra.Command{Use: "kubectl-batchledger", SilenceErrors: true, SilenceUsage: true}
	o.ConfigFlags.AddFlags(root.PersistentFlags())
	root.AddCommand(newCommand(o))
	return root
}

// RunRoot executes the root command newRoot builds against c with args and returns
// stdout, stderr and the exit code.
func RunRoot(t *testing.T, c client.Client, newRoot func(*options.Options) *cobra.Command, args ...string) (string, string, int) {
	t.Helper()
	// Hermetic: no kubeconfig of the machine; every test passes -n.
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
	var out, errOut bytes.Buffer
	o := options.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o.NewClient = func() (client.Client, error) { return c, nil }
	o.Clock = func() time.Time { return SeedNow }
	cmd := newRoot(o)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	code := options.ExitCodeOf(cmd.ExecuteContext(t.Context()), &errOut)
	return out.String(), errOut.String(), code
}
