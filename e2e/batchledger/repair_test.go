package batchledger

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli"
	"batchledger.dev/batchledger/pkg/cli/explain"
	"batchledger.dev/batchledger/pkg/cli/explanation"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/cli/repair"
	"batchledger.dev/batchledger/pkg/cli/resolve"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// explainText runs `kubectl batchledger explain account NAME` in-process.
func explainText(t *testing.T, f *framework.Framework, name string) string {
	t.Helper()
	exs, err := explain.Explain(f.Ctx, f.Client, f.Namespace, resolve.KindAccount, name, explanation.DefaultMaxRows)
	if err != nil {
		t.Fatalf("explain account %s: %v", name, err)
	}
	var b bytes.Buffer
	if err := explain.WriteExplanations(&b, exs, explain.OutputText); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// plugin runs the kubectl plugin in-process as a user would, through kubeconfig (the
// local cluster's, or KUBECONFIG's for an existing cluster), and returns stdout, stderr
// and the exit code.
func plugin(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	if c := framework.Cluster(); c != nil {
		args = append(args, "--kubeconfig", c.Kubeconfig)
	}
	var out, errOut bytes.Buffer
	code := cli.Execute(t.Context(), args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return out.String(), errOut.String(), code
}

// TestRepairFailedIndex: IJ245 where index 3 fails and, with backoffLimit 0, the real Job
// controller fails Job j. The account says D is missing for good; `kubectl batchledger
// repair` creates a one-index follow-up Job through the same LocalQueue and appends it to
// spec.repairs; Kueue admits it, its pod succeeds, and the account says D was
// covered by the repair Job's index 0 and accepts the batch.
func TestRepairFailedIndex(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	job := wrappers.MakeJob("j", f.Namespace).Indexed(4).Parallelism(4).Queue("default").GPU(1).BackoffLimit(0).Obj()
	f.Create(job)
	f.Create(wrappers.MakeBatchAccount("ij245", f.Namespace).Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Obj())

	framework.RunningPods(t, job, 4)
	for i := range 3 {
		framework.FinishIndexPod(t, job, i, 0, "")
	}
	framework.FinishIndexPod(t, job, 3, 1, "")
	framework.WaitForJobCondition(t, job, batchv1.JobFailed)

	ba := waitAccount(t, f, "ij245", "job j Failed observed, D missing", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/j")
		return tg != nil && tg.Terminal == account.TerminalFailed && ba.Status.Shards.Missing == "D"
	})
	if ok, s := condIs(ba.Status.Conditions, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing); !ok ||
		!strings.Contains(s, "3/4 shards covered; missing D = job j index 3; job j failed (BackoffLimitExceeded)") {
		t.Errorf("ShardsCovered before the repair: %s", s)
	}
	if ok, s := condIs(ba.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing); !ok {
		t.Errorf("Accepted before the repair: %s", s)
	}
	if text := explainText(t, f, "ij245"); !strings.Contains(text, "shard D can no longer be covered by job j index 3") ||
		!strings.Contains(text, "kubectl batchledger repair ij245 -n "+f.Namespace) {
		t.Errorf("explain before the repair does not point at the repair:\n%s", text)
	}

	// The plugin binary's path: kubeconfig, discovery, exit codes.
	if out, errOut, code := plugin(t, "explain", "account", "ij245", "-n", f.Namespace, "--exit-code"); code != options.ExitNotAccepted || !strings.Contains(out, "NOT ACCEPTED (ShardsMissing)") {
		t.Errorf("plugin explain --exit-code before the repair: exit %d, stderr %q\n%s", code, errOut, out)
	}
	wlJ := framework.WorkloadFor(t, job)
	if out, errOut, code := plugin(t, "explain", "workload", wlJ.Name, "-n", f.Namespace, "-o", "json"); code != options.ExitOK || !strings.Contains(out, `"account": "ij245"`) {
		t.Errorf("plugin explain workload %s: exit %d, stderr %q\n%s", wlJ.Name, code, errOut, out)
	}
	out, errOut, code := plugin(t, "repair", "ij245", "-n", f.Namespace, "--dry-run")
	if code != options.ExitOK || !strings.Contains(out, "name: j-repair-1") || !strings.Contains(out, "kueue.x-k8s.io/queue-name: default") {
		t.Errorf("plugin repair --dry-run: exit %d, stderr %q\n%s", code, errOut, out)
	}
	if err := f.Client.Get(f.Ctx, client.ObjectKey{Namespace: f.Namespace, Name: "j-repair-1"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("repair --dry-run created Job j-repair-1: %v", err)
	}

	plan, err := repair.Run(f.Ctx, f.Client, f.Namespace, "ij245", options.DryRunNone)
	if err != nil {
		t.Fatalf("repair: %v", err)
	}
	if len(plan.Repairs) != 1 || plan.Repairs[0].Job.Name != "j-repair-1" || plan.Repairs[0].Shards != "D" {
		t.Fatalf("repair plan = %+v", plan)
	}
	repair := jobStatus(t, f, "j-repair-1")
	if *repair.Spec.Completions != 1 || *repair.Spec.Parallelism != 1 || repair.Labels[wrappers.QueueLabel] != "default" ||
		repair.Annotations[v1alpha1.AnnotationRepairFor] != "ij245" {
		t.Errorf("repair Job = %+v %+v", repair.ObjectMeta, repair.Spec)
	}
	f.Get(ba)
	if len(ba.Spec.Assignments) != 1 || len(ba.Spec.Repairs) != 1 {
		t.Fatalf("after repair: assignments %+v, repairs %+v; want the repair in spec.repairs alone", ba.Spec.Assignments, ba.Spec.Repairs)
	}
	if a := ba.Spec.Repairs[0]; a.Target.Job != "j-repair-1" || a.Indexes != "0" || !slices.Equal(a.Shards, []string{"D"}) {
		t.Errorf("spec.repairs[0] = %+v", a)
	}

	// The same LocalQueue: Kueue admits the repair Job afresh (the Workload records the
	// template as queued, not pinned to the original's injected node selector).
	wl := framework.WorkloadFor(t, repair)
	if sel := wl.Spec.PodSets[0].Template.Spec.NodeSelector; len(sel) != 0 {
		t.Errorf("repair Workload template carries node selector %v from the original's admission", sel)
	}
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	framework.RunningPods(t, repair, 1)
	framework.FinishIndexPod(t, repair, 0, 0, "")

	c := waitAccountCondition(t, f, "ij245", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	if !strings.Contains(c.Message, "job j Failed (BackoffLimitExceeded), its shards covered by repair") {
		t.Errorf("Accepted message = %q", c.Message)
	}
	ba = waitAccount(t, f, "ij245", "covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 4 })
	if ok, s := condIs(ba.Status.Conditions, v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered); !ok {
		t.Errorf("ShardsCovered after the repair: %s", s)
	}
	want := []v1alpha1.ShardCoverage{{Shard: "D", Target: "job/j-repair-1", Index: 0}}
	if !slices.Equal(ba.Status.Shards.CoveredBy, want) {
		t.Errorf("coveredBy = %+v, want %+v", ba.Status.Shards.CoveredBy, want)
	}
	text := explainText(t, f, "ij245")
	for _, phrase := range []string{"Verdict:    ACCEPTED (Accepted)", "job j-repair-1 (repair)", "D      job j-repair-1 index 0", "Nothing: the batch is Accepted."} {
		if !strings.Contains(text, phrase) {
			t.Errorf("explain after the repair lacks %q:\n%s", phrase, text)
		}
	}
	t.Logf("explain after the repair:\n%s", text)
	if _, errOut, code := plugin(t, "explain", "job", "j-repair-1", "-n", f.Namespace, "--exit-code"); code != options.ExitOK {
		t.Errorf("plugin explain --exit-code after the repair: exit %d, stderr %q", code, errOut)
	}
	if out, errOut, code := plugin(t, "get", "-n", f.Namespace); code != options.ExitOK || !strings.Contains(out, "ij245   100%       4         4       0          -         Accepted") {
		t.Errorf("plugin get: exit %d, stderr %q\n%s", code, errOut, out)
	}
}
