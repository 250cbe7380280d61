package batchledger

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestTrainJobScopeSurvivesTrainerReapplies: the scope webhook labels the JobSet Trainer
// renders for an accounted TrainJob (its metadata, the node Job template and pod
// template) as Trainer creates it by server-side apply. Kueue then evicts the running
// TrainJob (its Workload deactivated) after node 0 reported its result: Trainer applies
// the JobSet again, suspended, and again, unsuspended, once Kueue admits it anew. The
// webhook's labels belong to no field manager, and Trainer's apply after Kueue took its
// runtime patch back removed the pod template's (unless the controller's runtime patch
// had landed first); the webhook puts them back on update, so they stay. The account
// reports the eviction, keeps the recorded result and
// coverage, and the second run's pod is held for its result like the first's. A node of
// the second run then fails and the JobSet restarts: the new child's pods, made from the
// JobSet's templates as Trainer last applied them, are held too, and the batch ends
// Accepted.
func TestTrainJobScopeSurvivesTrainerReapplies(t *testing.T) {
	f := framework.New(t)
	skipWithoutTrainJobs(t, f)
	tj, wl := admittedTwoNodeTrainJob(t, f)

	// Trainer renders the JobSet once it reconciles the admitted TrainJob: it may not
	// exist yet when Kueue's admission shows.
	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: tj.Name}}
	framework.WaitFor(t, js, framework.DefaultTimeout, "rendered by Trainer", func(*jobset.JobSet) bool { return true })
	wantJobSetScope(t, js, "as rendered")
	// Trainer names itself in the controller reference by its one served version; the
	// account finds the TrainJob's Workload through it (checked at the end).
	if owner := metav1.GetControllerOf(js); owner == nil || owner.APIVersion != trainer.GroupVersion.String() || owner.Kind != trainer.TrainJobKind {
		t.Errorf("JobSet controller %+v, want %s %s", owner, trainer.GroupVersion, trainer.TrainJobKind)
	}

	job := childJob(t, f, "llm-node-0", "")
	for _, p := range framework.RunningPods(t, job, 2) {
		wantHeld(t, &p)
	}
	framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
	waitAccount(t, f, "llm", "A recorded and covered", func(ba *v1alpha1.BatchAccount) bool {
		return ba.Status.Shards.Covered == 1 && ba.Status.Results.Recorded == 1
	})

	// Evict: Kueue suspends the TrainJob; Trainer applies its JobSet again, suspended, and
	// keeps applying it at every reconcile while the TrainJob stays suspended.
	setActive(t, f, wl, false)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadEvicted, metav1.ConditionTrue)
	framework.WaitFor(t, js, framework.DefaultTimeout, "JobSet suspended by Trainer", func(js *jobset.JobSet) bool {
		return ptr.Deref(js.Spec.Suspend, false)
	})
	wantJobSetScope(t, js, "suspended by Trainer's apply")
	t.Logf("JobSet managed fields while suspended: %s", managers(js))
	waitAccountCondition(t, f, "llm", v1alpha1.ConditionAdmitted, metav1.ConditionFalse, v1alpha1.ReasonEvicted)
	ba := waitAccount(t, f, "llm", "the eviction recorded", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "trainjob/llm/node/0")
		return tg != nil && tg.Workload != nil && tg.Workload.Evicted
	})
	if ba.Status.Shards.Covered != 1 || ba.Status.Results.Recorded != 1 {
		t.Errorf("after the eviction: covered %d, recorded %d; want 1 and 1 kept", ba.Status.Shards.Covered, ba.Status.Results.Recorded)
	}

	setActive(t, f, wl, true)
	framework.WaitForWorkloadCondition(t, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	framework.WaitFor(t, js, framework.DefaultTimeout, "JobSet resumed by Trainer", func(js *jobset.JobSet) bool {
		return !ptr.Deref(js.Spec.Suspend, true)
	})
	wantJobSetScope(t, js, "resumed by Trainer's apply")
	waitAccountCondition(t, f, "llm", v1alpha1.ConditionAdmitted, metav1.ConditionTrue, "")
	job = childJob(t, f, "llm-node-0", "")
	wantHeld(t, framework.RunningIndexPod(t, job, 1))
	// Node 1 fails: the JobSet restarts, and its new child Job comes from the JobSet's
	// templates as Trainer last applied them (the Job webhook stamps it too).
	framework.FinishIndexPod(t, job, 1, 1, "")
	job = childJob(t, f, "llm-node-0", job.UID)
	for _, p := range framework.RunningPods(t, job, 2) {
		wantHeld(t, &p)
	}
	framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A2"))
	framework.FinishIndexPod(t, job, 1, 0, report(t, "B", "m-2026-11", "sha256:B"))
	waitAccountCondition(t, f, "llm", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	ba = waitAccount(t, f, "llm", "2 accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 2 })
	if tg := target(ba, "trainjob/llm/node/0"); tg == nil || tg.UID != job.UID || tg.Workload == nil || tg.Workload.Name != wl.Name || len(ba.Status.History) == 0 {
		t.Errorf("target %+v, history %+v; want the restart's child %s under Workload %s, the first child in history", tg, ba.Status.History, job.UID, wl.Name)
	}
}

// wantJobSetScope fails t unless js, its node Job template and its pod template all carry
// the results scope.
func wantJobSetScope(t *testing.T, js *jobset.JobSet, when string) {
	t.Helper()
	got := []string{"jobset=" + js.Labels[v1alpha1.LabelScope]}
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name != localcluster.TrainerNodeJob {
			continue
		}
		got = append(got, "job="+rj.Template.Labels[v1alpha1.LabelScope], "pod="+rj.Template.Spec.Template.Labels[v1alpha1.LabelScope])
	}
	want := []string{"jobset=" + v1alpha1.ScopeResults, "job=" + v1alpha1.ScopeResults, "pod=" + v1alpha1.ScopeResults}
	if !slices.Equal(got, want) {
		t.Errorf("JobSet %s %s: scope %v, want %v (managed fields: %s)", js.Name, when, got, want, managers(js))
	}
}

// wantHeld fails t unless the pod is in the results scope and held for its result.
func wantHeld(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if p.Labels[v1alpha1.LabelScope] != v1alpha1.ScopeResults || !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
		t.Errorf("pod %s: scope %q finalizers %v; want held for its result", p.Name, p.Labels[v1alpha1.LabelScope], p.Finalizers)
	}
}

