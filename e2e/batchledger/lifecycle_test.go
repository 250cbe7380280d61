package batchledger

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestCrossJobAccountSurvivesPreemption: two low-priority Jobs of two indexes carry four
// shards; a high-priority batch preempts one of them mid-run. Kueue suspends the evicted
// Job, its completed index stays, and after re-admission the batch completes.
func TestCrossJobAccountSurvivesPreemption(t *testing.T) {
	f := framework.New(t)
	preemptionQueue(t, f)

	j := wrappers.MakeJob("j", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).PriorityClass(f.Namespace + "-low").Obj()
	k := wrappers.MakeJob("k", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).PriorityClass(f.Namespace + "-low").Obj()
	f.Create(j)
	f.Create(k)
	f.Create(wrappers.MakeBatchAccount("cross", f.Namespace).Shards("A", "B", "C", "D").
		AssignJob("j", "0-1", "A", "B").AssignJob("k", "0-1", "C", "D").Obj())
	framework.RunningPods(t, j, 2)
	framework.RunningPods(t, k, 2)
	index0 := map[string]*corev1.Pod{
		"j": framework.FinishIndexPod(t, j, 0, 0, ""),
		"k": framework.FinishIndexPod(t, k, 0, 0, ""),
	}
	waitAccount(t, f, "cross", "2/4 shards covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 2 })

	// Kueue counts succeeded pods as reclaimable quota, so j and k hold 2 GPUs now: the
	// urgent batch needs 3 and must preempt one of them.
	high := wrappers.MakeJob("urgent", f.Namespace).Indexed(3).Parallelism(3).Queue("default").GPU(1).PriorityClass(f.Namespace + "-high").Obj()
	f.Create(high)
	var evicted *batchv1.Job
	var evictedWl *kueue.Workload
	framework.Eventually(t, framework.DefaultTimeout, "one of j, k evicted by the urgent batch", func() (bool, string, error) {
		for _, job := range []*batchv1.Job{j, k} {
			wl := framework.WorkloadFor(t, job)
			if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted) {
				evicted, evictedWl = job, wl
				return true, "", nil
			}
		}
		return false, "no eviction yet", nil
	})
	framework.WaitFor(t, evicted, framework.DefaultTimeout, "suspended by Kueue", func(job *batchv1.Job) bool {
		return job.Spec.Suspend != nil && *job.Spec.Suspend
	})
	if evicted.Status.CompletedIndexes != "0" {
		t.Errorf("evicted Job %s completedIndexes = %q, want 0 kept", evicted.Name, evicted.Status.CompletedIndexes)
	}
	ba := waitAccount(t, f, "cross", "eviction recorded", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/"+evicted.Name)
		return tg != nil && tg.Workload != nil && tg.Workload.Evicted
	})
	if ba.Status.Shards.Covered != 2 {
		t.Errorf("coverage after eviction = %d, want 2 kept", ba.Status.Shards.Covered)
	}
	if ok, s := condIs(ba.Status.Conditions, v1alpha1.ConditionAdmitted, metav1.ConditionFalse, ""); !ok {
		t.Errorf("Admitted after eviction: %s", s)
	}

	// The urgent batch finishes; the evicted Job is re-admitted and resumes only index 1.
	framework.RunningPods(t, high, 3)
	for i := range 3 {
		framework.FinishIndexPod(t, high, i, 0, "")
	}
	framework.WaitForWorkloadCondition(t, evictedWl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	for _, job := range []*batchv1.Job{j, k} {
		framework.FinishIndexPod(t, job, 1, 0, "")
	}
	ba = waitAccount(t, f, "cross", "all four shards covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 4 })
	waitAccountCondition(t, f, "cross", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	if tg := target(ba, "job/"+evicted.Name); tg.CompletedIndexes != "0,1" || tg.UID != evicted.UID {
		t.Errorf("evicted target after re-admission = %+v; same identity, both indexes", tg)
	}
	// Only index 1 was re-run: index 0 has its one pod, the one that succeeded before the
	// eviction, and the Job counts two successes.
	var pods0 []string
	for _, p := range framework.JobPods(t, evicted) {
		if framework.PodIndex(&p) == 0 {
			pods0 = append(pods0, string(p.UID))
		}
	}
	if want := string(index0[evicted.Name].UID); len(pods0) != 1 || pods0[0] != want {
		t.Errorf("evicted Job %s has index-0 pods %v; want only %s, the one that succeeded before the eviction", evicted.Name, pods0, want)
	}
	f.Get(evicted)
	if evicted.Status.Succeeded != 2 {
		t.Errorf("evicted Job %s succeeded = %d; want 2 (index 0 once, index 1 once)", evicted.Name, evicted.Status.Succeeded)
	}
}

// TestJobSetRestartMovesCoverageToHistory: a JobSet (workers: 2 replicas x 4 indexes =
// 8 shards) restarts after a failure. Every child Job is recreated with a new UID; the
// old identities and their coverage go to history and the verdict is about the new attempt.
func TestJobSetRestartMovesCoverageToHistory(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "16")
	worker := wrappers.MakeJob("", "").Indexed(4).Parallelism(4).GPU(1).BackoffLimit(0).Obj()
	js := wrappers.MakeJobSet("train", f.Namespace).Queue("default").MaxRestarts(1).
		ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Job(worker).Obj()).Obj()
	f.Create(js)
	f.Create(wrappers.MakeBatchAccount("train", f.Namespace).ShardCount("s", 8).
		AssignJobSet("train", "workers", 0, "0-3", "0-3").AssignJobSet("train", "workers", 1, "0-3", "4-7").Obj())

	w0, w1 := childJob(t, f, "train-workers-0", ""), childJob(t, f, "train-workers-1", "")
	framework.RunningPods(t, w0, 4)
	framework.RunningPods(t, w1, 4)
	oldUIDs := map[types.UID]bool{w0.UID: true, w1.UID: true}
	for i := range 4 {
		framework.FinishIndexPod(t, w0, i, 0, "")
	}
	framework.FinishIndexPod(t, w1, 0, 0, "")
	waitAccount(t, f, "train", "5/8 covered before the restart", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 5 })

	// Index 1 of workers-1 fails: backoffLimit 0 fails the Job and the JobSet restarts.
	framework.FinishIndexPod(t, w1, 1, 1, "")
	ba := waitAccount(t, f, "train", "both identities superseded", func(ba *v1alpha1.BatchAccount) bool {
		t0, t1 := target(ba, "jobset/train/workers/0"), target(ba, "jobset/train/workers/1")
		return len(ba.Status.History) >= 2 && t0 != nil && t1 != nil && t0.RestartAttempt == 1 && t1.RestartAttempt == 1
	})
	for _, h := range ba.Status.History {
		if !oldUIDs[h.UID] {
			t.Errorf("history holds %s (%s), not a superseded identity", h.UID, h.Job)
		}
	}
	var hist []string
	for _, h := range ba.Status.History {
		hist = append(hist, h.Job+"="+h.CompletedIndexes)
	}
	if got := strings.Join(hist, " "); !strings.Contains(got, "train-workers-0=0-3") {
		t.Errorf("history %q must keep workers-0's coverage 0-3", got)
	}
	if ba.Status.Shards.Covered != 0 {
		t.Errorf("covered %d after the restart; the current attempt covered nothing yet", ba.Status.Shards.Covered)
	}
	for _, key := range []string{"jobset/train/workers/0", "jobset/train/workers/1"} {
		if oldUIDs[target(ba, key).UID] {
			t.Errorf("%s still judged on its superseded identity", key)
		}
	}

	// The new attempt runs every index again.
	w0, w1 = childJob(t, f, "train-workers-0", w0.UID), childJob(t, f, "train-workers-1", w1.UID)
	framework.RunningPods(t, w0, 4)
	framework.RunningPods(t, w1, 4)
	for i := range 4 {
		framework.FinishIndexPod(t, w0, i, 0, "")
		framework.FinishIndexPod(t, w1, i, 0, "")
	}
	waitAccountCondition(t, f, "train", v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered)
	framework.WaitFor(t, js, framework.DefaultTimeout, "JobSet Completed", func(js *jobset.JobSet) bool {
		return apimeta.IsStatusConditionTrue(js.Status.Conditions, string(jobset.JobSetCompleted))
	})
	wl := framework.WorkloadFor(t, js)
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
}

