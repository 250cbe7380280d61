package clitest

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// RepairedAccount is IJ245 where Job j failed on index 3 and repair Job j-repair-1 index
// 0 covered shard D.
func RepairedAccount() (*v1alpha1.BatchAccount, *batchv1.Job, *batchv1.Job) {
	FailedAt := metav1.NewTime(Time0.Add(20 * time.Minute))
	ba := wrappers.MakeBatchAccount("ij245", Namespace).Shards("A", "B", "C", "D").
		AssignJob("j", "0-3", "A", "B", "C", "D").Repair("j-repair-1", "0", "D").Generation(2).Obj()
	j := SeedJob("j", JobUID, 4).Completed("0-2", 3).ResourceVersion("48300").Failed(batchv1.JobReasonBackoffLimitExceeded, FailedAt.Time).Obj()
	r := SeedJob("j-repair-1", "5c6d7e8f-1a2b-4c3d-8e9f-0a1b2c3d4e5f", 1).Completed("0", 1).ResourceVersion("48377").Complete(Time0.Add(31 * time.Minute)).Obj()
	rw := *WorkloadObs(true)
	rw.Name, rw.UID, rw.ObservedResourceVersion = "job-j-repair-1-8d1e0", "9b8a7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d", "48380"
	ba = Compute(ba, Time0.Add(32*time.Minute), map[string]account.Observation{
		"job/j":          {Job: jobkind.Facts(j), SuccessfulPods: Attempts(j, "p", 0, 1, 2), Workload: WorkloadObs(true)},
		"job/j-repair-1": {Job: jobkind.Facts(r), SuccessfulPods: Attempts(r, "r", 0), Workload: &rw},
	})
	return ba, j, r
}

// Admitted makes a Job look as it does after the Job controller and Kueue touched it:
// generated selector labels on the pod template and the flavor's node selector injected.
func Admitted(j *batchv1.Job) *batchv1.Job {
	j.Spec.Template.Labels = map[string]string{
		"app": "infer", batchv1.ControllerUidLabel: string(j.UID), batchv1.JobNameLabel: j.Name,
		"controller-uid": string(j.UID), "job-name": j.Name,
	}
	j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: string(j.UID)}}
	j.Spec.Template.Spec.NodeSelector = map[string]string{"gpu-type": "h100"}
	j.Spec.BackoffLimit = ptr.To(int32(0))
	return j
}

// FailedAt is when Job j of FailedJob failed.
var FailedAt = metav1.NewTime(Time0.Add(20 * time.Minute))

// FailedJob is Job j of the seed, Failed after index 3 failed with backoffLimit 0.
func FailedJob() *batchv1.Job {
	return Admitted(SeedJob("j", JobUID, 4).Completed("0-2", 3).ResourceVersion("48300").PriorityClass("batch-low").
		Failed(batchv1.JobReasonBackoffLimitExceeded, FailedAt.Time).Obj())
}

// FailedAccount is IJ245 observed after Job j failed: D is missing for good.
func FailedAccount() *v1alpha1.BatchAccount {
	j := FailedJob()
	return Compute(IJ245Account(), FailedAt.Time, map[string]account.Observation{
		"job/j": {Job: jobkind.Facts(j), SuccessfulPods: Attempts(j, "p", 0, 1, 2), Workload: WorkloadObs(true)},
	})
}

// JobsByName indexes jobs by name, as a RepairInput holds them.
func JobsByName(jobs ...*batchv1.Job) map[string]*batchv1.Job {
	out := map[string]*batchv1.Job{}
	for _, j := range jobs {
		out[j.Name] = j
	}
	return out
}

// VisibleEscapes shows the in-place redraws of a terminal output in a golden file.
func VisibleEscapes(s string) string { return strings.ReplaceAll(s, "\x1b", "<ESC>") }

// RejectedAccount is IJ245 after Complete whose shard C result has the wrong model revision.
func RejectedAccount() *v1alpha1.BatchAccount {
	s := SeedSteps()
	var results []account.Result
	for _, rr := range s.Chunks[0].Results {
		r := account.FromRecorded(rr)
		if r.Shard == "C" {
			r.ModelRevision = "m-2026-10"
		}
		results = append(results, r)
	}
	return Compute(s.Steps[2], CompleteT.Add(2*time.Hour), map[string]account.Observation{"job/j": {Job: jobkind.Facts(s.Job), Workload: WorkloadObs(true)}}, results...)
}

// MissingResultAccount is IJ245 observed Complete with every pod gone and no result
// recorded: no result can arrive any more (MissingResult).
func MissingResultAccount() *v1alpha1.BatchAccount {
	j := SeedJob("j", JobUID, 4).Completed("0-3", 4).ResourceVersion("48262").Complete(CompleteT.Time).Obj()
	return Compute(IJ245Account(), CompleteT.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), Workload: WorkloadObs(true), PodsListed: true}})
}

// BigAccount is 100,000 shards over ten Jobs of 10,000 indexes: Jobs big-0..big-6 are
// Complete, big-7 is running with runs of indexes still missing, big-8 failed with a run
// missing, big-9 has not started.
func BigAccount() *v1alpha1.BatchAccount {
	w := wrappers.MakeBatchAccount("big", Namespace).ShardCount("shard-", 100000)
	obs := map[string]account.Observation{}
	for j := range 10 {
		name := fmt.Sprintf("big-%d", j)
		w.AssignJobOrdinals(name, "0-9999", fmt.Sprintf("%d-%d", j*10000, j*10000+9999))
		var job *batchv1.Job
		switch {
		case j < 7:
			job = SeedJob(name, types.UID("uid-"+name), 10000).Completed("0-9999", 10000).ResourceVersion("10").Complete(CompleteT.Time).Obj()
		case j == 7:
			job = SeedJob(name, types.UID("uid-"+name), 10000).Completed("0-2999,3500-6999,7100-8999", 8400).ResourceVersion("11").Obj()
		case j == 8:
			job = SeedJob(name, types.UID("uid-"+name), 10000).Completed("0-4999,5200-9999", 9800).ResourceVersion("12").Failed(batchv1.JobReasonBackoffLimitExceeded, CompleteT.Time).Obj()
			job.Status.FailedIndexes = ptr.To("5000-5199")
		default:
			job = SeedJob(name, types.UID("uid-"+name), 10000).ResourceVersion("13").Obj()
		}
		obs["job/"+name] = account.Observation{Job: jobkind.Facts(job)}
	}
	ba := w.Obj()
	ba.Generation, ba.CreationTimestamp = 1, metav1.NewTime(Time0)
	return Compute(ba, Time0, obs)
}

// DeletedAt is when the controller first observed Job j missing (its TTL expired).
var DeletedAt = CompleteT.Add(2 * time.Hour)