// managers renders who owns which of an object's fields, for the log: manager,
// operation and the fields' size.
func managers(obj client.Object) string {
	var out []string
	for _, m := range obj.GetManagedFields() {
		var n int
		if m.FieldsV1 != nil {
			n = len(m.FieldsV1.Raw)
		}
		owns := ""
		if m.FieldsV1 != nil && strings.Contains(string(m.FieldsV1.Raw), v1alpha1.LabelScope) {
			owns = " owns the scope label"
		}
		out = append(out, fmt.Sprintf("%s/%s%s (%d bytes)", m.Manager, m.Operation, owns, n))
	}
	return strings.Join(out, ", ")
}

// TestTrainJobSuspendedByItsUserAfterItRan: a TrainJob that no Kueue queue manages is
// suspended by its user after node 0 finished, and resumed later. Trainer suspends its
// JobSet (applying it again), JobSet its child Job in place (its generation changes,
// which wakes the account): the account keeps its coverage and waits (not terminated, no
// target lost), and the JobSet keeps its scope. Resumed, node 1 finishes and the account ends Accepted.
func TestTrainJobSuspendedByItsUserAfterItRan(t *testing.T) {
	f := framework.New(t)
	skipWithoutTrainJobs(t, f)
	f.Create(wrappers.MakeBatchAccount("llm", f.Namespace).Shards("A", "B").
		AssignTrainJob("llm", localcluster.TrainerNodeJob, 0, "0-1", "0-1").Obj())
	waitAccount(t, f, "llm", "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool {
		return len(ba.Status.Conditions) > 0
	})
	tj := wrappers.MakeTrainJob("llm", f.Namespace, localcluster.TrainerRuntime).NumNodes(2).GPU(1).Obj()
	f.Create(tj)
	job := childJob(t, f, "llm-node-0", "")
	framework.RunningPods(t, job, 2)
	framework.FinishIndexPod(t, job, 0, 0, "")
	waitAccount(t, f, "llm", "1/2 covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 1 })

	suspend := func(s bool) {
		t.Helper()
		patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"suspend":%t}}`, s)))
		if err := f.Client.Patch(f.Ctx, tj, patch); err != nil {
			t.Fatalf("suspend=%v: %v", s, err)
		}
	}
	suspend(true)
	framework.WaitFor(t, job, framework.DefaultTimeout, "child Job suspended in place", func(j *batchv1.Job) bool {
		return ptr.Deref(j.Spec.Suspend, false) && apimeta.IsStatusConditionTrue(jobConds(j), string(batchv1.JobSuspended))
	})
	// Trainer renders the JobSet once it reconciles the admitted TrainJob: it may not
	// exist yet when Kueue's admission shows.
	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: tj.Name}}
	framework.WaitFor(t, js, framework.DefaultTimeout, "rendered by Trainer", func(*jobset.JobSet) bool { return true })
	if !ptr.Deref(js.Spec.Suspend, false) || js.Spec.ReplicatedJobs[0].Template.Spec.Template.Labels[v1alpha1.LabelScope] != v1alpha1.ScopeCoverage {
		t.Errorf("JobSet suspend %v, pod template labels %v; want suspended, scope %s kept", js.Spec.Suspend, js.Spec.ReplicatedJobs[0].Template.Spec.Template.Labels, v1alpha1.ScopeCoverage)
	}
	// Nothing of the account's status tells a suspended child from a running one: the
	// account keeps what it had, and waits.
	ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: "llm"}}
	f.Get(ba)
	term := apimeta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionTerminated)
	if ba.Status.Shards.Covered != 1 || term == nil || term.Status != metav1.ConditionFalse || term.Reason != v1alpha1.ReasonAwaitingTermination {
		t.Errorf("suspended: covered %d, Terminated %+v; want 1 kept and %s", ba.Status.Shards.Covered, term, v1alpha1.ReasonAwaitingTermination)
	}

	suspend(false)
	framework.FinishIndexPod(t, job, 1, 0, "")
	waitAccountCondition(t, f, "llm", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	if ba = waitAccount(t, f, "llm", "2/2 covered", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Covered == 2 }); target(ba, "trainjob/llm/node/0").UID != job.UID {
		t.Errorf("target %+v; want the child %s suspended and resumed in place", target(ba, "trainjob/llm/node/0"), job.UID)
	}
}