// TestJobSetFailureEndsItsActiveChild: a JobSet without restarts fails when one child
// fails, and deletes its child that was still running. That child is no restart in
// progress: the account keeps what it covered as its record and says it was deleted
// before it terminated because its JobSet failed, with a way forward (repair), instead of
// waiting for it to exist again.
func TestJobSetFailureEndsItsActiveChild(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "16")
	worker := wrappers.MakeJob("", "").Indexed(4).Parallelism(4).GPU(1).BackoffLimit(0).Obj()
	js := wrappers.MakeJobSet("ends", f.Namespace).Queue("default").MaxRestarts(0).
		ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(3).Job(worker).Obj()).Obj()
	f.Create(js)
	f.Create(wrappers.MakeBatchAccount("ends", f.Namespace).ShardCount("s", 12).
		AssignJobSet("ends", "workers", 0, "0-3", "0-3").AssignJobSet("ends", "workers", 1, "0-3", "4-7").
		AssignJobSet("ends", "workers", 2, "0-3", "8-11").Obj())

	w0, w1, w2 := childJob(t, f, "ends-workers-0", ""), childJob(t, f, "ends-workers-1", ""), childJob(t, f, "ends-workers-2", "")
	for _, w := range []*batchv1.Job{w0, w1, w2} {
		framework.RunningPods(t, w, 4)
	}
	for i := range 4 {
		framework.FinishIndexPod(t, w0, i, 0, "")
	}
	framework.FinishIndexPod(t, w2, 0, 0, "")
	waitAccount(t, f, "ends", "5/12 covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 5 })

	framework.FinishIndexPod(t, w1, 0, 1, "")
	framework.WaitFor(t, js, framework.DefaultTimeout, "JobSet Failed", func(js *jobset.JobSet) bool {
		return apimeta.IsStatusConditionTrue(js.Status.Conditions, string(jobset.JobSetFailed))
	})
	framework.Eventually(t, framework.DefaultTimeout, "the running child deleted", func() (bool, string, error) {
		err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(w2), &batchv1.Job{})
		return apierrors.IsNotFound(err), "still there", client.IgnoreNotFound(err)
	})
	c := waitAccountCondition(t, f, "ends", v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonTargetDeleted)
	if !strings.Contains(c.Message, "jobset ends workers[2]") {
		t.Errorf("Terminated message %q does not name the deleted child", c.Message)
	}
	ba := waitAccount(t, f, "ends", "the deleted child's record", func(ba *v1alpha1.BatchAccount) bool {
		t2 := target(ba, "jobset/ends/workers/2")
		return t2 != nil && t2.Deleted
	})
	if t2 := target(ba, "jobset/ends/workers/2"); t2.UID != w2.UID || t2.CompletedIndexes != "0" {
		t.Errorf("record of workers[2]: uid %s completed %q; want %s, \"0\"", t2.UID, t2.CompletedIndexes, w2.UID)
	}
	if ba.Status.Shards.Covered != 5 {
		t.Errorf("covered %d, want 5 (workers[0] 0-3 and workers[2] 0 stand)", ba.Status.Shards.Covered)
	}
	cov := apimeta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionShardsCovered)
	if cov == nil || !strings.Contains(cov.Message, "(its JobSet Failed)") || !strings.Contains(cov.Message, "repair") {
		t.Errorf("ShardsCovered message gives no way forward: %+v", cov)
	}
}

