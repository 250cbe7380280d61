package batchledger

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// deleteJobAndWait deletes a Job as a user or a cleanup would (its pods with it) and waits
// until it is gone.
func deleteJobAndWait(t *testing.T, f *framework.Framework, job *batchv1.Job) {
	t.Helper()
	if err := f.Client.Delete(f.Ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "job "+job.Name+" deleted", func() (bool, string, error) {
		err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		return apierrors.IsNotFound(err), "still there", client.IgnoreNotFound(err)
	})
}

// chunksOf lists the result chunks of an account by its UID.
func chunksOf(t *testing.T, f *framework.Framework, ba *v1alpha1.BatchAccount) []v1alpha1.ShardResults {
	t.Helper()
	var chunks v1alpha1.ShardResultsList
	if err := f.Client.List(f.Ctx, &chunks, client.InNamespace(f.Namespace), client.MatchingLabels(v1alpha1.ChunkLabels(ba))); err != nil {
		t.Fatal(err)
	}
	return chunks.Items
}

// TestLedgerOutlivesItsJob: a batch accepted with its results keeps its coverage, results
// and verdict after its Job is deleted by ttlSecondsAfterFinished (the real TTL
// controller); the status says the Job was deleted and the record stands. The account's
// name is 253 characters long: no label or chunk name is derived from it.
func TestLedgerOutlivesItsJob(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	name := strings.Repeat("l", 240) + "-outlives-j" // 251 characters
	name += "xy"
	ba := wrappers.MakeBatchAccount(name, f.Namespace).Shards("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults(seedRule).Obj()
	f.Create(ba)
	waitAccount(t, f, name, "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool { return len(ba.Status.Conditions) > 0 })
	job := wrappers.MakeJob("j", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
	job.Spec.TTLSecondsAfterFinished = ptr.To(int32(5))
	f.Create(job)
	job = jobStatus(t, f, "j")
	if job.Spec.Template.Labels[v1alpha1.LabelScope] != v1alpha1.ScopeResults {
		t.Errorf("job template labels %v: the Job webhook did not stamp scope=results", job.Spec.Template.Labels)
	}
	for _, p := range framework.RunningPods(t, job, 2) {
		if !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			t.Errorf("pod %s is not held for its result", p.Name)
		}
	}
	framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
	framework.FinishIndexPod(t, job, 1, 0, report(t, "B", "m-2026-11", "sha256:B"))
	waitAccountCondition(t, f, name, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)

	// The TTL controller deletes the Job 5 s after it finished.
	framework.Eventually(t, framework.DefaultTimeout, "job j deleted by its TTL", func() (bool, string, error) {
		err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		return apierrors.IsNotFound(err), "still there", client.IgnoreNotFound(err)
	})
	got := waitAccount(t, f, name, "the deleted Job's record", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/j")
		return tg != nil && tg.Deleted && tg.DeletedAt != nil
	})
	if ok, state := condIs(got.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted); !ok {
		t.Errorf("after the TTL deleted the Job: %s", state)
	}
	tg := target(got, "job/j")
	if got.Status.Shards.Covered != 2 || got.Status.Shards.Accepted != 2 || got.Status.Results.Rejected != 0 ||
		tg.UID != job.UID || tg.Terminal != "Complete" || tg.CompletedIndexes != "0,1" {
		t.Errorf("record after deletion: shards %+v, results %+v, target %+v", got.Status.Shards, got.Status.Results, tg)
	}
	chunks := chunksOf(t, f, got)
	if len(chunks) != 1 || len(chunks[0].Results) != 2 || !metav1.IsControlledBy(&chunks[0], got) {
		t.Errorf("result chunks after deletion: %+v", chunks)
	}
}

// TestLedgerKeepsAJobDeletedTheMomentItFinished: with ttlSecondsAfterFinished: 0 the real
// TTL controller deletes the Job as soon as it recorded Complete, before the account's
// reconcile reads it. The Job's last state, delivered by its deletion, completes the
// record: terminated Complete, every shard covered, Accepted — not "deleted before it
// terminated".
func TestLedgerKeepsAJobDeletedTheMomentItFinished(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	f.Create(wrappers.MakeBatchAccount("ttl0", f.Namespace).Shards("A", "B").AssignJob("j", "0-1", "A", "B").Obj())
	waitAccount(t, f, "ttl0", "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool { return len(ba.Status.Conditions) > 0 })
	job := wrappers.MakeJob("j", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
	job.Spec.TTLSecondsAfterFinished = ptr.To(int32(0))
	f.Create(job)
	job = jobStatus(t, f, "j")
	framework.RunningPods(t, job, 2)
	framework.FinishIndexPod(t, job, 0, 0, "")
	waitAccount(t, f, "ttl0", "index 0 covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 1 })
	framework.FinishIndexPod(t, job, 1, 0, "")
	framework.Eventually(t, framework.DefaultTimeout, "job j deleted by its TTL", func() (bool, string, error) {
		err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		return apierrors.IsNotFound(err), "still there", client.IgnoreNotFound(err)
	})
	got := waitAccount(t, f, "ttl0", "the deleted Job's record", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/j")
		return tg != nil && tg.Deleted
	})
	tg := target(got, "job/j")
	if tg.Terminal != "Complete" || tg.CompletedIndexes != "0,1" || got.Status.Shards.Covered != 2 {
		t.Errorf("record: terminal %q completed %q, covered %d; want Complete, 0,1, 2", tg.Terminal, tg.CompletedIndexes, got.Status.Shards.Covered)
	}
	if ok, state := condIs(got.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted); !ok {
		t.Errorf("after the TTL deleted the Job at once: %s", state)
	}
}

// TestTwoAccountsOneWorkload: two accounts name the same Job; the Workload's
// batchledger.dev/Accepted speaks for both: False while one of them is not Accepted,
// naming each, whichever wrote last. It speaks only for accounts that exist: once the
// rejecting account is deleted the Workload says the other's verdict, and once no
// account is left our conditions leave the finished Workload (Kueue's stay).
func TestTwoAccountsOneWorkload(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	counts := wrappers.MakeBatchAccount("counts", f.Namespace).Shards("A", "B").AssignJob("j", "0-1", "A", "B").Obj()
	strict := wrappers.MakeBatchAccount("strict", f.Namespace).Shards("A", "B").AssignJob("j", "0-1", "A", "B").
		RequireResults("result.records > 5000").Obj()
	f.Create(counts)
	f.Create(strict)
	waitAccount(t, f, "strict", "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool { return len(ba.Status.Conditions) > 0 })
	f.Create(wrappers.MakeJob("j", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj())
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 2)
	framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
	framework.FinishIndexPod(t, job, 1, 0, report(t, "B", "m-2026-11", "sha256:B"))
	waitAccountCondition(t, f, "counts", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	waitAccountCondition(t, f, "strict", v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected)
	wl := framework.WorkloadFor(t, job)
	c := waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected)
	for _, want := range []string{"2 accounts", "BatchAccount counts:", "BatchAccount strict:"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Workload Accepted message %q lacks %q", c.Message, want)
		}
	}

	if err := f.Client.Delete(f.Ctx, strict); err != nil {
		t.Fatal(err)
	}
	c = waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	if !strings.HasPrefix(c.Message, "BatchAccount counts:") {
		t.Errorf("Workload Accepted message after strict was deleted: %q", c.Message)
	}
	if err := f.Client.Delete(f.Ctx, counts); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, wl, framework.DefaultTimeout, "no batchledger condition left", func(wl *kueue.Workload) bool {
		for _, c := range wl.Status.Conditions {
			if v1alpha1.IsWorkloadCondition(c.Type) {
				return false
			}
		}
		return true
	})
	if !apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		t.Errorf("Kueue's Finished condition went with ours: %+v", wl.Status.Conditions)
	}
}
