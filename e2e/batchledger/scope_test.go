package batchledger

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
	"batchledger.dev/batchledger/pkg/webhook"
)

// The opt-in scope: batchledger touches only the pods of Jobs an account names.
// The pod webhook, which fails closed, sees only pods labelled scope=results; every other
// pod of the cluster is created as if batchledger were not installed, also while the
// manager is down; and uninstalling lets go of every pod still held.

// podWebhook is the name of the pod webhook (failurePolicy Fail) in its configuration.
const podWebhook = "mpod.batchledger.dev"

// restartTimeout bounds waits that span a manager restart: the Job controller retries a
// refused pod creation with its exponential backoff (up to a minute), so the first pods
// after the webhook is back may take longer than DefaultTimeout.
const restartTimeout = 3 * framework.DefaultTimeout

// TestControllerDownNeverBlocksUnaccountedJobs: with the manager stopped, an Indexed Job
// that no account names, queued through Kueue, creates its pods and completes; none of its
// pods is given the result finalizer and no pod creation fails on batchledger's webhook.
func TestControllerDownNeverBlocksUnaccountedJobs(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	framework.StopBatchledger(t)

	// The Job webhook cannot be reached: it fails open, so the Job is created unlabelled.
	job := wrappers.MakeJob("plain", f.Namespace).Indexed(3).Parallelism(3).Queue("default").GPU(1).Obj()
	f.Create(job)
	if scope, ok := job.Spec.Template.Labels[v1alpha1.LabelScope]; ok {
		t.Errorf("unaccounted Job created with %s=%q", v1alpha1.LabelScope, scope)
	}
	running := framework.RunningPods(t, job, 3)
	if held := heldPods(running); len(held) > 0 {
		t.Errorf("pods of an unaccounted Job were given %s: %v", v1alpha1.ResultFinalizer, held)
	}
	for i := range 3 {
		framework.FinishIndexPod(t, job, i, 0, "")
	}
	framework.WaitForJobCondition(t, job, batchv1.JobComplete)
	if job.Status.CompletedIndexes != "0-2" {
		t.Errorf("completedIndexes = %q, want 0-2", job.Status.CompletedIndexes)
	}
	pods := framework.JobPods(t, job)
	if held := heldPods(pods); len(held) > 0 {
		t.Errorf("pods held after completion: %v", held)
	}
	if got := len(pods); got != 3 {
		t.Errorf("%d pods, want exactly one per index:\n%s", got, framework.SummarizePods(pods))
	}
	for _, e := range failedCreateEvents(t, f, job) {
		if strings.Contains(e.Message, "batchledger") {
			t.Errorf("pod creation failed on batchledger: %s", e.Message)
		}
	}
}