// TestControllerRestartRebuildsTheAccount: the controller is down while the batch
// progresses; after restart it reaches the account a running controller would have.
func TestControllerRestartRebuildsTheAccount(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	job := wrappers.MakeJob("j", f.Namespace).Indexed(4).Parallelism(4).Queue("default").GPU(1).Obj()
	f.Create(job)
	f.Create(wrappers.MakeBatchAccount("restart", f.Namespace).Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Obj())
	framework.RunningPods(t, job, 4)
	framework.FinishIndexPod(t, job, 0, 0, "")
	framework.FinishIndexPod(t, job, 1, 0, "")
	framework.CopyIndexPodAsSucceeded(t, job, 1, "")
	waitAccount(t, f, "restart", "3 attempts over 0,1", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/j")
		return tg != nil && tg.CompletedIndexes == "0,1" && tg.SuccessfulAttempts == 3
	})

	framework.StopBatchledger(t)
	framework.FinishIndexPod(t, job, 2, 0, "")
	framework.FinishIndexPod(t, job, 3, 0, "")
	framework.WaitFor(t, job, framework.DefaultTimeout, "Complete", func(j *batchv1.Job) bool {
		return apimeta.IsStatusConditionTrue(jobConds(j), string(batchv1.JobComplete))
	})
	framework.StartBatchledger(t)

	ba := waitAccount(t, f, "restart", "account rebuilt to Accepted", func(ba *v1alpha1.BatchAccount) bool {
		ok, _ := condIs(ba.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
		return ok
	})
	tg := target(ba, "job/j")
	if tg.CompletedIndexes != "0-3" || tg.SuccessfulAttempts != 5 || tg.RepeatedIndexes != "1" || tg.Terminal != "Complete" {
		t.Errorf("target after restart = completed %q attempts %d repeated %q terminal %q; want 0-3, 5 (the ledger kept index 1's repeat), 1, Complete",
			tg.CompletedIndexes, tg.SuccessfulAttempts, tg.RepeatedIndexes, tg.Terminal)
	}
	wl := framework.WorkloadFor(t, job)
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
}

