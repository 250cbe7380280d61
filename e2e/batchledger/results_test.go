package batchledger

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/result"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

const seedRule = "result.valid == result.records && result.records > 0"

// report is the termination message a worker of shard writes.
func report(t *testing.T, shard, model, digest string) string {
	t.Helper()
	msg, err := result.Encode(result.Report{
		Shard: shard, InputRevision: "D", ModelRevision: model,
		Output: "s3://batches/ij245/" + shard, Digest: digest, Records: 1000, Valid: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// resultsJob creates Job j of n indexes and an account requiring results over shards.
func resultsJob(t *testing.T, f *framework.Framework, name string, shards ...string) *wrappers.BatchAccountWrapper {
	t.Helper()
	h100Queue(f, "8")
	n := int32(len(shards))
	// The account is created (and reaches the controller's cache) before the Job, so that
	// every pod is held for its result: pods created before any account names their Job
	// are not held, and on a quiet machine Kueue admits a Job within milliseconds.
	ba := wrappers.MakeBatchAccount(name, f.Namespace).Shards(shards...).
		AssignJob("j", indexset.Range(0, int(n)-1).String(), shards...).RequireResults(seedRule)
	f.Create(ba.Obj())
	waitAccount(t, f, name, "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool {
		return len(ba.Status.Conditions) > 0
	})
	f.Create(wrappers.MakeJob("j", f.Namespace).Indexed(n).Parallelism(n).Queue("default").GPU(1).Obj())
	return ba
}

// TestIJ245Accepted: results for A-D with the right revisions make the batch Accepted;
// every pod was held by the result finalizer until its result was recorded, then released.
func TestIJ245Accepted(t *testing.T) {
	f := framework.New(t)
	resultsJob(t, f, "ij245", "A", "B", "C", "D")
	job := jobStatus(t, f, "j")
	pods := framework.RunningPods(t, job, 4)
	for _, p := range pods {
		if !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			t.Errorf("pod %s lacks the result finalizer: %v", p.Name, p.Finalizers)
		}
	}
	for i, s := range []string{"A", "B", "C", "D"} {
		framework.FinishIndexPod(t, job, i, 0, report(t, s, "m-2026-11", "sha256:"+s))
	}
	c := waitAccountCondition(t, f, "ij245", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	t.Logf("Accepted: %s", c.Message)
	ba := waitAccount(t, f, "ij245", "4 accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 4 })
	if ba.Status.Results.Rejected != 0 {
		t.Errorf("rejections: %+v", ba.Status.Results)
	}
	var chunks v1alpha1.ShardResultsList
	if err := f.Client.List(f.Ctx, &chunks, client.InNamespace(f.Namespace), client.MatchingLabels{v1alpha1.LabelAccount: "ij245"}); err != nil {
		t.Fatal(err)
	}
	if len(chunks.Items) != 1 || len(chunks.Items[0].Results) != 4 || chunks.Items[0].Results[0].Output == "" {
		t.Errorf("recorded results: %+v", chunks.Items)
	}
	framework.Eventually(t, framework.DefaultTimeout, "every pod released", func() (bool, string, error) {
		for _, p := range framework.JobPods(t, job) {
			if slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
				return false, p.Name + " still held", nil
			}
		}
		return true, "", nil
	})
	wl := framework.WorkloadFor(t, job)
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
}

// TestWrongModelRevisionRejected: shard C's result names another model revision.
func TestWrongModelRevisionRejected(t *testing.T) {
	f := framework.New(t)
	resultsJob(t, f, "ij245", "A", "B", "C", "D")
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 4)
	for i, s := range []string{"A", "B", "C", "D"} {
		model := "m-2026-11"
		if s == "C" {
			model = "m-2026-10"
		}
		framework.FinishIndexPod(t, job, i, 0, report(t, s, model, "sha256:"+s))
	}
	c := waitAccountCondition(t, f, "ij245", v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected)
	for _, want := range []string{"C (RevisionMismatch)", `modelRevision "m-2026-10"`, `requires "m-2026-11"`} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("ResultsAccepted message %q lacks %q", c.Message, want)
		}
	}
	waitAccountCondition(t, f, "ij245", v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected)
}

// TestResultSurvivesPodDeletionWhileControllerDown: the pod succeeds and is deleted at
// once while the controller is stopped; its result is recorded after the restart and
// the pod is then released.
func TestResultSurvivesPodDeletionWhileControllerDown(t *testing.T) {
	f := framework.New(t)
	resultsJob(t, f, "durable", "A", "B")
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 2)

	framework.StopBatchledger(t)
	pod := framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
	if err := f.Client.Delete(f.Ctx, pod); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	framework.WaitFor(t, pod, framework.DefaultTimeout, "held while Terminating", func(p *corev1.Pod) bool {
		return p.DeletionTimestamp != nil && slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer)
	})
	framework.StartBatchledger(t)

	ba := waitAccount(t, f, "durable", "shard A accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 1 })
	if ba.Status.Results.Rejected != 0 {
		t.Errorf("rejections: %+v", ba.Status.Results)
	}
	framework.WaitForAbsent(t, pod)
}

