package batchledger

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

func TestMain(m *testing.M) { framework.SetupWithBatchledger(m, framework.WithTrainer()) }

// TestIJ245 plays the seed's worked case on the real control plane: Job j (indexes 0..3
// onto shards A..D) queued through a LocalQueue on the h100 flavor; successful pods on
// indexes 0,1,1,2,2 (the repeats are extra pods the real Job controller counts once per
// index); then index 3; then the Job controller's Complete.
func TestIJ245(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	job := wrappers.MakeJob("j", f.Namespace).Indexed(4).Parallelism(4).Queue("default").GPU(1).Obj()
	f.Create(job)
	jobWatch := framework.WatchStatus(t, job)
	f.Create(wrappers.MakeBatchAccount("ij245", f.Namespace).Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Obj())

	wl := framework.WorkloadFor(t, job)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	waitAccountCondition(t, f, "ij245", v1alpha1.ConditionAdmitted, metav1.ConditionTrue, v1alpha1.ReasonAdmitted)
	wlWatch := framework.WatchStatus(t, wl)
	jobChangesBefore := jobWatch.Changes()
	before := framework.BatchledgerMetrics(t)

	framework.RunningPods(t, job, 4)
	framework.FinishIndexPod(t, job, 0, 0, "")
	framework.FinishIndexPod(t, job, 1, 0, "")
	framework.CopyIndexPodAsSucceeded(t, job, 1, "")
	framework.FinishIndexPod(t, job, 2, 0, "")
	framework.CopyIndexPodAsSucceeded(t, job, 2, "")

	ba := waitAccount(t, f, "ij245", "five attempts over indexes 0-2", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/j")
		return tg != nil && tg.CompletedIndexes == "0-2" && tg.SuccessfulAttempts == 5
	})
	tg := target(ba, "job/j")
	if tg.Required != "0-3" || tg.RepeatedIndexes != "1,2" || tg.UID != jobStatus(t, f, "j").UID || tg.ObservedResourceVersion == "" {
		t.Errorf("target j = %+v", tg)
	}
	if tg.Workload == nil || tg.Workload.ClusterQueue == "" || !strings.Contains(strings.Join(tg.Workload.Flavors, ","), "nvidia.com/gpu:h100") {
		t.Errorf("workload observation = %+v; want admission on flavor h100", tg.Workload)
	}
	if j := jobStatus(t, f, "j"); j.Status.Succeeded != 3 || j.Status.CompletedIndexes != "0-2" {
		t.Errorf("the Job controller reports succeeded %d, completedIndexes %q; want 3 and 0-2 (indexes, not attempts)", j.Status.Succeeded, j.Status.CompletedIndexes)
	}
	const missingD = "3/4 shards covered; missing D = job j index 3"
	c := waitAccountCondition(t, f, "ij245", v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing)
	if c.Message != missingD {
		t.Errorf("ShardsCovered message = %q, want %q", c.Message, missingD)
	}
	wc := waitWorkloadMessage(t, wl, v1alpha1.WorkloadConditionShardsCovered, "BatchAccount ij245: "+missingD)
	if wc.Status != metav1.ConditionFalse || wc.Reason != v1alpha1.ReasonShardsMissing {
		t.Errorf("Workload condition = %+v", wc)
	}
	if ac := waitWorkloadMessage(t, wl, v1alpha1.WorkloadConditionAccepted, "BatchAccount ij245: "+missingD); ac.Reason != v1alpha1.ReasonShardsMissing {
		t.Errorf("Workload Accepted = %+v", ac)
	}
	mid := framework.BatchledgerMetrics(t)

	framework.FinishIndexPod(t, job, 3, 0, "")
	ba = waitAccount(t, f, "ij245", "all four shards covered and Terminated", func(ba *v1alpha1.BatchAccount) bool {
		ok, _ := condIs(ba.Status.Conditions, v1alpha1.ConditionTerminated, metav1.ConditionTrue, v1alpha1.ReasonComplete)
		return ok
	})
	tg = target(ba, "job/j")
	if tg.CompletedIndexes != "0-3" || tg.SuccessfulAttempts != 6 || tg.Terminal != "Complete" || tg.TerminalObservedAt == nil {
		t.Errorf("target j after index 3 = %+v; want 0-3, 6 attempts, Complete", tg)
	}
	if ok, s := condIs(ba.Status.Conditions, v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered); !ok {
		t.Errorf("ShardsCovered: %s", s)
	}
	if ba.Status.Shards.Covered != 4 || ba.Status.Shards.Missing != "" {
		t.Errorf("shards = %+v", ba.Status.Shards)
	}
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered)
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadFinished, metav1.ConditionTrue)
	after := framework.BatchledgerMetrics(t)

	// Measured, not asserted as timing: the writes per observed Job change.
	t.Logf("first phase (5 attempts): reconciles %.0f, status writes %.0f, workload writes %.0f",
		mid.Reconciles-before.Reconciles, mid.StatusWrites-before.StatusWrites, mid.WorkloadWrites-before.WorkloadWrites)
	t.Logf("second phase (index 3, Complete, Finished): reconciles %.0f, status writes %.0f, workload writes %.0f",
		after.Reconciles-mid.Reconciles, after.StatusWrites-mid.StatusWrites, after.WorkloadWrites-mid.WorkloadWrites)
	// Every write must answer an observed change: a Job status change, a pod turning
	// Succeeded (6 of them), or a change of Kueue's Workload status.
	observed := jobWatch.Changes() - jobChangesBefore + 6 + wlWatch.Changes()
	t.Logf("observed changes: Job status %d, pods 6, Workload status %d", jobWatch.Changes()-jobChangesBefore, wlWatch.Changes())
	if writes := after.StatusWrites - before.StatusWrites; writes > float64(observed) {
		t.Errorf("%0.f status writes for %d observed changes: the controller writes more than once per observed change", writes, observed)
	}
}