// childJob waits for a JobSet child Job of that name whose UID is not old, and returns it.
func childJob(t *testing.T, f *framework.Framework, name string, old types.UID) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	framework.Eventually(t, framework.DefaultTimeout, "child Job "+name, func() (bool, string, error) {
		err := f.Client.Get(f.Ctx, client.ObjectKey{Namespace: f.Namespace, Name: name}, job)
		if apierrors.IsNotFound(err) {
			return false, "not created yet", nil
		}
		if err != nil {
			return false, "", err
		}
		return job.UID != old && job.DeletionTimestamp == nil, "still the old identity " + string(job.UID), nil
	})
	return job
}

func jobConds(j *batchv1.Job) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range j.Status.Conditions {
		out = append(out, metav1.Condition{Type: string(c.Type), Status: metav1.ConditionStatus(c.Status)})
	}
	return out
}

// TestBadAccounts: each malformed account is rejected or reported with its own reason.
func TestBadAccounts(t *testing.T) {
	f := framework.New(t)
	cases := []struct {
		name string
		ba   *v1alpha1.BatchAccount
		want string
	}{
		{"target in another namespace", wrappers.MakeBatchAccount("other-ns", f.Namespace).Shards("A").AssignJob("j", "0", "A").TargetNamespace("kube-system").Obj(), v1alpha1.ReasonCrossNamespaceTarget},
		{"every index to shard A", wrappers.MakeBatchAccount("all-a", f.Namespace).Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "A", "A", "A").Obj(), v1alpha1.ReasonDuplicateShard},
		{"shard never assigned", wrappers.MakeBatchAccount("unassigned", f.Namespace).Shards("A", "B").AssignJob("j", "0", "A").Obj(), v1alpha1.ReasonUnassignedShard},
		{"names and count together", wrappers.MakeBatchAccount("both", f.Namespace).Shards("A").ShardCount("s", 1).AssignJob("j", "0", "A").Obj(), "names and count exclude each other"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "names and count together" {
				tc.ba.Spec.Shards.Names = []string{"A"}
			}
			err := f.Client.Create(f.Ctx, tc.ba)
			if err == nil {
				t.Fatalf("account %s accepted, want rejection with %s", tc.ba.Name, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rejection %q lacks %q", err, tc.want)
			}
		})
	}

	t.Run("target that never appears", func(t *testing.T) {
		f.Create(wrappers.MakeBatchAccount("ghost", f.Namespace).Shards("A", "B").AssignJob("ghost", "0-1", "A", "B").Obj())
		c := waitAccountCondition(t, f, "ghost", v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonTargetsNotFound)
		// The durable ledger says why waiting may be in vain: a Job deleted before the
		// account existed cannot be counted.
		want := "0/2 shards covered; missing A, B = job ghost indexes 0,1; job ghost not found; this account has never observed it: " +
			"if a Job already ran and was deleted before the account existed, its completions cannot be counted; re-run its shards in a Job the assignments name"
		if c.Message != want {
			t.Errorf("message %q, want %q", c.Message, want)
		}
		a := waitAccountCondition(t, f, "ghost", v1alpha1.ConditionAdmitted, metav1.ConditionFalse, v1alpha1.ReasonTargetsNotFound)
		if a.Message != "waiting for job ghost to exist" {
			t.Errorf("Admitted message %q", a.Message)
		}
	})

	t.Run("mapping frozen once admitted", func(t *testing.T) {
		h100Queue(f, "8")
		job := wrappers.MakeJob("frozen", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
		f.Create(job)
		f.Create(wrappers.MakeBatchAccount("frozen", f.Namespace).Shards("A", "B").AssignJob("frozen", "0-1", "A", "B").Obj())
		ba := waitAccount(t, f, "frozen", "target admitted", func(ba *v1alpha1.BatchAccount) bool {
			tg := target(ba, "job/frozen")
			return tg != nil && tg.Workload != nil && tg.Workload.Admitted
		})
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			f.Get(ba)
			ba.Spec.Assignments[0].Shards = []string{"B", "A"}
			return f.Client.Update(f.Ctx, ba)
		})
		if err == nil || !strings.Contains(err.Error(), "immutable once work was done under them (job/frozen was admitted)") {
			t.Errorf("remapping an admitted account: %v", err)
		}
	})
}