// TestResultSurvivesOrphanDeletionOfItsJob: both pods succeed while the controller is
// stopped, and the Job is deleted with propagationPolicy Orphan (a batch/v1 Job's default
// for a client that sends none): the garbage collector takes the pods' ownerReferences
// away. Their results are still the Job's: after the restart both are recorded and
// accepted, and only then are the pods released.
func TestResultSurvivesOrphanDeletionOfItsJob(t *testing.T) {
	f := framework.New(t)
	resultsJob(t, f, "orphaned", "A", "B")
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 2)

	framework.StopBatchledger(t)
	pods := []*corev1.Pod{
		framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A")),
		framework.FinishIndexPod(t, job, 1, 0, report(t, "B", "m-2026-11", "sha256:B")),
	}
	if err := f.Client.Delete(f.Ctx, job, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatalf("delete Job: %v", err)
	}
	for _, pod := range pods {
		framework.WaitFor(t, pod, framework.DefaultTimeout, "orphaned and still held", func(p *corev1.Pod) bool {
			return len(p.OwnerReferences) == 0 && slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer)
		})
	}
	framework.StartBatchledger(t)

	ba := waitAccount(t, f, "orphaned", "both shards accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 2 })
	if ba.Status.Results.Rejected != 0 {
		t.Errorf("rejections: %+v", ba.Status.Results)
	}
	for _, pod := range pods {
		framework.WaitFor(t, pod, framework.DefaultTimeout, "released after its result was recorded", func(p *corev1.Pod) bool {
			return !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer)
		})
	}
}

// TestForgedClaimRejected: index 1's pod reports shard D; the claim is rejected and D
// stays missing.
func TestForgedClaimRejected(t *testing.T) {
	f := framework.New(t)
	resultsJob(t, f, "forged", "A", "B", "C", "D")
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 4)
	framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
	framework.FinishIndexPod(t, job, 1, 0, report(t, "D", "m-2026-11", "sha256:D"))
	ba := waitAccount(t, f, "forged", "forged claim recorded", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Results.Rejected == 1 })
	rj := ba.Status.Results.Rejections[0]
	if rj.Reason != v1alpha1.RejectionForgedClaim || rj.Index != 1 || rj.Shard != "D" || !strings.HasPrefix(rj.Pod, "j-1-") {
		t.Errorf("rejection = %+v", rj)
	}
	if ba.Status.Shards.Accepted != 1 || !strings.Contains(ba.Status.Shards.Missing, "D") {
		t.Errorf("shards = %+v; D must still be missing", ba.Status.Shards)
	}
}

// TestConflictingAttempts: two successful attempts of index 1 report other digests; the
// first stands and the conflict is recorded.
func TestConflictingAttempts(t *testing.T) {
	f := framework.New(t)
	resultsJob(t, f, "conflict", "A", "B")
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 2)
	framework.FinishIndexPod(t, job, 1, 0, report(t, "B", "m-2026-11", "sha256:first"))
	waitAccount(t, f, "conflict", "B accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 1 })
	framework.CopyIndexPodAsSucceeded(t, job, 1, report(t, "B", "m-2026-11", "sha256:second"))
	ba := waitAccount(t, f, "conflict", "conflict recorded", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Results.Conflicts == 1 })
	rj := ba.Status.Results.Rejections[0]
	if rj.Reason != v1alpha1.RejectionConflict || !strings.Contains(rj.Message, `digest "sha256:first"`) || !strings.Contains(rj.Message, `"sha256:second"`) {
		t.Errorf("conflict = %+v", rj)
	}
	if ba.Status.Shards.Accepted != 1 {
		t.Errorf("accepted = %d", ba.Status.Shards.Accepted)
	}
}

// TestBadMessagesRecorded: a malformed message, a 4 KiB message and an unknown schema
// version are each a recorded rejection with its reason, never a crash or a pass.
func TestBadMessagesRecorded(t *testing.T) {
	f := framework.New(t)
	resultsJob(t, f, "bad", "A", "B", "C")
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 3)
	framework.FinishIndexPod(t, job, 0, 0, `{"version":"batchledger.dev/v1","shard":`)
	framework.FinishIndexPod(t, job, 1, 0, `{"version":"batchledger.dev/v1","shard":"B","pad":"`+strings.Repeat("x", 4096)+`"}`)
	framework.FinishIndexPod(t, job, 2, 0, `{"version":"batchledger.dev/v9","shard":"C","inputRevision":"D","modelRevision":"m-2026-11","digest":"d"}`)
	ba := waitAccount(t, f, "bad", "three rejections", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Results.Rejected == 3 })
	reasons := map[int32]string{}
	for _, rj := range ba.Status.Results.Rejections {
		reasons[rj.Index] = rj.Reason
	}
	want := map[int32]string{0: result.ReasonMalformed, 1: result.ReasonOversized, 2: result.ReasonUnknownVersion}
	for i, r := range want {
		if reasons[i] != r {
			t.Errorf("index %d rejected as %q, want %q (all: %+v)", i, reasons[i], r, ba.Status.Results.Rejections)
		}
	}
	waitAccountCondition(t, f, "bad", v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected)
}