// TestResultsBatchWaitsForControllerAndLosesNothing: a Job named by an account requiring
// results is stamped scope=results at creation. While the manager is down its pods are
// refused by the pod webhook (it fails closed for exactly these pods: an unaccounted Job
// admitted at the same moment runs); once the manager is back the pods are created held,
// succeed, every result is recorded exactly once, every pod is released and the account
// is Accepted.
func TestResultsBatchWaitsForControllerAndLosesNothing(t *testing.T) {
	f := framework.New(t)
	shards := []string{"A", "B", "C"}
	cq := h100Queue(f, "8")
	// A held LocalQueue keeps both Jobs suspended until the manager is down: on a quiet
	// machine Kueue admits a Job within milliseconds.
	f.Create(wrappers.MakeLocalQueue("held", f.Namespace).ClusterQueue(cq).StopPolicy(kueue.Hold).Obj())
	f.Create(wrappers.MakeBatchAccount("nothing-lost", f.Namespace).Shards(shards...).
		AssignJob("j", "0-2", shards...).RequireResults(seedRule).Obj())
	waitAccount(t, f, "nothing-lost", "the account observed by the controller", func(ba *v1alpha1.BatchAccount) bool {
		return len(ba.Status.Conditions) > 0
	})
	job := wrappers.MakeJob("j", f.Namespace).Indexed(3).Parallelism(3).Queue("held").GPU(1).Obj()
	f.Create(job)
	if got := job.Spec.Template.Labels[v1alpha1.LabelScope]; got != v1alpha1.ScopeResults {
		t.Fatalf("Job j created with %s=%q, want %q (the Job webhook stamps it)", v1alpha1.LabelScope, got, v1alpha1.ScopeResults)
	}

	framework.StopBatchledger(t)
	other := wrappers.MakeJob("other", f.Namespace).Indexed(1).Queue("held").GPU(1).Obj()
	f.Create(other)
	releaseQueue(t, f, "held")

	// j is admitted and the Job controller tries to create its pods: the API server cannot
	// reach the pod webhook and refuses them.
	framework.WaitFor(t, job, framework.DefaultTimeout, "admitted by Kueue (unsuspended)", func(j *batchv1.Job) bool {
		return !ptr.Deref(j.Spec.Suspend, false)
	})
	var refused corev1.Event
	framework.Eventually(t, framework.DefaultTimeout, "a FailedCreate event of Job j naming "+podWebhook, func() (bool, string, error) {
		evs := failedCreateEvents(t, f, job)
		for _, e := range evs {
			if strings.Contains(e.Message, podWebhook) {
				refused = e
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d FailedCreate events", len(evs)), nil
	})
	t.Logf("while the manager is down: %s", refused.Message)
	// The unaccounted Job admitted with it runs: the webhook fails closed for exactly the
	// pods labelled scope=results.
	otherPods := framework.RunningPods(t, other, 1)
	if held := heldPods(otherPods); len(held) > 0 {
		t.Errorf("pods of the unaccounted Job held: %v", held)
	}
	if pods := framework.JobPods(t, job); len(pods) > 0 {
		t.Fatalf("Job j has pods while the pod webhook is unreachable:\n%s", framework.SummarizePods(pods))
	}

	framework.StartBatchledger(t)
	var running []corev1.Pod
	framework.Eventually(t, restartTimeout, "3 Running pods of Job j", func() (bool, string, error) {
		pods := framework.JobPods(t, job)
		running = running[:0]
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running = append(running, p)
			}
		}
		return len(running) == 3, framework.SummarizePods(pods), nil
	})
	for _, p := range running {
		if !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			t.Errorf("pod %s created without %s: %v", p.Name, v1alpha1.ResultFinalizer, p.Finalizers)
		}
		if p.Labels[v1alpha1.LabelScope] != v1alpha1.ScopeResults {
			t.Errorf("pod %s labels %v lack %s=%s", p.Name, p.Labels, v1alpha1.LabelScope, v1alpha1.ScopeResults)
		}
	}
	for i, s := range shards {
		framework.FinishIndexPod(t, job, i, 0, report(t, s, "m-2026-11", "sha256:"+s))
	}
	waitAccountCondition(t, f, "nothing-lost", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	pods := waitReleased(t, job)
	assertRecordedOnce(t, f, "nothing-lost", job, pods, shards)
}