// TestWorkloadConditionsFollowKueue: our conditions pass Kueue's webhook, survive Kueue's
// own status writes (deactivation and reactivation), follow the Workload's generation, and
// come back when Kueue replaces the Workload under the same name.
func TestWorkloadConditionsFollowKueue(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	job := wrappers.MakeJob("j", f.Namespace).Indexed(4).Parallelism(4).Queue("default").GPU(1).Obj()
	f.Create(job)
	f.Create(wrappers.MakeBatchAccount("follow", f.Namespace).Shards("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").Obj())
	wl := framework.WorkloadFor(t, job)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	framework.RunningPods(t, job, 4)
	framework.FinishIndexPod(t, job, 0, 0, "")
	before := waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing)
	framework.Eventually(t, framework.DefaultTimeout, "1/4 covered on the Workload", func() (bool, string, error) {
		f.Get(wl)
		c := apimeta.FindStatusCondition(wl.Status.Conditions, v1alpha1.WorkloadConditionShardsCovered)
		return strings.Contains(c.Message, "1/4 shards covered"), c.Message, nil
	})
	if fm := managerOf(wl, v1alpha1.WorkloadConditionShardsCovered); fm != "batchledger" {
		t.Errorf("our condition is managed by %q, want batchledger", fm)
	}

	// Deactivate and reactivate: Kueue rewrites its conditions and bumps the generation.
	setActive(t, f, wl, false)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadEvicted, metav1.ConditionTrue)
	setActive(t, f, wl, true)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	framework.WaitFor(t, wl, framework.DefaultTimeout, "our condition at the new generation", func(wl *kueue.Workload) bool {
		c := apimeta.FindStatusCondition(wl.Status.Conditions, v1alpha1.WorkloadConditionShardsCovered)
		return c != nil && c.ObservedGeneration == wl.Generation
	})
	after := apimeta.FindStatusCondition(wl.Status.Conditions, v1alpha1.WorkloadConditionShardsCovered)
	if after.Status != before.Status || after.Reason != before.Reason || !after.LastTransitionTime.Equal(&before.LastTransitionTime) {
		t.Errorf("our condition changed through Kueue's writes: %+v -> %+v", before, *after)
	}

	// Kueue replaces a Job's Workload under the same name with a new UID (seen when a
	// running Job's parallelism changed; how soon it does so then depends on Kueue's
	// requeueing, so the test deletes the Workload, which Kueue answers the same way:
	// the Job is suspended and a new Workload created for it).
	oldUID := wl.UID
	if err := f.Client.Delete(f.Ctx, wl); err != nil {
		t.Fatalf("delete Workload: %v", err)
	}
	var replaced *kueue.Workload
	framework.Eventually(t, framework.DefaultTimeout, "a new Workload with our condition", func() (bool, string, error) {
		var wls kueue.WorkloadList
		if err := f.Client.List(f.Ctx, &wls, client.InNamespace(f.Namespace)); err != nil {
			return false, "", err
		}
		for i := range wls.Items {
			w := &wls.Items[i]
			if w.UID != oldUID && metav1.IsControlledBy(w, job) {
				replaced = w
				c := apimeta.FindStatusCondition(w.Status.Conditions, v1alpha1.WorkloadConditionShardsCovered)
				return c != nil, "new Workload " + w.Name + " without our condition yet", nil
			}
		}
		return false, "Workload not replaced yet", nil
	})
	c := apimeta.FindStatusCondition(replaced.Status.Conditions, v1alpha1.WorkloadConditionShardsCovered)
	if c.Reason != v1alpha1.ReasonShardsMissing || !strings.Contains(c.Message, "1/4 shards covered") {
		t.Errorf("condition on the replacement Workload: %+v", c)
	}
}

