package batchledger

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/internal/testsupport/scrape"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// The pod releaser's promises, on the real control plane: no valid path loses a result
// (several accounts requiring results on one Job, a pod that succeeds while it is being
// deleted) or holds a namespace (one deleted mid-batch).

// heldFor is how long a test watches a pod stay held: the releaser acts within
// milliseconds of a change, so a pod it should not hold is gone from it long before.
const heldFor = 3 * time.Second

// observedAccount creates an account requiring results over shards of Job job's indexes
// 0..n-1 and waits until the controller observed it: pods created before any account
// names their Job are not held.
func observedAccount(t *testing.T, f *framework.Framework, name, job string, shards ...string) *v1alpha1.BatchAccount {
	t.Helper()
	f.Create(wrappers.MakeBatchAccount(name, f.Namespace).Shards(shards...).
		AssignJob(job, indexset.Range(0, len(shards)-1).String(), shards...).RequireResults(seedRule).Obj())
	return waitAccount(t, f, name, "observed by the controller", func(ba *v1alpha1.BatchAccount) bool { return len(ba.Status.Conditions) > 0 })
}

// recordedBy returns the pods whose results the account's own chunks record.
func recordedBy(t *testing.T, f *framework.Framework, ba *v1alpha1.BatchAccount) map[types.UID]bool {
	t.Helper()
	var chunks v1alpha1.ShardResultsList
	if err := f.Client.List(f.Ctx, &chunks, client.InNamespace(f.Namespace), client.MatchingLabels{v1alpha1.LabelAccountUID: string(ba.UID)}); err != nil {
		t.Fatal(err)
	}
	return chunkPods(chunks.Items, ba.UID)
}

// chunkPods are the pods recorded by the chunks controlled by the account of UID uid.
func chunkPods(chunks []v1alpha1.ShardResults, uid types.UID) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, c := range chunks {
		if owner := metav1.GetControllerOf(&c); owner == nil || owner.UID != uid {
			continue
		}
		for _, r := range c.Results {
			out[r.PodUID] = true
		}
	}
	return out
}

// waitRecorded waits until the account's chunks record every one of pods.
func waitRecorded(t *testing.T, f *framework.Framework, ba *v1alpha1.BatchAccount, pods ...*corev1.Pod) {
	t.Helper()
	framework.Eventually(t, framework.DefaultTimeout, fmt.Sprintf("account %s records %d results", ba.Name, len(pods)), func() (bool, string, error) {
		rec := recordedBy(t, f, ba)
		for _, p := range pods {
			if !rec[p.UID] {
				return false, p.Name + " not recorded", nil
			}
		}
		return true, "", nil
	})
}

// stillHeld checks for d that each pod still exists and carries the result finalizer.
func stillHeld(t *testing.T, f *framework.Framework, d time.Duration, why string, pods ...*corev1.Pod) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(framework.PollInterval) {
		for _, p := range pods {
			var got corev1.Pod
			if err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(p), &got); err != nil {
				t.Fatalf("pod %s: %v; want it held (%s)", p.Name, err, why)
			}
			if !slices.Contains(got.Finalizers, v1alpha1.ResultFinalizer) {
				t.Fatalf("pod %s released (phase %s, finalizers %v); want it held: %s", p.Name, got.Status.Phase, got.Finalizers, why)
			}
		}
	}
}

// exitWhileTerminating plays the kubelet for a pod kwok leaves alone (UnmanagedAnnotation)
// that keeps running after its deletion: its container exits 0 with message as its
// termination message within the grace period, and the kubelet writes the terminated
// container status and phase Succeeded, as for any pod that exits.
func exitWhileTerminating(t *testing.T, f *framework.Framework, pod *corev1.Pod, message string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var p corev1.Pod
		if err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
			return err
		}
		now := metav1.Now()
		names := make([]string, 0, len(p.Spec.Containers))
		for _, c := range p.Spec.Containers {
			names = append(names, c.Name)
		}
		sort.Strings(names) // a kubelet lists container statuses by name
		var statuses []corev1.ContainerStatus
		for _, name := range names {
			started := now
			image := ""
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == name {
					image = cs.Image
					if cs.State.Running != nil {
						started = cs.State.Running.StartedAt
					}
				}
			}
			statuses = append(statuses, corev1.ContainerStatus{Name: name, Image: image, State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: message, StartedAt: started, FinishedAt: now},
			}})
		}
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = statuses
		for i := range p.Status.Conditions {
			if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				c.Status, c.Reason, c.LastTransitionTime = corev1.ConditionFalse, "PodCompleted", now
			}
		}
		return f.Client.Status().Update(f.Ctx, &p)
	})
	if err != nil {
		t.Fatalf("pod %s: write its success as the kubelet would: %v", pod.Name, err)
	}
}