// TestJobBeforeAccountIsStampedWhileSuspended: a Job queued before its account exists is
// created unlabelled; the account (requiring results) comes while Kueue keeps the Job
// suspended, and the controller stamps scope=results onto its pod template, so its pods
// are held until their results are recorded. A Job already running when its account came
// cannot be stamped (Kubernetes forbids changing a started Job's template): its pods are
// never held, and since no webhook saw the Job controller create them their results do
// not count: once the Job ends they are missing, for a repair.
func TestJobBeforeAccountIsStampedWhileSuspended(t *testing.T) {
	f := framework.New(t)
	cq := h100Queue(f, "8")
	f.Create(wrappers.MakeLocalQueue("held", f.Namespace).ClusterQueue(cq).StopPolicy(kueue.Hold).Obj())

	// Stamped while suspended.
	early := wrappers.MakeJob("early", f.Namespace).Indexed(2).Parallelism(2).Queue("held").GPU(1).Obj()
	f.Create(early)
	if scope, ok := early.Spec.Template.Labels[v1alpha1.LabelScope]; ok {
		t.Fatalf("Job early created with %s=%q before any account named it", v1alpha1.LabelScope, scope)
	}
	framework.WorkloadFor(t, early)
	f.Create(wrappers.MakeBatchAccount("early", f.Namespace).Shards("A", "B").
		AssignJob("early", "0-1", "A", "B").RequireResults(seedRule).Obj())
	framework.WaitFor(t, early, framework.DefaultTimeout, "stamped scope=results", func(j *batchv1.Job) bool {
		return j.Spec.Template.Labels[v1alpha1.LabelScope] == v1alpha1.ScopeResults
	})
	if !ptr.Deref(early.Spec.Suspend, false) || early.Status.StartTime != nil {
		t.Fatalf("Job early was stamped but is not a suspended, never-started Job: suspend=%v startTime=%v",
			early.Spec.Suspend, early.Status.StartTime)
	}
	releaseQueue(t, f, "held")
	for _, p := range framework.RunningPods(t, early, 2) {
		if !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			t.Errorf("pod %s of the stamped Job is not held: %v", p.Name, p.Finalizers)
		}
	}
	for i, s := range []string{"A", "B"} {
		framework.FinishIndexPod(t, early, i, 0, report(t, s, "m-2026-11", "sha256:"+s))
	}
	waitAccountCondition(t, f, "early", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	assertRecordedOnce(t, f, "early", early, waitReleased(t, early), []string{"A", "B"})

	// Already running when its account came: never stamped, never held, and its pods were
	// not seen created by the Job controller (the pod webhooks see only scoped pods), so
	// their results do not count: once the Job ends they are missing, for a repair.
	late := wrappers.MakeJob("late", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
	f.Create(late)
	for _, p := range framework.RunningPods(t, late, 2) {
		if slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			t.Errorf("pod %s of an unaccounted Job is held", p.Name)
		}
	}
	f.Create(wrappers.MakeBatchAccount("late", f.Namespace).Shards("C", "D").
		AssignJob("late", "0-1", "C", "D").RequireResults(seedRule).Obj())
	late = jobStatus(t, f, "late")
	waitAccount(t, f, "late", "Job late observed", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/late")
		return tg != nil && tg.UID == late.UID
	})
	if got, ok := jobStatus(t, f, "late").Spec.Template.Labels[v1alpha1.LabelScope]; ok {
		t.Errorf("running Job late was stamped %s=%q", v1alpha1.LabelScope, got)
	}
	for i, s := range []string{"C", "D"} {
		framework.FinishIndexPod(t, late, i, 0, report(t, s, "m-2026-11", "sha256:"+s))
	}
	waitAccountCondition(t, f, "late", v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonMissingResult)
	pods := framework.JobPods(t, late)
	if held := heldPods(pods); len(held) > 0 {
		t.Errorf("pods of the unstamped Job were held: %v", held)
	}
	if ba := waitAccount(t, f, "late", "settled", func(*v1alpha1.BatchAccount) bool { return true }); ba.Status.Results.Recorded != 0 ||
		apimeta.IsStatusConditionTrue(ba.Status.Conditions, v1alpha1.ConditionAccepted) {
		t.Errorf("results %+v of pods batchledger did not see created; want none recorded and the batch not Accepted", ba.Status.Results)
	}
}

// TestJobAppliedWithItsAccountIsStampedAtCreation: Jobs created right after the account
// that names them, as one apply of both does, are stamped by the scope webhook at their
// creation, whether or not the cache of the replica asked has delivered the account yet:
// the Job the API server answers each create with carries scope=results on its pod
// template.
// A stamp by the controller afterwards would come too late for a Job Kueue starts at
// once, or one MultiKueue copies to a worker meanwhile.
func TestJobAppliedWithItsAccountIsStampedAtCreation(t *testing.T) {
	f := framework.New(t)
	// On kind the chart runs two replicas: the account's validation and the Job's creation
	// may reach different ones, and the replica asked about the Job reads the accounts its
	// cache has not delivered from the API server (--scope-live-reads).
	const pairs = 20
	for i := range pairs {
		name := fmt.Sprintf("applied-%d", i)
		f.Create(wrappers.MakeBatchAccount(name, f.Namespace).Shards("A").AssignJob(name, "0", "A").RequireResults(seedRule).Obj())
		job := wrappers.MakeJob(name, f.Namespace).Indexed(1).Suspend(true).Obj()
		f.Create(job)
		if got := job.Spec.Template.Labels[v1alpha1.LabelScope]; got != v1alpha1.ScopeResults {
			t.Errorf("Job %s, created right after its account: %s=%q on its pod template, want %q",
				name, v1alpha1.LabelScope, got, v1alpha1.ScopeResults)
		}
	}
}