// managerOf names the field manager that owns a condition type of a Workload's status.
func managerOf(wl *kueue.Workload, condType string) string {
	for _, mf := range wl.ManagedFields {
		// The key sits JSON-escaped in FieldsV1: k:{\"type\":\"<condType>\"}.
		if mf.Subresource == "status" && mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), condType) {
			return mf.Manager
		}
	}
	return ""
}

func setActive(t *testing.T, f *framework.Framework, wl *kueue.Workload, active bool) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"active": active}})
	if err := f.Client.Patch(f.Ctx, wl, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("set Workload active=%v: %v", active, err)
	}
}

// TestAccountWrittenBeforeItsJobSetWaitsForIt: an account applied before its JobSet (as a
// GitOps tool may order them) waits for it: its children are not found, never "deleted"
// or "never created", and no Warning is emitted about the account; once the JobSet runs,
// the batch is accounted as usual.
func TestAccountWrittenBeforeItsJobSetWaitsForIt(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "4")
	f.Create(wrappers.MakeBatchAccount("early", f.Namespace).ShardCount("s", 4).
		AssignJobSet("late", "workers", 0, "0-1", "0-1").AssignJobSet("late", "workers", 1, "0-1", "2-3").Obj())

	c := waitAccountCondition(t, f, "early", v1alpha1.ConditionAdmitted, metav1.ConditionFalse, v1alpha1.ReasonTargetsNotFound)
	if !strings.Contains(c.Message, "waiting for jobset late workers[0]") {
		t.Errorf("Admitted message %q does not say what the account waits for", c.Message)
	}
	ba := waitAccount(t, f, "early", "its status written", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.ObservedGeneration == ba.Generation })
	if term := apimeta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionTerminated); term == nil || term.Reason == v1alpha1.ReasonTargetDeleted {
		t.Errorf("Terminated %+v before the JobSet exists; want a wait, not TargetDeleted", term)
	}
	for _, tg := range ba.Status.Targets {
		if tg.Deleted {
			t.Errorf("target %s recorded deleted before its JobSet exists", tg.Name)
		}
	}

	worker := wrappers.MakeJob("", "").Indexed(2).Parallelism(2).GPU(1).BackoffLimit(0).Obj()
	js := wrappers.MakeJobSet("late", f.Namespace).Queue("default").
		ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Job(worker).Obj()).Obj()
	f.Create(js)
	for _, name := range []string{"late-workers-0", "late-workers-1"} {
		child := childJob(t, f, name, "")
		framework.RunningPods(t, child, 2)
		for i := range 2 {
			framework.FinishIndexPod(t, child, i, 0, "")
		}
	}
	waitAccountCondition(t, f, "early", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)

	ba = waitAccount(t, f, "early", "read again", func(*v1alpha1.BatchAccount) bool { return true })
	var evs corev1.EventList
	if err := f.Client.List(f.Ctx, &evs, client.InNamespace(f.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if ev.ReportingController == "batchledger" && ev.InvolvedObject.UID == ba.UID && ev.Type == corev1.EventTypeWarning {
			t.Errorf("Warning %s about the account: %s", ev.Reason, ev.Message)
		}
	}
}