// TestSuccessPolicyFinishedWithShardsMissing: a Job whose successPolicy needs only index 0
// is Complete and its Workload Finished while seven shards never ran.
func TestSuccessPolicyFinishedWithShardsMissing(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	job := wrappers.MakeJob("leader", f.Namespace).Indexed(8).Parallelism(8).Queue("default").GPU(1).
		SuccessPolicy(wrappers.SucceededIndexes("0")).Obj()
	f.Create(job)
	shards := []string{"A", "B", "C", "D", "E", "F", "G", "H"}
	f.Create(wrappers.MakeBatchAccount("policy", f.Namespace).Shards(shards...).AssignJob("leader", "0-7", shards...).Obj())
	wl := framework.WorkloadFor(t, job)
	framework.RunningPods(t, job, 8)
	framework.FinishIndexPod(t, job, 0, 0, "")
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadFinished, metav1.ConditionTrue)

	c := waitAccountCondition(t, f, "policy", v1alpha1.ConditionTerminated, metav1.ConditionTrue, v1alpha1.ReasonComplete)
	_ = c
	cov := waitAccountCondition(t, f, "policy", v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing)
	want := "1/8 shards covered; missing B..H = job leader indexes 1-7; job leader succeeded by its successPolicy (succeeds when indexes 0 succeeded) with shards not covered"
	if cov.Message != want {
		t.Errorf("ShardsCovered message = %q\nwant %q", cov.Message, want)
	}
	ba := waitAccount(t, f, "policy", "terminal reason recorded", func(ba *v1alpha1.BatchAccount) bool { return target(ba, "job/leader").TerminalReason != "" })
	if tg := target(ba, "job/leader"); tg.Required != "0" || tg.Terminal != "Complete" || tg.TerminalReason != batchv1.JobReasonSuccessPolicy {
		t.Errorf("target = %+v", tg)
	}
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing)
}