// TestUndeliveredAccountsAsTheManager: the scope webhook's reads of the accounts a
// replica's cache has not delivered (webhook.UndeliveredAccounts, --scope-live-reads)
// work against the API server under the manager's own RBAC: asked as the manager, with a
// cache that has delivered nothing, the account stored a moment ago is found (a
// metadata-only LIST of the namespace, then a LIST by metadata.name) and gives the Job it
// names the results scope; a Job it does not name gets none.
func TestUndeliveredAccountsAsTheManager(t *testing.T) {
	f := framework.New(t)
	if framework.Cluster() == nil {
		t.Skip("impersonates the local cluster's manager identity")
	}
	f.Create(wrappers.MakeBatchAccount("stored", f.Namespace).Shards("A").AssignJob("named", "0", "A").RequireResults(seedRule).Obj())
	manager := impersonating(t, localcluster.BatchledgerIdentity.User)
	live := webhook.UndeliveredAccounts{API: manager}
	r, err := live.Over(f.Ctx, undelivered{}, f.Namespace)
	if err != nil {
		t.Fatalf("reading the undelivered accounts as the manager: %v", err)
	}
	if r == nil {
		t.Fatal("the stored account was not found undelivered")
	}
	for job, want := range map[string]string{"named": v1alpha1.ScopeResults, "unnamed": ""} {
		accounts, err := relations.AccountsNamingJob(f.Ctx, r, &metav1.ObjectMeta{Name: job, Namespace: f.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		if got := relations.AccountsScope(accounts); got != want {
			t.Errorf("Job %s: scope %q, want %q", job, got, want)
		}
	}
}

// undelivered is a replica's cache that has delivered no account yet.
type undelivered struct{ client.Reader }

func (undelivered) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// jobWebhook is the name of the Job scope webhook (failurePolicy Ignore).
const jobWebhook = "mjob.batchledger.dev"

// TestJobCreatedWhileTheWebhookFailedOpenIsFound: with the manager up, the Job scope
// webhook is taken out of the test's namespace (as a webhook failing open would leave
// it), and a Job the account already names is created there unlabelled, after the
// account's first status said it was not found: nothing of it reaches the manager's
// caches. The account looks for its unfound Job again by itself (the suite's
// --unfound-target-recheck after its creation), finds it at the API server, labels its metadata and, the Job
// being suspended, stamps its pod template.
func TestJobCreatedWhileTheWebhookFailedOpenIsFound(t *testing.T) {
	f := framework.New(t)
	if framework.Cluster() == nil {
		t.Skip("changes the local cluster's webhook configuration")
	}
	f.Create(wrappers.MakeBatchAccount("unseen", f.Namespace).Shards("A", "B").AssignJob("unseen", "0-1", "A", "B").RequireResults(seedRule).Obj())
	// Its first status written, nothing wakes the account again but its own recheck.
	waitAccount(t, f, "unseen", "Job unseen not found", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/unseen")
		return tg != nil && !tg.Found
	})
	skipNamespace(t, f, jobWebhook)
	job := wrappers.MakeJob("unseen", f.Namespace).Indexed(2).Suspend(true).Obj()
	f.Create(job)
	if scope, ok := job.Spec.Template.Labels[v1alpha1.LabelScope]; ok {
		t.Fatalf("Job unseen was stamped %s=%q at its creation: the webhook still answered", v1alpha1.LabelScope, scope)
	}
	framework.WaitFor(t, job, 2*framework.UnfoundRecheck+framework.DefaultTimeout, "labelled and stamped scope=results", func(j *batchv1.Job) bool {
		return j.Labels[v1alpha1.LabelScope] == v1alpha1.ScopeResults && j.Spec.Template.Labels[v1alpha1.LabelScope] == v1alpha1.ScopeResults
	})
	waitAccount(t, f, "unseen", "Job unseen observed", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/unseen")
		return tg != nil && tg.Found && tg.UID == job.UID
	})
}

