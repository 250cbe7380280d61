package batchledger

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestShortFormJob: annotations on a queued Job make the controller create the account,
// not owned by the Job, and follow it like any other; deleting the Job afterwards keeps
// the account, its record and its verdict.
func TestShortFormJob(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	job := wrappers.MakeJob("short", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).
		Annotation(v1alpha1.AnnotationInputRev, "D").Annotation(v1alpha1.AnnotationModelRev, "m-2026-11").
		Annotation(v1alpha1.AnnotationShards, "A,B").Obj()
	f.Create(job)
	ba := waitAccount(t, f, "short", "the account created from the annotations", func(ba *v1alpha1.BatchAccount) bool {
		return len(ba.Status.Targets) == 1 && ba.Status.Targets[0].Found
	})
	if len(ba.OwnerReferences) != 0 || ba.Labels[v1alpha1.LabelShortFormOf] != "Job" {
		t.Errorf("account owners = %+v, labels %v; want no owner (the ledger outlives its Job) and the short-form label", ba.OwnerReferences, ba.Labels)
	}
	if len(ba.Spec.Assignments) != 1 || ba.Spec.Assignments[0].Indexes != "0,1" || ba.Spec.Assignments[0].ShardOrdinals != "0,1" {
		t.Errorf("assignments = %+v", ba.Spec.Assignments)
	}
	framework.RunningPods(t, job, 2)
	framework.FinishIndexPod(t, job, 0, 0, "")
	framework.FinishIndexPod(t, job, 1, 0, "")
	waitAccountCondition(t, f, "short", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)

	deleteJobAndWait(t, f, job)
	ba = waitAccount(t, f, "short", "the deleted Job's record", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/short")
		return tg != nil && tg.Deleted
	})
	if ok, state := condIs(ba.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted); !ok || ba.Status.Shards.Covered != 2 {
		t.Errorf("after the Job was deleted: %s, %d/2 covered", state, ba.Status.Shards.Covered)
	}
}