// TestTwoResultsAccountsOnOneJob: two accounts require results on the same Job; each
// records every result in its own chunks, and no pod is released before both have. The
// API server refuses the second account's chunk writes for a while (an admission policy
// the test adds, as an outage of that account's writes would): meanwhile the first
// account has recorded everything, and the pods must stay held for the second. Once the
// refusal ends the second records, and only then do the pods go.
func TestTwoResultsAccountsOnOneJob(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	first := observedAccount(t, f, "first", "j", "A", "B")
	second := observedAccount(t, f, "second", "j", "A", "B")
	refuseChunksOf(t, f, second)

	f.Create(wrappers.MakeJob("j", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj())
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 2)
	pods := []*corev1.Pod{
		framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A")),
		framework.FinishIndexPod(t, job, 1, 0, report(t, "B", "m-2026-11", "sha256:B")),
	}
	waitRecorded(t, f, first, pods...)
	if rec := recordedBy(t, f, second); len(rec) != 0 {
		t.Fatalf("the second account recorded %v while its chunk writes were refused", rec)
	}
	stillHeld(t, f, heldFor, "only the first account recorded its result", pods...)

	allowChunksOf(t, f, second)
	waitRecorded(t, f, second, pods...)
	waitReleased(t, job)
	for _, name := range []string{"first", "second"} {
		ba := waitAccount(t, f, name, "2 accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 2 })
		if ba.Status.Results.Rejected != 0 {
			t.Errorf("account %s rejected results: %+v", name, ba.Status.Results)
		}
	}
}

// refusalName names the admission policy and binding refuseChunksOf adds for ba.
func refusalName(ba *v1alpha1.BatchAccount) string { return "e2e-refuse-chunks-" + string(ba.UID) }

// refuseChunksOf makes the API server refuse every write of ba's chunks, and waits until
// it does (a policy takes effect once the API server has loaded it).
func refuseChunksOf(t *testing.T, f *framework.Framework, ba *v1alpha1.BatchAccount) {
	t.Helper()
	name := refusalName(ba)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{"*"}, Resources: []string{"shardresults"}},
				}}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "of-the-account",
				Expression: fmt.Sprintf("object.metadata.?labels[?%q].orValue(\"\") == %q", v1alpha1.LabelAccountUID, ba.UID)}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: name + ": the test refuses this account's chunks for now"}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	for _, obj := range []client.Object{policy, binding} {
		if err := f.Client.Create(f.Ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Client.Delete(context.Background(), obj) })
	}
	probe := &v1alpha1.ShardResults{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: f.Namespace,
		Labels: map[string]string{v1alpha1.LabelAccountUID: string(ba.UID)}}, Account: ba.Name}
	// Asked as the manager, whose chunk writes only this refusal stops.
	manager := impersonating(t, localcluster.BatchledgerIdentity.User)
	framework.Eventually(t, framework.DefaultTimeout, "the refusal in force", func() (bool, string, error) {
		err := manager.Create(f.Ctx, probe.DeepCopy(), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), name) {
			return true, "", nil
		}
		return false, fmt.Sprintf("a dry-run create answered %v", err), nil
	})
}