// skipNamespace keeps the mutating webhook out of the test's namespace until the test
// ends, and waits until the API server no longer calls it there: a dry-run create of a
// Job an account names comes back unlabelled.
func skipNamespace(t *testing.T, f *framework.Framework, webhook string) {
	t.Helper()
	name := mutatingConfigurationOf(t, f, webhook)
	update := func(ctx context.Context, change func(*admissionregistrationv1.MutatingWebhook)) error {
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := f.Client.Get(ctx, client.ObjectKey{Name: name}, &mwc); err != nil {
			return err
		}
		for i := range mwc.Webhooks {
			if mwc.Webhooks[i].Name == webhook {
				change(&mwc.Webhooks[i])
			}
		}
		return f.Client.Update(ctx, &mwc)
	}
	skip := metav1.LabelSelectorRequirement{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{f.Namespace}}
	if err := update(f.Ctx, func(w *admissionregistrationv1.MutatingWebhook) {
		if w.NamespaceSelector == nil {
			w.NamespaceSelector = &metav1.LabelSelector{}
		}
		w.NamespaceSelector.MatchExpressions = append(w.NamespaceSelector.MatchExpressions, skip)
	}); err != nil {
		t.Fatalf("keeping %s out of %s: %v", webhook, f.Namespace, err)
	}
	t.Cleanup(func() {
		if err := update(context.Background(), func(w *admissionregistrationv1.MutatingWebhook) {
			w.NamespaceSelector.MatchExpressions = slices.DeleteFunc(w.NamespaceSelector.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
				return r.Key == skip.Key && slices.Equal(r.Values, skip.Values)
			})
		}); err != nil {
			t.Errorf("letting %s back into %s: %v", webhook, f.Namespace, err)
		}
	})
	f.Create(wrappers.MakeBatchAccount("probe", f.Namespace).Shards("A").AssignJob("probe", "0", "A").Obj())
	framework.Eventually(t, framework.DefaultTimeout, webhook+" no longer called in "+f.Namespace, func() (bool, string, error) {
		probe := wrappers.MakeJob("probe", f.Namespace).Indexed(1).Suspend(true).Obj()
		if err := f.Client.Create(f.Ctx, probe, client.DryRunAll); err != nil {
			return false, "", err
		}
		scope, ok := probe.Spec.Template.Labels[v1alpha1.LabelScope]
		return !ok, "a dry-run Job is still stamped " + scope, nil
	})
}