// TestChildNeverCreatedStaysSoOnceItsJobSetIsGone: a JobSet whose replicatedJob infer
// dependsOn prep Complete fails when prep's one pod fails, so infer's child is never
// created. The account naming only that child says it was never created and will not be;
// once the JobSet is gone (deleted by hand, or by its ttlSecondsAfterFinished) the verdict
// stands: the account saw the JobSet end, so it does not take it for one not created yet
// and go back to waiting for the child to exist (TargetsNotFound, AwaitingTermination).
func TestChildNeverCreatedStaysSoOnceItsJobSetIsGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  *int32 // nil: the test deletes the JobSet
	}{
		{name: "deleted by hand"},
		// Long enough for the account to see the JobSet Failed before it goes: an account
		// that never saw its JobSet still waits for it, by design.
		{name: "deleted by its ttlSecondsAfterFinished", ttl: ptr.To(int32(5))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := framework.New(t)
			h100Queue(f, "4")
			prep := wrappers.MakeJob("", "").Indexed(1).Parallelism(1).GPU(1).BackoffLimit(0).Obj()
			infer := wrappers.MakeReplicatedJob("infer").
				Job(wrappers.MakeJob("", "").Indexed(2).Parallelism(2).GPU(1).BackoffLimit(0).Obj()).Obj()
			infer.DependsOn = []jobset.DependsOn{{Name: "prep", Status: jobset.DependencyComplete}}
			js := wrappers.MakeJobSet("pipe", f.Namespace).Queue("default").
				ReplicatedJob(wrappers.MakeReplicatedJob("prep").Job(prep).Obj()).ReplicatedJob(infer).Obj()
			js.Spec.TTLSecondsAfterFinished = tc.ttl
			// Only the child never created is named: prep's child, observed, would tell the
			// account its JobSet existed whatever became of it.
			f.Create(wrappers.MakeBatchAccount("pipe", f.Namespace).ShardCount("s", 2).
				AssignJobSet("pipe", "infer", 0, "0-1", "0-1").Obj())
			f.Create(js)

			p := childJob(t, f, "pipe-prep-0", "")
			framework.RunningPods(t, p, 1)
			framework.FinishIndexPod(t, p, 0, 1, "") // backoffLimit 0, no restarts: the JobSet fails
			framework.WaitFor(t, js, framework.DefaultTimeout, "JobSet Failed", func(js *jobset.JobSet) bool {
				return js.DeletionTimestamp != nil || apimeta.IsStatusConditionTrue(js.Status.Conditions, string(jobset.JobSetFailed))
			})
			const neverCreated = "jobset pipe infer[0] was never created and will not be"
			ba := waitAccount(t, f, "pipe", "infer[0] never created", func(ba *v1alpha1.BatchAccount) bool {
				c := apimeta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionShardsCovered)
				return c != nil && strings.Contains(c.Message, neverCreated)
			})
			if ok, state := condIs(ba.Status.Conditions, v1alpha1.ConditionTerminated, metav1.ConditionFalse, v1alpha1.ReasonTargetDeleted); !ok {
				t.Fatalf("Terminated with infer[0] never created: %s; want False/TargetDeleted", state)
			}
			// The messages change with how the JobSet ended (Failed, then deleted): the
			// statuses and reasons are the verdict.
			verdict := func(ba *v1alpha1.BatchAccount) string {
				var out []string
				for _, typ := range []string{v1alpha1.ConditionTerminated, v1alpha1.ConditionAdmitted} {
					if c := apimeta.FindStatusCondition(ba.Status.Conditions, typ); c != nil {
						out = append(out, typ+"="+string(c.Status)+"/"+c.Reason)
					} else {
						out = append(out, typ+" absent")
					}
				}
				return strings.Join(out, " ")
			}
			before := verdict(ba)

			if tc.ttl == nil {
				if err := f.Client.Delete(f.Ctx, js, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
					t.Fatal(err)
				}
			}
			framework.Eventually(t, framework.DefaultTimeout, "JobSet pipe gone", func() (bool, string, error) {
				err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(js), &jobset.JobSet{})
				return apierrors.IsNotFound(err), "still there", client.IgnoreNotFound(err)
			})
			// Until the account has observed the deletion, and past the unfound recheck (a
			// reconcile with nothing else to wake it): the verdict must never go back to a
			// wait.
			observed := func(ba *v1alpha1.BatchAccount) bool {
				c := apimeta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionShardsCovered)
				return c != nil && strings.Contains(c.Message, neverCreated+" (its JobSet was deleted)")
			}
			settled, deadline := time.Now().Add(framework.UnfoundRecheck+5*time.Second), time.Now().Add(framework.DefaultTimeout)
			for {
				f.Get(ba)
				if got := verdict(ba); got != before {
					t.Fatalf("verdict after the JobSet was deleted: %s; want it to stay %s\n%s", got, before, framework.StatusYAML(ba))
				}
				if observed(ba) && time.Now().After(settled) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the JobSet's deletion not observed in %v\n%s", framework.DefaultTimeout, framework.StatusYAML(ba))
				}
				time.Sleep(500 * time.Millisecond)
			}
			if tg := target(ba, "jobset/pipe/infer/0"); tg == nil || tg.UID != "" || !tg.OwnerEndedSeen {
				t.Errorf("infer[0] target %+v; want no identity, ownerEndedSeen", tg)
			}
		})
	}
}