// allowChunksOf removes refuseChunksOf's refusal.
func allowChunksOf(t *testing.T, f *framework.Framework, ba *v1alpha1.BatchAccount) {
	t.Helper()
	name := refusalName(ba)
	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}},
	} {
		if err := f.Client.Delete(f.Ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPodSucceedsWhileTerminating: a running held pod is deleted, keeps running through
// its graceful termination (a worker told to stop checkpoints and exits), and exits 0
// with its result; the Job controller counts it (podReplacementPolicy: Failed, so no
// replacement runs meanwhile). The pod stays held while it terminates, its result is
// recorded, and only then does it go.
func TestPodSucceedsWhileTerminating(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	observedAccount(t, f, "graceful", "j", "A", "B")
	j := wrappers.MakeJob("j", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
	j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	f.Create(j)
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 2)
	pod := framework.RunningIndexPod(t, job, 0)

	// The kubelet's part from here on is the test's: kwok would kill the pod at once.
	if err := f.Client.Patch(f.Ctx, pod, client.RawPatch(types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, kwok.UnmanagedAnnotation))); err != nil {
		t.Fatal(err)
	}
	if err := f.Client.Delete(f.Ctx, pod, client.GracePeriodSeconds(120)); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, pod, framework.DefaultTimeout, "being deleted", func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
	stillHeld(t, f, heldFor, "it is still running, and may yet succeed", pod)

	exitWhileTerminating(t, f, pod, report(t, "A", "m-2026-11", "sha256:A"))
	framework.WaitForAbsent(t, pod)
	ba := waitAccount(t, f, "graceful", "shard A accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 1 })
	if !recordedBy(t, f, ba)[pod.UID] {
		t.Errorf("the pod that succeeded while terminating is gone, its result unrecorded")
	}
	framework.WaitFor(t, job, framework.DefaultTimeout, "index 0 counted succeeded", func(j *batchv1.Job) bool {
		return j.Status.CompletedIndexes == "0"
	})

	framework.FinishIndexPod(t, job, 1, 0, report(t, "B", "m-2026-11", "sha256:B"))
	waitAccountCondition(t, f, "graceful", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
}

// chunkWatch keeps the last state of each ShardResults of a namespace, deleted ones too.
type chunkWatch struct {
	mu     sync.Mutex
	chunks map[string]v1alpha1.ShardResults
}

func watchChunks(t *testing.T, namespace string) *chunkWatch {
	t.Helper()
	wc, err := client.NewWithWatch(framework.RESTConfig(), client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &v1alpha1.ShardResultsList{}, client.InNamespace(namespace))
	if err != nil {
		t.Fatal(err)
	}
	cw := &chunkWatch{chunks: map[string]v1alpha1.ShardResults{}}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if c, ok := ev.Object.(*v1alpha1.ShardResults); ok && ev.Type != watch.Bookmark && ev.Type != watch.Error {
				cw.mu.Lock()
				cw.chunks[c.Name] = *c
				cw.mu.Unlock()
			}
		}
	}()
	return cw
}

func (cw *chunkWatch) recordedBy(uid types.UID) map[types.UID]bool {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	var all []v1alpha1.ShardResults
	for _, c := range cw.chunks {
		all = append(all, c)
	}
	return chunkPods(all, uid)
}

// TestNamespaceDeletedMidBatch: a namespace is deleted mid-batch with two accounts
// requiring results: "early" recorded a result already (its chunk exists), "late" none.
// While the controller is down, a pod of each succeeds and the namespace's deletion
// begins (the namespace controller deletes the pods first: the running ones are killed,
// the held ones stay). Once the controller is back, the result that fits an existing
// chunk is recorded, the one that needs a new chunk (refused in a terminating namespace)
// is released unrecorded, and the namespace is gone within 30 s.
func TestNamespaceDeletedMidBatch(t *testing.T) {
	f := framework.New(t)
	h100Queue(f, "8")
	early := observedAccount(t, f, "early", "a", "A", "B")
	late := observedAccount(t, f, "late", "b", "C", "D")
	for _, name := range []string{"a", "b"} {
		f.Create(wrappers.MakeJob(name, f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj())
	}
	a, b := jobStatus(t, f, "a"), jobStatus(t, f, "b")
	framework.RunningPods(t, a, 2)
	framework.RunningPods(t, b, 2)
	a0 := framework.FinishIndexPod(t, a, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
	waitRecorded(t, f, early, a0)

	framework.StopBatchledger(t)
	a1 := framework.FinishIndexPod(t, a, 1, 0, report(t, "B", "m-2026-11", "sha256:B"))
	b0 := framework.FinishIndexPod(t, b, 0, 0, report(t, "C", "m-2026-11", "sha256:C"))
	chunks := watchChunks(t, f.Namespace)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.Namespace}}
	if err := f.Client.Delete(f.Ctx, ns); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "every pod ended, the held ones still there", func() (bool, string, error) {
		var pods corev1.PodList
		if err := f.Client.List(f.Ctx, &pods, client.InNamespace(f.Namespace)); err != nil {
			return false, "", err
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return false, framework.SummarizePods(pods.Items), nil
			}
		}
		for _, held := range []*corev1.Pod{a1, b0} {
			if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.UID == held.UID }) {
				t.Fatalf("pod %s is gone while the controller is down", held.Name)
			}
		}
		return true, "", nil
	})

	framework.StartBatchledger(t)
	started := time.Now()
	framework.Eventually(t, 30*time.Second, "namespace "+f.Namespace+" gone", func() (bool, string, error) {
		err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(ns), ns)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		var pods corev1.PodList
		if err := f.Client.List(f.Ctx, &pods, client.InNamespace(f.Namespace)); err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("phase %s, conditions %v\n%s", ns.Status.Phase, ns.Status.Conditions, framework.SummarizePods(pods.Items)), nil
	})
	t.Logf("namespace gone %s after the controller started again", time.Since(started).Round(100*time.Millisecond))

	if rec := chunks.recordedBy(early.UID); !rec[a0.UID] || !rec[a1.UID] {
		t.Errorf("account early recorded %v, want %s and %s: a result that fits an existing chunk is recorded", rec, a0.Name, a1.Name)
	}
	if rec := chunks.recordedBy(late.UID); len(rec) != 0 {
		t.Errorf("account late recorded %v in a namespace being deleted", rec)
	}
	// The counter started with the controller; other tests' namespaces may add to it.
	if n := framework.ScrapeManager(t, localcluster.BatchledgerName).Value(scrape.NamespaceReleasesTotal); n < 1 {
		t.Errorf("%s = %v; want %s counted", scrape.NamespaceReleasesTotal, n, b0.Name)
	}
}
