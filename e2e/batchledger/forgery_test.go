package batchledger

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
	"batchledger.dev/batchledger/pkg/worker"
)

// The ledger policy's messages (ledger-manager-only, in config/policy and the chart).
const (
	ledgerPolicySuffix   = "ledger-manager-only"
	chunkRefusal         = "only batchledger's manager records results"
	accountStatusRefusal = "only batchledger's manager writes it"
)

// impersonating is a client that acts as user (kubectl --as), authenticated, in no other
// group: its own RBAC applies.
func impersonating(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := framework.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bindInNamespace binds user, in the test's namespace, to a role (a Role of the namespace
// or a ClusterRole).
func bindInNamespace(f *framework.Framework, user, kind, role string) {
	f.Create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-" + strings.ToLower(kind)},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}})
}

// refusedByLedgerPolicy fails the test unless err is the ledger policy's refusal saying
// want.
func refusedByLedgerPolicy(t *testing.T, who, what string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s could %s", who, what)
		return
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), ledgerPolicySuffix) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %s refused with %v; want Forbidden by the %s policy saying %q", who, what, err, ledgerPolicySuffix, want)
	}
}

// TestForgedLedgerRefused: a namespace editor (a Role granting batchledger.dev's every
// resource and verb) cannot forge the ledger: creating a ShardResults chunk that carries
// the account's UID label, a controller reference to it and accepted results for both
// shards, updating, patching or deleting the chunk the manager wrote, deleting the
// namespace's chunks, and updating or patching the account's status are all refused by
// the ledger policy with its message; so is the cluster admin's forged chunk. The account
// the real workers report into reaches its real verdict (index 1's worker claims shard C,
// not its B: a rejected claim, B missing, not Accepted) and records only the real pods'
// results.
// A user bound to the built-in edit ClusterRole creates a BatchAccount and lists
// ShardResults (the aggregated roles) but may not write them. Deleting the account deletes
// its chunks (the garbage collector may). On kwok nodes the test finishes the pods; on
// real kubelets the example worker runs them.
func TestForgedLedgerRefused(t *testing.T) {
	f := framework.New(t, framework.OnAnyKubelets())
	const mallory, erin = "mallory", "erin"
	f.Create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "batchledger-everything"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"*"}}}})
	bindInNamespace(f, mallory, "Role", "batchledger-everything")
	bindInNamespace(f, erin, "ClusterRole", "edit")
	editor := impersonating(t, mallory)

	// The policy is loaded asynchronously after it is created: wait until the editor's
	// status patch of a canary account (harmless, a new value each time) is refused.
	canary := wrappers.MakeBatchAccount("canary", f.Namespace).Shards("A").AssignJob("none", "0", "A").Obj()
	f.Create(canary)
	attempt := 0
	framework.Eventually(t, framework.DefaultTimeout, "the ledger policy refuses the editor's status patch", func() (bool, string, error) {
		attempt++
		err := editor.Status().Patch(f.Ctx, canary.DeepCopy(), client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"status":{"observedGeneration":%d}}`, attempt))))
		return err != nil && strings.Contains(err.Error(), ledgerPolicySuffix), fmt.Sprint(err), nil
	})

	// The account and its Job: index 0's worker reports shard A, index 1's claims C
	// instead of its B.
	var job *batchv1.Job
	if framework.KwokNodes() {
		resultsJob(t, f, "forgery", "A", "B")
		job = jobStatus(t, f, "j")
		framework.RunningPods(t, job, 2)
	} else {
		h100Queue(f, "8")
		kindResultsAccount(t, f, "forgery", "j", "A", "B")
		job = wrappers.MakeJob("j", f.Namespace).Indexed(2).Parallelism(2).Queue("default").GPU(1).Obj()
		onKubelet(&job.Spec.Template.Spec, envVar(worker.EnvShards, "A,C"))
		f.Create(job)
	}
	ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Name: "forgery", Namespace: f.Namespace}}
	f.Get(ba)

	// forged is what a forger would write: accepted results for both shards, from pods
	// that never ran, in a chunk the manager's loader would take for the account's.
	forged := func(name string) *v1alpha1.ShardResults {
		c := &v1alpha1.ShardResults{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: name, Labels: v1alpha1.ChunkLabels(ba),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ba, v1alpha1.GroupVersion.WithKind("BatchAccount"))}},
			Account: ba.Name, AccountUID: ba.UID, FirstOrdinal: 0,
		}
		for i, shard := range []string{"A", "B"} {
			c.Results = append(c.Results, v1alpha1.RecordedResult{Ordinal: int32(i), Shard: shard, Target: "job/j", JobUID: job.UID,
				Index: int32(i), Pod: fmt.Sprintf("j-%d-forged", i), PodUID: types.UID(fmt.Sprintf("forged-%d", i)),
				InputRevision: "D", ModelRevision: "m-2026-11", Output: "s3://forged/" + shard, Digest: "sha256:forged", Records: 1000, Valid: 1000, RecordedAt: metav1.Now()})
		}
		return c
	}
	refusedByLedgerPolicy(t, "the editor", "create a forged chunk", editor.Create(f.Ctx, forged(string(ba.UID)+"-forged")), chunkRefusal)
	refusedByLedgerPolicy(t, "the cluster admin", "create a forged chunk", f.Client.Create(f.Ctx, forged(string(ba.UID)+"-forged-admin")), chunkRefusal)

	if framework.KwokNodes() {
		framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
		framework.FinishIndexPod(t, job, 1, 0, report(t, "C", "m-2026-11", "sha256:C"))
	}
	// realVerdict: A accepted, index 1's claim rejected, so the batch is not Accepted.
	realVerdict := func(ba *v1alpha1.BatchAccount) bool {
		rejected, _ := condIs(ba.Status.Conditions, v1alpha1.ConditionResultsAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultRejected)
		notAccepted, _ := condIs(ba.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionFalse, "")
		return rejected && notAccepted && ba.Status.Shards.Accepted == 1 && ba.Status.Results.Rejected == 1
	}
	ba = waitAccount(t, f, "forgery", "A accepted, index 1's claim rejected, not Accepted", realVerdict)
	_, verdict := condIs(ba.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionFalse, "")
	t.Logf("the real verdict: %s", verdict)

	var chunks v1alpha1.ShardResultsList
	if err := f.Client.List(f.Ctx, &chunks, client.InNamespace(f.Namespace), client.MatchingLabels(v1alpha1.ChunkLabels(ba))); err != nil {
		t.Fatal(err)
	}
	if len(chunks.Items) != 1 {
		t.Fatalf("%d chunks of the account, want the manager's one: %+v", len(chunks.Items), chunks.Items)
	}
	recorded := chunks.Items[0]
	pods := sets.New[types.UID]()
	for _, p := range framework.JobPods(t, job) {
		pods.Insert(p.UID)
	}
	for _, r := range recorded.Results {
		if !pods.Has(r.PodUID) {
			t.Errorf("the ledger records a result of pod %s (%s), which no pod of the Job is", r.Pod, r.PodUID)
		}
	}

	// The manager's chunk and the account's status, as the editor would rewrite them.
	// An update carries the resourceVersion read, and a conflict is answered before
	// admission: one that meets a write of the manager's is tried again on a fresh read.
	update := func(obj client.Object, change func(), write func(client.Object) error) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			f.Get(obj)
			change()
			return write(obj)
		})
	}
	changed := recorded.DeepCopy()
	refusedByLedgerPolicy(t, "the editor", "update the manager's chunk", update(changed, func() {
		for i := range changed.Results {
			changed.Results[i].ModelRevision, changed.Results[i].Shard, changed.Results[i].RejectReason = "m-2026-11", "B", ""
		}
	}, func(o client.Object) error { return editor.Update(f.Ctx, o) }), chunkRefusal)
	refusedByLedgerPolicy(t, "the editor", "patch the manager's chunk", editor.Patch(f.Ctx, recorded.DeepCopy(),
		client.RawPatch(types.MergePatchType, []byte(`{"results":[]}`))), chunkRefusal)
	refusedByLedgerPolicy(t, "the editor", "delete the manager's chunk", editor.Delete(f.Ctx, recorded.DeepCopy()), chunkRefusal)
	refusedByLedgerPolicy(t, "the editor", "delete the namespace's chunks",
		editor.DeleteAllOf(f.Ctx, &v1alpha1.ShardResults{}, client.InNamespace(f.Namespace)), chunkRefusal)
	forgedStatus := ba.DeepCopy()
	refusedByLedgerPolicy(t, "the editor", "update the account's status", update(forgedStatus, func() {
		for i := range forgedStatus.Status.Conditions {
			forgedStatus.Status.Conditions[i].Status, forgedStatus.Status.Conditions[i].Reason = metav1.ConditionTrue, v1alpha1.ReasonAccepted
		}
		forgedStatus.Status.Shards.Accepted, forgedStatus.Status.Results.Rejected = 2, 0
	}, func(o client.Object) error { return editor.Status().Update(f.Ctx, o) }), accountStatusRefusal)
	refusedByLedgerPolicy(t, "the editor", "patch the account's status", editor.Status().Patch(f.Ctx, ba.DeepCopy(),
		client.RawPatch(types.MergePatchType, []byte(`{"status":{"shards":{"accepted":2}}}`))), accountStatusRefusal)

	// Nothing the forgers tried is in the ledger or the verdict.
	var now v1alpha1.ShardResults
	if err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(&recorded), &now); err != nil {
		t.Fatalf("the manager's chunk: %v", err)
	}
	if now.ResourceVersion != recorded.ResourceVersion {
		t.Errorf("a refused write changed the manager's chunk: %+v", now.Results)
	}
	if err := f.Client.List(f.Ctx, &chunks, client.InNamespace(f.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, ch := range chunks.Items {
		if strings.Contains(ch.Name, "forged") {
			t.Errorf("the forged chunk %s exists", ch.Name)
		}
	}
	f.Get(ba)
	if !realVerdict(ba) {
		t.Errorf("the account's verdict moved: conditions %+v, shards %+v, results %+v", ba.Status.Conditions, ba.Status.Shards, ba.Status.Results)
	}

	// The built-in edit role, through the aggregated ClusterRoles (aggregation is the
	// controller manager's, so it may take a moment on a fresh cluster).
	user := impersonating(t, erin)
	framework.Eventually(t, framework.DefaultTimeout, "erin (edit) creates a BatchAccount", func() (bool, string, error) {
		err := user.Create(f.Ctx, wrappers.MakeBatchAccount("erins", f.Namespace).Shards("A").AssignJob("other", "0", "A").Obj())
		return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprint(err), nil
	})
	var listed v1alpha1.ShardResultsList
	if err := user.List(f.Ctx, &listed, client.InNamespace(f.Namespace)); err != nil || len(listed.Items) != 1 {
		t.Errorf("erin (edit) lists ShardResults: %d, %v; want the manager's chunk", len(listed.Items), err)
	}
	if err := user.Create(f.Ctx, forged(string(ba.UID)+"-forged-edit")); !apierrors.IsForbidden(err) {
		t.Errorf("erin (edit) creates a chunk: %v, want Forbidden", err)
	}
	if err := user.Delete(f.Ctx, recorded.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Errorf("erin (edit) deletes a chunk: %v, want Forbidden", err)
	}
	if err := user.Status().Update(f.Ctx, forgedStatus); !apierrors.IsForbidden(err) {
		t.Errorf("erin (edit) updates the account's status: %v, want Forbidden", err)
	}
	// Nor can she change what judged the work: turning results off would make the rejected
	// claim count for nothing (and the batch Accepted on coverage alone), remapping index 1
	// would make its claim the assigned one.
	for _, edit := range []struct{ what, patch, want string }{
		// The CRD's rules refuse these first: a rule judges only required results, and
		// one that judged results stays (without a rule the webhook refuses it).
		{"turns results off", `{"spec":{"acceptance":{"requireResults":false}}}`, "rule and resultContainer apply only with requireResults: true"},
		{"turns results off and drops the rule", `{"spec":{"acceptance":{"requireResults":false,"rule":null}}}`, "spec.acceptance.rule cannot change once results were judged"},
		// The CRD's rule refuses this one first: the rule judged results.
		{"drops the acceptance", `{"spec":{"acceptance":null}}`, "spec.acceptance"},
		{"remaps the indexes", `{"spec":{"assignments":[{"target":{"job":"j"},"indexes":"0-1","shards":["B","A"]}]}}`, "assignments are immutable once work was done"},
	} {
		err := user.Patch(f.Ctx, ba.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(edit.patch)))
		if err == nil || !strings.Contains(err.Error(), edit.want) {
			t.Errorf("erin (edit) %s: %v; want it refused saying %q", edit.what, err, edit.want)
		}
	}
	f.Get(ba)
	if !realVerdict(ba) {
		t.Errorf("the account's verdict moved after erin's edits: conditions %+v", ba.Status.Conditions)
	}

	// The account's deletion takes its chunks along: the garbage collector may delete them.
	if err := user.Delete(f.Ctx, ba); err != nil {
		t.Fatalf("erin (edit) deletes the account: %v", err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "the account's chunks deleted with it", func() (bool, string, error) {
		var left v1alpha1.ShardResultsList
		if err := f.Client.List(f.Ctx, &left, client.InNamespace(f.Namespace), client.MatchingLabels(v1alpha1.ChunkLabels(ba))); err != nil {
			return false, "", err
		}
		return len(left.Items) == 0, fmt.Sprintf("%d left", len(left.Items)), nil
	})
}

// TestForgedJobSetChildNotFollowed: a user bound to the edit role creates a Job of
// another name that carries a JobSet child's labels, a later restart attempt and a
// controller reference to the JobSet (owner references are not authenticated), and runs
// it to completion. JobSet itself takes it for its child: it counts it, completes and
// deletes its real, running child. The account does not: it keeps the real child as
// the target's identity, says it was deleted before it terminated, and covers nothing;
// the batch is not Accepted.
func TestForgedJobSetChildNotFollowed(t *testing.T) {
	f := framework.New(t)
	erin, js := forgeryJobSet(f, 1)
	f.Create(js)
	f.Create(wrappers.MakeBatchAccount("train", f.Namespace).ShardCount("s", 2).AssignJobSet("train", "workers", 0, "0-1", "0-1").Obj())
	real := childJob(t, f, "train-workers-0", "")
	framework.RunningPods(t, real, 2)
	waitAccount(t, f, "train", "the real child followed", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "jobset/train/workers/0")
		return tg != nil && tg.UID == real.UID
	})
	f.Get(js)

	forged := wrappers.MakeJob("mallory", f.Namespace).Indexed(2).Parallelism(2).JobSetChild(js, "workers", 0, 99).Obj()
	runForgedChild(t, f, erin, forged)

	ba := waitAccount(t, f, "train", "the real child deleted by its JobSet's end", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "jobset/train/workers/0")
		return tg != nil && tg.Deleted
	})
	tg := target(ba, "jobset/train/workers/0")
	if tg.UID != real.UID || tg.Job != real.Name || ba.Status.Shards.Covered != 0 {
		t.Errorf("target %s (%s), %d covered; want the real child %s (%s), nothing covered", tg.Job, tg.UID, ba.Status.Shards.Covered, real.Name, real.UID)
	}
	if ok, state := condIs(ba.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionFalse, ""); !ok {
		t.Errorf("Accepted: %s; want False", state)
	}
}

// TestForgedChildOfAReplicatedJobTheJobSetLacks: a user bound to the edit role creates
// the Job a JobSet would make as child 0 of a replicatedJob it does not have, with the
// child's labels and a controller reference to the JobSet, and runs it to completion.
// JobSet's replicatedJobs are immutable, so the JobSet never makes that child: the
// account follows none for the target and covers none of its shards, while the real
// child's completions count. (JobSet v0.11.1 counts any successful Job it controls
// towards its success policy: with two replicas, the forged one does not complete it.)
func TestForgedChildOfAReplicatedJobTheJobSetLacks(t *testing.T) {
	f := framework.New(t)
	erin, js := forgeryJobSet(f, 2)
	f.Create(wrappers.MakeBatchAccount("train", f.Namespace).ShardCount("s", 4).
		AssignJobSet("train", "workers", 0, "0-1", "0-1").AssignJobSet("train", "launcher", 0, "0-1", "2-3").Obj())
	f.Create(js)
	real := childJob(t, f, "train-workers-0", "")
	framework.RunningPods(t, real, 2)
	f.Get(js)

	forged := wrappers.MakeJob("train-launcher-0", f.Namespace).Indexed(2).Parallelism(2).JobSetChild(js, "launcher", 0, 0).Obj()
	runForgedChild(t, f, erin, forged)
	framework.Eventually(t, framework.DefaultTimeout, "the forged Job completes", func() (bool, string, error) {
		j := jobStatus(t, f, forged.Name)
		return j.Status.CompletionTime != nil, fmt.Sprintf("completed %q", j.Status.CompletedIndexes), nil
	})

	// The real child completes after the forged Job did: the account's Jobs cache shows
	// both once it shows the real child's end.
	framework.FinishIndexPod(t, real, 0, 0, "")
	framework.FinishIndexPod(t, real, 1, 0, "")
	ba := waitAccount(t, f, "train", "the real child Complete", func(ba *v1alpha1.BatchAccount) bool {
		tg := target(ba, "jobset/train/workers/0")
		return tg != nil && tg.UID == real.UID && tg.Terminal == "Complete"
	})
	if tg := target(ba, "jobset/train/launcher/0"); tg == nil || tg.UID != "" || tg.Found {
		t.Errorf("target launcher[0] %+v; want no Job followed (the JobSet has no replicatedJob launcher)", tg)
	}
	if got := ba.Status.Shards.Covered; got != 2 {
		t.Errorf("%d shards covered, want 2 (s0, s1 by the real child; s2, s3 by no child of the JobSet)", got)
	}
	if ok, state := condIs(ba.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionFalse, ""); !ok {
		t.Errorf("Accepted: %s; want False", state)
	}
}

// forgeryJobSet readies the namespace of a forged-child test: queue default, and a user
// bound to the edit role (returned). JobSet train, returned for the test to create when it
// chooses, runs replicas two-index children of replicatedJob workers.
func forgeryJobSet(f *framework.Framework, replicas int32) (string, *jobset.JobSet) {
	h100Queue(f, "8")
	const erin = "erin"
	bindInNamespace(f, erin, "ClusterRole", "edit")
	worker := wrappers.MakeJob("", "").Indexed(2).Parallelism(2).GPU(1).Obj()
	return erin, wrappers.MakeJobSet("train", f.Namespace).Queue("default").
		ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(replicas).Job(worker).Obj()).Obj()
}

// runForgedChild creates forged, a two-index Job posing as a JobSet child (its controller
// reference to the JobSet without blockOwnerDeletion, which edit may not set), as user
// (bound to edit), and runs both its index pods to success.
func runForgedChild(t *testing.T, f *framework.Framework, user string, forged *batchv1.Job) {
	t.Helper()
	forged.OwnerReferences[0].BlockOwnerDeletion = nil
	as := impersonating(t, user)
	framework.Eventually(t, framework.DefaultTimeout, user+" (edit) creates the forged child", func() (bool, string, error) {
		err := as.Create(f.Ctx, forged)
		return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprint(err), nil
	})
	framework.RunningPods(t, forged, 2)
	framework.FinishIndexPod(t, forged, 0, 0, "")
	framework.FinishIndexPod(t, forged, 1, 0, "")
}

// The index-pod policy's name (config/policy and the chart).
const indexPodPolicySuffix = "index-pod"

// TestHandMadePodResultNotRecorded: a namespace editor (the built-in edit ClusterRole)
// runs a pod of their own that claims index 1 of an accounted Job (its controller
// ownerReference, completion index and results scope) and reports a passing result for
// shard B. The policy refuses every way of marking it as the Job controller's (creating it
// with the mark, adding the mark later); the pod webhook holds it and leaves it unmarked;
// its result is never recorded and it is released at once. Nor may the editor move the
// Job's pod to another index or swap its image. The Job's own pods report A
// and a rejected B: the account is not Accepted, and records exactly their two results.
func TestHandMadePodResultNotRecorded(t *testing.T) {
	f := framework.New(t)
	const erin = "erin"
	bindInNamespace(f, erin, "ClusterRole", "edit")
	editor := impersonating(t, erin)
	resultsJob(t, f, "handmade", "A", "B")
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 2)

	// The editor's pod: the Job's pod 1 as it runs, on the same node, owned by the Job,
	// without the Job's selector labels (the Job controller does not list it).
	own := framework.RunningIndexPod(t, job, 1)
	spec := own.Spec.DeepCopy()
	spec.Volumes, spec.Containers[0].VolumeMounts = nil, nil // the ServiceAccount token: admission adds its own
	evil := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "evil", Namespace: f.Namespace,
			Labels:          map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeResults},
			Annotations:     map[string]string{batchv1.JobCompletionIndexAnnotation: "1", v1alpha1.AnnotationIndexPod: v1alpha1.IndexPodMark(job.UID, "1")},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: *spec,
	}
	evil.OwnerReferences[0].BlockOwnerDeletion = nil
	// The pod webhook takes the claimed mark off; a pod it does not see (no scope label)
	// keeps it and the policy refuses it.
	unseen := evil.DeepCopy()
	unseen.Name, unseen.Labels = "evil-unseen", nil
	framework.Eventually(t, framework.DefaultTimeout, "the index-pod policy refuses the editor's marked pod", func() (bool, string, error) {
		err := editor.Create(f.Ctx, unseen.DeepCopy())
		return err != nil && apierrors.IsForbidden(err) && strings.Contains(err.Error(), indexPodPolicySuffix), fmt.Sprint(err), nil
	})
	if err := editor.Create(f.Ctx, evil); err != nil {
		t.Fatalf("the editor's pod (with the claimed mark, which the pod webhook removes): %v", err)
	}
	if _, marked := evil.Annotations[v1alpha1.AnnotationIndexPod]; marked || !slices.Contains(evil.Finalizers, v1alpha1.ResultFinalizer) {
		t.Errorf("the editor's pod created with annotations %v and finalizers %v; want it held and unmarked", evil.Annotations, evil.Finalizers)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationIndexPod, v1alpha1.IndexPodMark(job.UID, "1"))
	if err := editor.Patch(f.Ctx, evil.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))); err == nil ||
		!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), indexPodPolicySuffix) {
		t.Errorf("the editor marked their pod as the Job controller's: %v", err)
	}
	// Nor may a pod the Job controller made be moved to another index.
	moved := fmt.Sprintf(`{"metadata":{"annotations":{%q:"0"}}}`, batchv1.JobCompletionIndexAnnotation)
	if err := editor.Patch(f.Ctx, own.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(moved))); err == nil ||
		!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), indexPodPolicySuffix) {
		t.Errorf("the editor moved the Job's pod 1 to index 0: %v", err)
	}
	// Nor may its image be swapped: the kubelet would restart the container from the
	// editor's image, whose message would be the pod's result.
	swap := fmt.Sprintf(`{"spec":{"containers":[{"name":%q,"image":"forger:1"}]}}`, own.Spec.Containers[0].Name)
	if err := editor.Patch(f.Ctx, own.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, []byte(swap))); err == nil ||
		!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), indexPodPolicySuffix) {
		t.Errorf("the editor swapped the image of the Job's pod 1: %v", err)
	}

	framework.FinishPod(t, evil, 0, report(t, "B", "m-2026-11", "sha256:forged"))
	framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
	framework.FinishIndexPod(t, job, 1, 0, report(t, "B", "stale-model", "sha256:B"))
	ba := waitAccount(t, f, "handmade", "the Job's two results recorded", func(ba *v1alpha1.BatchAccount) bool {
		return ba.Status.Results.Recorded == 2
	})
	if apimeta.IsStatusConditionTrue(ba.Status.Conditions, v1alpha1.ConditionAccepted) || ba.Status.Results.Rejected != 1 {
		t.Errorf("results %+v, Accepted %v; want index 1's own result rejected and the batch not Accepted",
			ba.Status.Results, apimeta.IsStatusConditionTrue(ba.Status.Conditions, v1alpha1.ConditionAccepted))
	}
	for _, rj := range ba.Status.Results.Rejections {
		if rj.Pod == "evil" {
			t.Errorf("the editor's pod's result was recorded: %+v", rj)
		}
	}
	framework.WaitFor(t, evil, framework.DefaultTimeout, "released, its result unrecorded", func(p *corev1.Pod) bool {
		return !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer)
	})
	if got := waitAccount(t, f, "handmade", "settled", func(*v1alpha1.BatchAccount) bool { return true }); got.Status.Results.Recorded != 2 {
		t.Errorf("%d results recorded, want the Job's own 2", got.Status.Results.Recorded)
	}
}
