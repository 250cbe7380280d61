package batchledger

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestAcceptedAccountIgnoresJobRerun: Job j runs, reports A and B, and its account
// requiring results is Accepted. j is then deleted and created again under the same name,
// labels and queue: another batch (new UID, new Workload) that no account follows
// (account.Follows). Its pods report results too, which a capture that went by the name
// alone would record as StaleIdentity rejections. The account keeps its verdict and its
// record of the first Job; it records nothing of the re-run, holds none of its pods past
// their end, puts no Accepted verdict on its Workload, and the plugin's `explain job j`
// and `explain workload` refuse to present the earlier verdict as the re-run's. All of
// that still holds once the account's ttlSecondsAfterFinished is changed, which judges
// nothing.
func TestAcceptedAccountIgnoresJobRerun(t *testing.T) {
	f := framework.New(t)
	resultsJob(t, f, "ij245", "A", "B")
	first := jobStatus(t, f, "j")
	framework.RunningPods(t, first, 2)
	framework.FinishIndexPod(t, first, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
	framework.FinishIndexPod(t, first, 1, 0, report(t, "B", "m-2026-11", "sha256:B"))
	waitAccountCondition(t, f, "ij245", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	accepted := waitAccount(t, f, "ij245", "2 accepted and recorded", func(ba *v1alpha1.BatchAccount) bool {
		return ba.Status.Shards.Accepted == 2 && ba.Status.Results.Recorded == 2
	})
	firstWL := framework.WorkloadFor(t, first)
	waitWorkloadVerdict(t, firstWL, v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	// Released first, so that the first run's pods are not what keeps anything below.
	waitUnheld(t, first, framework.DefaultTimeout)

	if err := f.Client.Delete(f.Ctx, first, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("delete Job j: %v", err)
	}
	framework.WaitForAbsent(t, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: f.Namespace}})

	// The re-run: same name, labels and queue. The scope webhook stamps it by name, so its
	// pods may be held at creation; only the releaser's rule decides how long.
	f.Create(wrappers.MakeJob("j", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj())
	rerun := jobStatus(t, f, "j")
	if rerun.UID == first.UID {
		t.Fatalf("re-run has the first Job's UID %s", rerun.UID)
	}
	for _, p := range framework.RunningPods(t, rerun, 2) {
		t.Logf("re-run pod %s: scope %q, finalizers %v", p.Name, p.Labels[v1alpha1.LabelScope], p.Finalizers)
	}
	rerunWL := framework.WorkloadFor(t, rerun)
	if rerunWL.UID == firstWL.UID {
		t.Fatalf("re-run's Workload %s is the first run's", rerunWL.Name)
	}
	framework.FinishIndexPod(t, rerun, 0, 0, report(t, "A", "m-2026-11", "sha256:A2"))
	framework.FinishIndexPod(t, rerun, 1, 0, report(t, "B", "m-2026-11", "sha256:B2"))
	framework.WaitForJobCondition(t, rerun, batchv1.JobComplete)
	// Promptly, not after --max-result-hold (24h): no account records these results.
	waitUnheld(t, rerun, 15*time.Second)
	for _, p := range framework.JobPods(t, rerun) {
		if err := f.Client.Delete(f.Ctx, &p); err != nil {
			t.Fatalf("delete re-run pod %s: %v", p.Name, err)
		}
		framework.WaitForAbsent(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
	}

	// Nothing announces "the account ignored the re-run": watch for a while that none of
	// the account's record, results or the re-run Workload's verdict moves.
	steady := func(after string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Name: "ij245", Namespace: f.Namespace}}
			f.Get(ba)
			if ok, s := condIs(ba.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted); !ok {
				t.Fatalf("account no longer Accepted %s: %s", after, s)
			}
			if tg := target(ba, "job/j"); tg == nil || tg.UID != first.UID {
				t.Fatalf("%s, target job/j %+v; want the first Job %s on record", after, tg, first.UID)
			}
			if ba.Status.Results.Recorded != accepted.Status.Results.Recorded || ba.Status.Results.Rejected != 0 || ba.Status.Results.Conflicts != 0 {
				t.Fatalf("results %+v %s; want %+v unchanged", ba.Status.Results, after, accepted.Status.Results)
			}
			if uids := recordedJobUIDs(t, f, "ij245"); slices.Contains(uids, rerun.UID) {
				t.Fatalf("%s, ShardResults of ij245 record the re-run %s: %v", after, rerun.UID, uids)
			}
			wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: rerunWL.Name, Namespace: f.Namespace}}
			f.Get(wl)
			if c := apimeta.FindStatusCondition(wl.Status.Conditions, v1alpha1.WorkloadConditionAccepted); c != nil && c.Status == metav1.ConditionTrue {
				t.Fatalf("%s, re-run's Workload %s carries %s=True: %q", after, wl.Name, c.Type, c.Message)
			}
			if time.Now().After(deadline) {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	steady("after the re-run")

	// A change of the spec that judges nothing (how long the account is kept) leaves the
	// verdict final: the account still follows only the Job on its record.
	ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Name: "ij245", Namespace: f.Namespace}}
	f.Get(ba)
	base := ba.DeepCopy()
	ba.Spec.TTLSecondsAfterFinished = ptr.To[int32](3600)
	if err := f.Client.Patch(f.Ctx, ba, client.MergeFrom(base)); err != nil {
		t.Fatalf("set ttlSecondsAfterFinished on ij245: %v", err)
	}
	waitAccount(t, f, "ij245", "its new generation judged", func(ba *v1alpha1.BatchAccount) bool {
		c := apimeta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionAccepted)
		return ba.Status.ObservedGeneration == ba.Generation && c != nil && c.ObservedGeneration == ba.Generation
	})
	steady("after a change of its ttlSecondsAfterFinished")

	// explain resolves the Job and its Workload to the re-run, which no account follows:
	// an error (exit 1), never ACCEPTED (exit 0) on the earlier batch's verdict.
	why := fmt.Sprintf(`BatchAccount "ij245" names Job "j" but was Accepted on an earlier run of the name (Job uid %s)`, first.UID)
	out, errOut, code := plugin(t, "explain", "job", "j", "-n", f.Namespace, "--exit-code")
	if code != options.ExitError || !strings.Contains(errOut, fmt.Sprintf(`no BatchAccount follows Job "j" (uid %s)`, rerun.UID)) || !strings.Contains(errOut, why) {
		t.Errorf("explain job j --exit-code of the re-run: exit %d, stderr %q\n%s", code, errOut, out)
	}
	out, errOut, code = plugin(t, "explain", "workload", rerunWL.Name, "-n", f.Namespace, "--exit-code")
	if code != options.ExitError || !strings.Contains(errOut, "no BatchAccount follows Workload") || !strings.Contains(errOut, why) {
		t.Errorf("explain workload %s --exit-code of the re-run: exit %d, stderr %q\n%s", rerunWL.Name, code, errOut, out)
	}
}

// waitUnheld waits, up to timeout, until no pod of job carries the result finalizer
// (scope_test's waitReleased has the default timeout: too long to call release prompt).
func waitUnheld(t *testing.T, job *batchv1.Job, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, "every pod of Job "+job.Name+" released", func() (bool, string, error) {
		for _, p := range framework.JobPods(t, job) {
			if slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
				return false, p.Name + " still held", nil
			}
		}
		return true, "", nil
	})
}

// recordedJobUIDs lists the Job UIDs of every result the account's ShardResults hold.
func recordedJobUIDs(t *testing.T, f *framework.Framework, account string) []types.UID {
	t.Helper()
	var chunks v1alpha1.ShardResultsList
	if err := f.Client.List(f.Ctx, &chunks, client.InNamespace(f.Namespace), client.MatchingLabels{v1alpha1.LabelAccount: account}); err != nil {
		t.Fatal(err)
	}
	var uids []types.UID
	for _, c := range chunks.Items {
		for _, r := range c.Results {
			uids = append(uids, r.JobUID)
		}
	}
	return uids
}
