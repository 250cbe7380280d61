package batchledger

import (
	"strings"
	"sync/atomic"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	jobsetkind "batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestOneCompletionIdentityIsOneShard runs one JobSet (replicatedJob w, one child of one
// index) under the real JobSet controller and two accounts on it:
//
//   - "twice" assigns the child's index 0 twice, by the Job's name onto shard A and as the
//     JobSet's child onto shard B. Admission cannot tell (the Job does not exist yet); once
//     the child exists the account says AssignmentValid False DuplicateIndex, naming both
//     targets, and it is never Accepted, not even when the child's one pod succeeded and
//     the JobSet completed. The JobSet's Workload, which speaks for both accounts, is not
//     Accepted either.
//   - "follows" assigns the child once. A plain Job made by hand with the child's JobSet
//     labels and a later restart attempt runs to completion beside it: the JobSet does
//     not control it, so the account keeps following the real child, and is Accepted on
//     the child's own completion.
func TestOneCompletionIdentityIsOneShard(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "4")
	worker := wrappers.MakeJob("", "").Indexed(1).Parallelism(1).GPU(1).BackoffLimit(0).Obj()
	js := wrappers.MakeJobSet("tw", f.Namespace).Queue("default").
		ReplicatedJob(wrappers.MakeReplicatedJob("w").Replicas(1).Job(worker).Obj()).Obj()
	twice := wrappers.MakeBatchAccount("twice", f.Namespace).Shards("A", "B").
		AssignJob("tw-w-0", "0", "A").AssignJobSet("tw", "w", 0, "0", "1").Obj()
	follows := wrappers.MakeBatchAccount("follows", f.Namespace).Shards("S").AssignJobSet("tw", "w", 0, "0", "0").Obj()
	f.Create(twice)
	f.Create(follows)
	everAccepted := watchEverAccepted(t, f, "twice")
	f.Create(js)

	child := childJob(t, f, "tw-w-0", "")
	c := waitAccountCondition(t, f, "twice", v1alpha1.ConditionAssignmentValid, metav1.ConditionFalse, v1alpha1.ReasonDuplicateIndex)
	for _, want := range []string{"job tw-w-0 (assignments[0])", "jobset tw w[0] (assignments[1])", "UID " + string(child.UID), "index 0 assigned twice"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("AssignmentValid message %q lacks %q", c.Message, want)
		}
	}

	// The impostor: a plain Job, not created by the JobSet, labelled as its child's next
	// restart attempt, queued like any Job.
	handMade := wrappers.MakeJob("tw-w-0-retry", f.Namespace).Indexed(1).Parallelism(1).Queue("default").GPU(1).BackoffLimit(0).Obj()
	for k, v := range map[string]string{
		jobset.JobSetNameKey: "tw", jobset.ReplicatedJobNameKey: "w", jobset.JobIndexKey: "0", jobsetkind.LabelRestartAttempt: "5",
	} {
		handMade.Labels = setLabel(handMade.Labels, k, v)
		handMade.Spec.Template.Labels = setLabel(handMade.Spec.Template.Labels, k, v)
	}
	f.Create(handMade)
	framework.RunningPods(t, handMade, 1)
	framework.FinishIndexPod(t, handMade, 0, 0, "")
	framework.WaitForJobCondition(t, handMade, batchv1.JobComplete)

	// The child's own pod succeeds: the account that follows it is Accepted.
	framework.RunningPods(t, child, 1)
	framework.FinishIndexPod(t, child, 0, 0, "")
	framework.WaitFor(t, js, framework.DefaultTimeout, "JobSet Completed", func(js *jobset.JobSet) bool {
		return apimeta.IsStatusConditionTrue(js.Status.Conditions, string(jobset.JobSetCompleted))
	})
	waitAccountCondition(t, f, "follows", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	ba := waitAccount(t, f, "follows", "following the child", func(ba *v1alpha1.BatchAccount) bool { return len(ba.Status.Targets) == 1 })
	if got := ba.Status.Targets[0]; got.UID != child.UID || got.Job != "tw-w-0" || got.RestartAttempt != 0 {
		t.Errorf("follows tracks %s %s attempt %d; want the JobSet's child tw-w-0 %s attempt 0", got.Job, got.UID, got.RestartAttempt, child.UID)
	}
	if len(ba.Status.History) != 0 {
		t.Errorf("history %+v; the hand-made Job superseded nothing", ba.Status.History)
	}

	// "twice" saw the same success and the same completion: still invalid, nothing
	// covered by the shared identity, never Accepted; nor is the JobSet's Workload.
	ba = waitAccount(t, f, "twice", "the child's completion observed", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "jobset/tw/w/0")
		return tg != nil && tg.Terminal == "Complete"
	})
	if ok, got := condIs(ba.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid); !ok {
		t.Errorf("twice: %s; want Accepted False AssignmentInvalid", got)
	}
	if ba.Status.Shards.Covered != 0 {
		t.Errorf("twice covers %d shards; the shared identity covers neither", ba.Status.Shards.Covered)
	}
	wl := framework.WorkloadFor(t, js)
	waitWorkloadVerdict(t, wl, v1alpha1.WorkloadConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid)
	if everAccepted.Load() {
		t.Error("twice was Accepted at some point")
	}
}

func setLabel(l map[string]string, k, v string) map[string]string {
	if l == nil {
		l = map[string]string{}
	}
	l[k] = v
	return l
}

// watchEverAccepted watches the account until the test ends and reports whether its
// Accepted condition was ever True.
func watchEverAccepted(t *testing.T, f *framework.Framework, name string) *atomic.Bool {
	t.Helper()
	wc, err := client.NewWithWatch(framework.RESTConfig(), client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &v1alpha1.BatchAccountList{}, client.InNamespace(f.Namespace), client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	var ever atomic.Bool
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ba, ok := ev.Object.(*v1alpha1.BatchAccount); ok && apimeta.IsStatusConditionTrue(ba.Status.Conditions, v1alpha1.ConditionAccepted) {
				ever.Store(true)
			}
		}
	}()
	return &ever
}