// TestUninstallReleasesHeldPods: pods held for results the stopped manager never
// recorded are let go by the uninstall hook's `batchledger release --all-namespaces
// --mutating-webhook-configuration <name>`: it deletes the pod webhook's configuration,
// no pod keeps the finalizer, and deleting the namespace completes. The webhook
// configuration is registered again afterwards for the tests that follow.
func TestUninstallReleasesHeldPods(t *testing.T) {
	f := framework.New(t)
	c := framework.Cluster()
	if c == nil {
		t.Skip("needs the local cluster: the manager is stopped and the release binary run against its kubeconfig")
	}
	mwc := mutatingConfigurationOf(t, f, podWebhook)
	bin, err := localcluster.BuildBatchledger(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	resultsJob(t, f, "uninstall", "A", "B")
	job := jobStatus(t, f, "j")
	for _, p := range framework.RunningPods(t, job, 2) {
		if !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			t.Fatalf("pod %s is not held: %v", p.Name, p.Finalizers)
		}
	}

	// Stopped before the pods succeed, so their results are never recorded.
	framework.StopBatchledger(t)
	for i, s := range []string{"A", "B"} {
		framework.FinishIndexPod(t, job, i, 0, report(t, s, "m-2026-11", "sha256:"+s))
	}
	framework.WaitForJobCondition(t, job, batchv1.JobComplete)
	pods := framework.JobPods(t, job)
	if held := heldPods(pods); len(held) != 2 {
		t.Fatalf("held pods = %v, want both succeeded pods held:\n%s", held, framework.SummarizePods(pods))
	}

	ctx, cancel := context.WithTimeout(f.Ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "release", "--all-namespaces", "--mutating-webhook-configuration", mwc,
		"--kubeconfig", c.Kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("batchledger release:\n%s", out.String())
	if err != nil {
		t.Fatalf("batchledger release: %v", err)
	}

	var all corev1.PodList
	if err := f.Client.List(f.Ctx, &all); err != nil {
		t.Fatal(err)
	}
	if held := heldPods(all.Items); len(held) > 0 {
		t.Errorf("pods still held after release: %v", held)
	}
	err = f.Client.Get(f.Ctx, client.ObjectKey{Name: mwc}, &admissionregistrationv1.MutatingWebhookConfiguration{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("MutatingWebhookConfiguration %s after release: %v, want it deleted", mwc, err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.Namespace}}
	if err := f.Client.Delete(f.Ctx, ns); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	framework.Eventually(t, restartTimeout, "namespace "+f.Namespace+" deleted", func() (bool, string, error) {
		err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(ns), ns)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, framework.StatusYAML(ns), err
	})

	// Starting the manager registers its webhook configurations again.
	framework.StartBatchledger(t)
	if got := mutatingConfigurationOf(t, f, podWebhook); got != mwc {
		t.Errorf("pod webhook registered again in %q, want %q", got, mwc)
	}
}

// heldPods names the pods carrying the result finalizer.
func heldPods(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		if slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	return out
}

// waitReleased waits until every pod of the Job has finished and none is held, and
// returns the pods.
func waitReleased(t *testing.T, job *batchv1.Job) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	framework.Eventually(t, framework.DefaultTimeout, "every pod of Job "+job.Name+" finished and released", func() (bool, string, error) {
		pods = framework.JobPods(t, job)
		for _, p := range pods {
			if p.Status.Phase != corev1.PodSucceeded || slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
				return false, framework.SummarizePods(pods), nil
			}
		}
		return true, "", nil
	})
	return pods
}

// assertRecordedOnce checks that the account's ShardResults hold exactly one accepted
// result per shard, each from the succeeded pod of the Job's index assigned that shard.
func assertRecordedOnce(t *testing.T, f *framework.Framework, name string, job *batchv1.Job, pods []corev1.Pod, shards []string) {
	t.Helper()
	var chunks v1alpha1.ShardResultsList
	if err := f.Client.List(f.Ctx, &chunks, client.InNamespace(f.Namespace), client.MatchingLabels{v1alpha1.LabelAccount: name}); err != nil {
		t.Fatal(err)
	}
	podOfIndex := map[int32]types.UID{}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded {
			podOfIndex[int32(framework.PodIndex(&p))] = p.UID
		}
	}
	seen := map[string]int{}
	for _, ch := range chunks.Items {
		for _, r := range ch.Results {
			seen[r.Shard]++
			switch {
			case r.RejectReason != "":
				t.Errorf("result of %s rejected: %s %s", r.Pod, r.RejectReason, r.RejectMessage)
			case r.JobUID != job.UID:
				t.Errorf("result of %s recorded for Job UID %s, want %s", r.Pod, r.JobUID, job.UID)
			case int(r.Index) >= len(shards) || shards[r.Index] != r.Shard:
				t.Errorf("result of %s: index %d claims shard %q", r.Pod, r.Index, r.Shard)
			case podOfIndex[r.Index] != r.PodUID:
				t.Errorf("result of index %d recorded from pod %s (%s), not the index's succeeded pod %s", r.Index, r.Pod, r.PodUID, podOfIndex[r.Index])
			}
		}
	}
	for _, s := range shards {
		if seen[s] != 1 {
			t.Errorf("shard %s recorded %d times, want exactly once (recorded: %v)", s, seen[s], seen)
		}
	}
	if len(seen) != len(shards) {
		t.Errorf("recorded shards %v, want exactly %v", seen, shards)
	}
}