// TestShortFormJobRunAgainIsAccountedOnceItsOldAccountIsDeleted: a short-form Job run
// again under its name after its account was Accepted is not accounted by that account
// (a Warning ShortFormAlreadyAccepted says so); deleting the old account creates the
// account anew for the new run at once, not at the Job's next change, and the new run
// reaches its own verdict.
func TestShortFormJobRunAgainIsAccountedOnceItsOldAccountIsDeleted(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	shortJob := func() *batchv1.Job {
		return wrappers.MakeJob("again", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).
			AnnotationPairs(v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m-2026-11",
				v1alpha1.AnnotationShards, "A,B").Obj()
	}
	first := shortJob()
	f.Create(first)
	framework.RunningPods(t, first, 2)
	framework.FinishIndexPod(t, first, 0, 0, "")
	framework.FinishIndexPod(t, first, 1, 0, "")
	waitAccountCondition(t, f, "again", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	deleteJobAndWait(t, f, first)

	rerun := shortJob()
	f.Create(rerun)
	framework.Eventually(t, framework.DefaultTimeout, "a Warning "+v1alpha1.EventReasonShortFormAlreadyAccepted+" on the re-run", func() (bool, string, error) {
		var evs eventsv1.EventList
		if err := f.Client.List(f.Ctx, &evs, client.InNamespace(f.Namespace)); err != nil {
			return false, "", err
		}
		for _, e := range evs.Items {
			if e.Regarding.UID == rerun.UID && e.Reason == v1alpha1.EventReasonShortFormAlreadyAccepted {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events in the namespace", len(evs.Items)), nil
	})
	old := &v1alpha1.BatchAccount{}
	if err := f.Client.Get(f.Ctx, client.ObjectKey{Namespace: f.Namespace, Name: "again"}, old); err != nil {
		t.Fatal(err)
	}
	if tg := target(old, "job/again"); tg == nil || tg.UID != first.UID {
		t.Fatalf("the Accepted account's record = %+v; want the first run's UID %s", tg, first.UID)
	}
	if err := f.Client.Delete(f.Ctx, old); err != nil {
		t.Fatal(err)
	}
	ba := waitAccount(t, f, "again", "an account created anew, following the re-run", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/again")
		return ba.UID != old.UID && tg != nil && tg.Found && tg.UID == rerun.UID
	})
	if ba.Labels[v1alpha1.LabelShortFormOf] != "Job" {
		t.Errorf("account labels %v; want the short form's", ba.Labels)
	}
	framework.RunningPods(t, rerun, 2)
	framework.FinishIndexPod(t, rerun, 0, 0, "")
	framework.FinishIndexPod(t, rerun, 1, 0, "")
	waitAccountCondition(t, f, "again", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
}

// TestShortFormJobCreatedWhileTheWebhookFailedOpenIsAccounted: a short-form Job created
// while the Job scope webhook does not answer (taken out of the test's namespace, as a
// webhook failing open would leave it) has no scope label, so nothing of it reaches the
// manager's caches and no account would ever be created. The leader's short-form sweep
// (the suite's --short-form-sweep-interval) finds it at the API server and labels it; its
// account is created and, the Job being suspended, its pod template stamped for results.
func TestShortFormJobCreatedWhileTheWebhookFailedOpenIsAccounted(t *testing.T) {
	f := framework.New(t)
	if framework.Cluster() == nil {
		t.Skip("changes the local cluster's webhook configuration")
	}
	skipNamespace(t, f, jobWebhook)
	job := wrappers.MakeJob("unseen", f.Namespace).Indexed(2).Suspend(true).
		AnnotationPairs(v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m-2026-11",
			v1alpha1.AnnotationShards, "A,B", v1alpha1.AnnotationRequire, "true").Obj()
	f.Create(job)
	if scope, ok := job.Labels[v1alpha1.LabelScope]; ok {
		t.Fatalf("Job unseen was labelled %s=%q at its creation: the webhook still answered", v1alpha1.LabelScope, scope)
	}
	framework.WaitFor(t, job, 2*framework.ShortFormSweep+framework.DefaultTimeout, "labelled and stamped scope=results", func(j *batchv1.Job) bool {
		return j.Labels[v1alpha1.LabelScope] == v1alpha1.ScopeResults && j.Spec.Template.Labels[v1alpha1.LabelScope] == v1alpha1.ScopeResults
	})
	ba := waitAccount(t, f, "unseen", "the account the short form declares, observing its Job", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/unseen")
		return tg != nil && tg.Found && tg.UID == job.UID
	})
	if ba.Labels[v1alpha1.LabelShortFormOf] != "Job" || !ba.Spec.RequiresResults() {
		t.Errorf("account labels %v, requires results %t; want the short form's account, requiring results", ba.Labels, ba.Spec.RequiresResults())
	}
}

// TestShortFormJobThatDoesNotParse: the Job's author is warned at its creation that its
// short form declares no account (kubectl prints the warning), and the Job runs
// unaccounted; once the annotation is fixed, the sweep labels the Job and its account is
// created.
func TestShortFormJobThatDoesNotParse(t *testing.T) {
	f := framework.New(t)
	var warnings warningRecorder
	cfg := framework.RESTConfig()
	cfg.WarningHandler = &warnings
	c, err := client.New(cfg, client.Options{Scheme: f.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// No model revision: the short form does not parse.
	job := wrappers.MakeJob("typo", f.Namespace).Indexed(2).Suspend(true).
		AnnotationPairs(v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationShards, "A,B").Obj()
	if err := c.Create(f.Ctx, job); err != nil {
		t.Fatal(err)
	}
	got := warnings.all()
	if !slices.ContainsFunc(got, func(w string) bool {
		return strings.Contains(w, "declare no BatchAccount") && strings.Contains(w, v1alpha1.AnnotationModelRev)
	}) {
		t.Errorf("warnings at creation %q; want one that the short form declares no BatchAccount, naming %s", got, v1alpha1.AnnotationModelRev)
	}
	if scope, ok := job.Labels[v1alpha1.LabelScope]; ok {
		t.Fatalf("a Job whose short form does not parse was labelled %s=%q", v1alpha1.LabelScope, scope)
	}

	patch := client.MergeFrom(job.DeepCopy())
	job.Annotations[v1alpha1.AnnotationModelRev] = "m-2026-11"
	if err := f.Client.Patch(f.Ctx, job, patch); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, job, 2*framework.ShortFormSweep+framework.DefaultTimeout, "labelled scope=coverage", func(j *batchv1.Job) bool {
		return j.Labels[v1alpha1.LabelScope] == v1alpha1.ScopeCoverage
	})
	waitAccount(t, f, "typo", "the account of the fixed short form, observing its Job", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "job/typo")
		return tg != nil && tg.Found && tg.UID == job.UID
	})
}

// warningRecorder keeps the warnings the API server returned to a client.
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

// HandleWarningHeader records one warning.
func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}
