package batchledger

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// leaderOf returns the one replica holding the leader Lease, waiting for an election.
func leaderOf(t *testing.T, names []string, skip string) string {
	t.Helper()
	var leader string
	framework.Eventually(t, framework.DefaultTimeout, "exactly one leader among "+strings.Join(names, ", "), func() (bool, string, error) {
		var leaders []string
		for _, n := range names {
			if n != skip && framework.ManagerMetrics(t, n).Leader {
				leaders = append(leaders, n)
			}
		}
		if len(leaders) != 1 {
			return false, fmt.Sprintf("leaders: %v", leaders), nil
		}
		leader = leaders[0]
		return true, "", nil
	})
	return leader
}

// TestLeaderKilledMidBatch: two replicas elect a leader and both serve the webhooks. The
// leader records two results, then is SIGKILLed right after two more pods succeed. Pods
// the Job controller creates while no replica leads are still held for their results
// (the standby serves the pod webhook), the standby takes over once the Lease expires,
// and the batch ends Accepted with every shard's result recorded exactly once, every pod
// released and no verdict event repeated on the account or the Workload.
func TestLeaderKilledMidBatch(t *testing.T) {
	f := framework.New(t)
	replicas := framework.StartBatchledgerReplicas(t, 2)
	leader := leaderOf(t, replicas.Names, "")
	t.Logf("leader: %s", leader)

	shards := []string{"A", "B", "C", "D", "E", "F", "G", "H"}
	h100Queue(f, "8")
	f.Create(wrappers.MakeBatchAccount("ha", f.Namespace).Shards(shards...).
		AssignJob("j", indexset.Range(0, len(shards)-1).String(), shards...).RequireResults(seedRule).Obj())
	waitAccount(t, f, "ha", "the account observed by the leader", func(ba *v1alpha1.BatchAccount) bool {
		return len(ba.Status.Conditions) > 0
	})
	f.Create(wrappers.MakeJob("j", f.Namespace).Indexed(int32(len(shards))).Parallelism(4).Queue("default").GPU(1).Obj())
	job := jobStatus(t, f, "j")

	framework.RunningPods(t, job, 4)
	for i := range 2 {
		framework.FinishIndexPod(t, job, i, 0, report(t, shards[i], "m-2026-11", "sha256:"+shards[i]))
	}
	waitAccount(t, f, "ha", "2 results accepted by the leader", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 2 })
	before := framework.ManagerMetrics(t, leader)

	for i := 2; i < 4; i++ {
		framework.FinishIndexPod(t, job, i, 0, report(t, shards[i], "m-2026-11", "sha256:"+shards[i]))
	}
	framework.KillManager(t, leader)
	killed := time.Now()
	t.Logf("killed %s after %v status writes", leader, before.StatusWrites)

	// Indexes 4-7 start now, while nobody leads: their pods pass the webhook of the
	// standby, through the proxy standing in for the Service.
	pods := framework.RunningPods(t, job, 4)
	for _, p := range pods {
		if !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			t.Errorf("pod %s (index %d), created after the leader died, is not held for its result: %v", p.Name, framework.PodIndex(&p), p.Finalizers)
		}
	}
	standby := leaderOf(t, replicas.Names, leader)
	t.Logf("%s leads %s after the kill (lease 8s)", standby, time.Since(killed).Round(100*time.Millisecond))
	for i := 4; i < len(shards); i++ {
		framework.FinishIndexPod(t, job, i, 0, report(t, shards[i], "m-2026-11", "sha256:"+shards[i]))
	}
	waitAccountCondition(t, f, "ha", v1alpha1.ConditionAccepted, metav1.ConditionTrue, account.ReasonAccepted)
	ba := waitAccount(t, f, "ha", "8 accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 8 })
	if ba.Status.Results.Rejected != 0 || ba.Status.Results.Conflicts != 0 {
		t.Errorf("rejections or conflicts after the takeover: %+v", ba.Status.Results)
	}
	wl := framework.WorkloadFor(t, job)
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, account.ReasonAccepted)

	// Nothing lost, nothing twice: one recorded result per shard.
	var chunks v1alpha1.ShardResultsList
	if err := f.Client.List(f.Ctx, &chunks, client.InNamespace(f.Namespace), client.MatchingLabels{v1alpha1.LabelAccount: "ha"}); err != nil {
		t.Fatal(err)
	}
	recorded := map[string]int{}
	for _, c := range chunks.Items {
		for _, r := range c.Results {
			recorded[r.Shard]++
		}
	}
	for _, s := range shards {
		if recorded[s] != 1 {
			t.Errorf("shard %s recorded %d times, want once (all: %v)", s, recorded[s], recorded)
		}
	}
	framework.Eventually(t, framework.DefaultTimeout, "every pod released", func() (bool, string, error) {
		for _, p := range framework.JobPods(t, job) {
			if slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
				return false, p.Name + " still held", nil
			}
		}
		return true, "", nil
	})
	if m := framework.ManagerMetrics(t, standby); m.StatusWrites == 0 || m.ResultWrites == 0 || m.PodReleases == 0 {
		t.Errorf("the new leader %s did not take over the batch: %+v", standby, m)
	}

	// No event storm: each verdict transition is one Event object, never repeated (a
	// repeat in one process would show as a series, in another as a second object).
	checkEventsOnce(t, f, ba.UID, wl.UID)
}

// checkEventsOnce fails on any batchledger event reason reported twice about the same
// object, and requires the final verdict on both the account and the Workload.
func checkEventsOnce(t *testing.T, f *framework.Framework, accountUID, workloadUID types.UID) {
	t.Helper()
	var evs corev1.EventList
	if err := f.Client.List(f.Ctx, &evs, client.InNamespace(f.Namespace)); err != nil {
		t.Fatal(err)
	}
	count := map[types.UID]map[string]int{accountUID: {}, workloadUID: {}}
	for _, ev := range evs.Items {
		if ev.ReportingController != "batchledger" {
			continue
		}
		byReason, ok := count[ev.InvolvedObject.UID]
		if !ok {
			continue
		}
		byReason[ev.Reason]++
		if ev.Series != nil {
			t.Errorf("event %s about %s %s repeated %d times: %s", ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Series.Count, ev.Message)
		}
	}
	for uid, byReason := range count {
		for reason, n := range byReason {
			if n != 1 {
				t.Errorf("event %s about %s emitted %d times", reason, uid, n)
			}
		}
		if byReason["AcceptedAccepted"] != 1 {
			t.Errorf("no AcceptedAccepted event about %s; events: %v", uid, byReason)
		}
	}
	t.Logf("account events: %v; workload events: %v", count[accountUID], count[workloadUID])
}