// failedCreateEvents lists the FailedCreate events of a Job: the Job controller's record
// of a pod the API server refused.
func failedCreateEvents(t *testing.T, f *framework.Framework, job *batchv1.Job) []corev1.Event {
	t.Helper()
	var evs corev1.EventList
	if err := f.Client.List(f.Ctx, &evs, client.InNamespace(f.Namespace)); err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []corev1.Event
	for _, e := range evs.Items {
		if e.InvolvedObject.UID == job.UID && e.Reason == "FailedCreate" {
			out = append(out, e)
		}
	}
	return out
}

// releaseQueue lets Kueue admit the workloads of a LocalQueue created with stopPolicy Hold.
func releaseQueue(t *testing.T, f *framework.Framework, name string) {
	t.Helper()
	lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"stopPolicy":"None"}}`))
	if err := f.Client.Patch(f.Ctx, lq, patch); err != nil {
		t.Fatalf("release LocalQueue %s: %v", name, err)
	}
}

// mutatingConfigurationOf names the MutatingWebhookConfiguration holding the webhook of
// that name, as the cluster registered it (the local cluster prefixes the manager's name).
func mutatingConfigurationOf(t *testing.T, f *framework.Framework, webhook string) string {
	t.Helper()
	var list admissionregistrationv1.MutatingWebhookConfigurationList
	if err := f.Client.List(f.Ctx, &list); err != nil {
		t.Fatalf("list MutatingWebhookConfigurations: %v", err)
	}
	var names []string
	for _, c := range list.Items {
		for _, w := range c.Webhooks {
			if w.Name == webhook {
				names = append(names, c.Name)
			}
		}
	}
	if len(names) != 1 {
		t.Fatalf("webhook %s is in %d MutatingWebhookConfigurations %v, want exactly one", webhook, len(names), names)
	}
	return names[0]
}

// TestHeldPodLeavingResultsScopeIsReleased: someone removes the scope label of a running
// pod batchledger holds, which takes it out of the manager's pod cache; the manager reads
// it live, releases it with a Warning event LeftResultsScope, and keeps holding its
// sibling, whose label is intact. Without that the pod would stay Terminating with the
// finalizer once deleted. Local cluster only: an install with the held-pod-scope
// admission policy denies the label change (hack/installcheck
// TestHeldPodScopePolicyOnLocalCluster), and the local cluster runs the manager without it.
func TestHeldPodLeavingResultsScopeIsReleased(t *testing.T) {
	f := framework.New(t)
	if framework.Cluster() == nil {
		t.Skip("needs the local cluster, whose install has no held-pod-scope admission policy")
	}
	resultsJob(t, f, "relabelled", "A", "B")
	job := jobStatus(t, f, "j")
	pods := framework.RunningPods(t, job, 2)
	if held := heldPods(pods); len(held) != 2 {
		t.Fatalf("held pods = %v, want both running pods held", held)
	}
	left, kept := &pods[0], &pods[1]
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+v1alpha1.LabelScope+`":null}}}`))
	if err := f.Client.Patch(f.Ctx, left, patch); err != nil {
		t.Fatalf("remove the scope label of %s: %v", left.Name, err)
	}
	framework.WaitFor(t, left, framework.DefaultTimeout, "released after leaving the results scope", func(p *corev1.Pod) bool {
		return !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer)
	})
	framework.Eventually(t, framework.DefaultTimeout, "a Warning "+v1alpha1.EventReasonLeftResultsScope+" event on "+left.Name, func() (bool, string, error) {
		var evs corev1.EventList
		if err := f.Client.List(f.Ctx, &evs, client.InNamespace(f.Namespace)); err != nil {
			return false, "", err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.UID == left.UID && e.Reason == v1alpha1.EventReasonLeftResultsScope && e.Type == corev1.EventTypeWarning {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events in the namespace", len(evs.Items)), nil
	})
	if err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(kept), kept); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kept.Finalizers, v1alpha1.ResultFinalizer) {
		t.Errorf("pod %s, still in scope, was released too: %v", kept.Name, kept.Finalizers)
	}
}
