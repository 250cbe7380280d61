package multikueue

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/result"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// config/worker's admission policies, as the worker harness names them.
const (
	recordsPolicy = "batchledger-worker-results-worker-only"
	podPolicy     = "batchledger-worker-pod-workload"
)

// TestForgedResultsOnTheWorkerRefused: a user of the worker cluster bound in the batch's
// namespace to the built-in edit ClusterRole and to a Role granting batchledger.dev's
// every resource and verb (impersonated, so that this RBAC applies) cannot forge a result
// of a Job the manager dispatched there:
//   - creating a WorkerResult for the manager's Workload, updating, patching or deleting
//     the record the worker role wrote, and deleting the namespace's records are refused
//     by the records policy with its message; so is the cluster admin's forged record;
//   - a bare pod the user creates in the batch's namespace with the results scope label,
//     a completion index and the manager Workload's batchledger.dev/workload annotation
//     is admitted without the annotation (the worker role's webhook removes it); naming
//     the Workload on it and holding it, creating a pod carrying the annotation outside
//     the results scope, and changing a real held pod's completion index are refused by
//     the pod policy; the bare pod, finished with a forged result for shard B before the
//     real one, is released unrecorded.
//
// The account's verdict is the real one: Accepted, with exactly the real pods' results.
func TestForgedResultsOnTheWorkerRefused(t *testing.T) {
	ns := "mk-forgery"
	shards := []string{"A", "B"}
	_, worker, pods := dispatchedResultsBatch(t, ns, shards)
	w := fleet.workers[worker]
	workload := pods[0].Annotations[v1alpha1.AnnotationWorkload]
	if workload == "" {
		t.Fatalf("pod %s not attributed: annotations %v", pods[0].Name, pods[0].Annotations)
	}

	const mallory = "mallory"
	create(t, w, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "batchledger-everything"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"*"}}}})
	for kind, role := range map[string]string{"Role": "batchledger-everything", "ClusterRole": "edit"} {
		create(t, w, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mallory + "-" + strings.ToLower(kind)},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: mallory}}})
	}
	cfg := rest.CopyConfig(fleet.mk.Workers[worker].RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: mallory, Groups: []string{"system:authenticated"}}
	user, err := client.New(cfg, client.Options{Scheme: scheme.Must()})
	if err != nil {
		t.Fatal(err)
	}

	// forged is a record for Workload wl of a pod that never ran, claiming shard B for
	// index 1.
	forged := func(name, wl string) *v1alpha1.WorkerResult {
		msg, _ := result.Encode(result.Report{Shard: "B", InputRevision: "D", ModelRevision: "m-2026-11", Output: "s3://forged/B", Digest: "sha256:forged", Records: 1, Valid: 1})
		pod := wrappers.MakeIndexPod(wrappers.MakeJob("j", ns).Obj(), name, 1).UID(name).Succeeded(pods[1].CreationTimestamp.Time, msg).Obj()
		return multikueue.NewRecord(pod, wl, "j", 1, pods[1].CreationTimestamp.Time)
	}
	// The policies load asynchronously: wait until the user's forged record is refused
	// by the records policy and a pod naming the Workload outside the results scope by
	// the pod policy. The canaries name another Workload: one admitted before the policy
	// loaded is no result of the account's.
	var refused error
	attempt := 0
	eventually(t, "the worker's policies refuse the user", func() (bool, string) {
		attempt++
		refused = user.Create(t.Context(), forged(fmt.Sprintf("canary-%d", attempt), "canary"))
		outOfScope := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "claims-",
			Annotations: map[string]string{v1alpha1.AnnotationWorkload: workload}}, Spec: bareSpec(&pods[0])}
		podErr := user.Create(t.Context(), outOfScope)
		return refusedBy(refused, recordsPolicy) && refusedBy(podErr, podPolicy), fmt.Sprintf("record: %v; pod: %v", refused, podErr)
	})
	wantRefused(t, "the user", "create a WorkerResult", user.Create(t.Context(), forged("forged", workload)), recordsPolicy)
	wantRefused(t, "the cluster admin", "create a WorkerResult", w.Create(t.Context(), forged("forged-admin", workload)), recordsPolicy)

	// A bare pod of the user's claiming index 1 for the manager Workload.
	msg, err := result.Encode(result.Report{Shard: "B", InputRevision: "D", ModelRevision: "m-2026-11", Output: "s3://forged/B", Digest: "sha256:forged", Records: 1, Valid: 1})
	if err != nil {
		t.Fatal(err)
	}
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "j-1-forged",
		Labels:      map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeResults, "batch.kubernetes.io/job-name": "j"},
		Annotations: map[string]string{v1alpha1.AnnotationWorkload: workload, "batch.kubernetes.io/job-completion-index": "1"}},
		Spec: bareSpec(&pods[1])}
	create(t, user, bare)
	if _, named := bare.Annotations[v1alpha1.AnnotationWorkload]; named || !slices.Contains(bare.Finalizers, v1alpha1.ResultFinalizer) {
		t.Errorf("the user's bare pod admitted with annotations %v, finalizers %v; want it held without the Workload annotation", bare.Annotations, bare.Finalizers)
	}
	// The worker role releases the unattributed pod at once; held or released, naming the
	// Workload on it and holding it (again) is refused, as is re-attributing a real pod.
	wantRefused(t, "the user", "name the Workload on the bare pod and hold it", user.Patch(t.Context(), bare.DeepCopy(), client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q},"finalizers":[%q]}}`, v1alpha1.AnnotationWorkload, workload, v1alpha1.ResultFinalizer)))), podPolicy)
	wantRefused(t, "the user", "change a held pod's completion index", user.Patch(t.Context(), pods[1].DeepCopy(), client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"batch.kubernetes.io/job-completion-index":"0"}}}`))), podPolicy)
	wantRefused(t, "the user", "name another result container of a held pod", user.Patch(t.Context(), pods[1].DeepCopy(), client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"setup"}}}`, v1alpha1.AnnotationResultContainer)))), podPolicy)
	waitFor(t, w, bare, "running", func(p *corev1.Pod) (bool, string) { return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase) })
	if err := kwok.Finish(t.Context(), w, bare, 0, msg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, w, bare, "released unrecorded", func(p *corev1.Pod) (bool, string) {
		return p.Status.Phase == corev1.PodSucceeded && !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer), fmt.Sprintf("%s %v", p.Status.Phase, p.Finalizers)
	})

	// The worker role's record of the real index 0, as the user would rewrite it.
	finishWithResults(t, worker, pods[:1], shards[:1])
	rec := &v1alpha1.WorkerResult{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: string(pods[0].UID)}}
	waitFor(t, w, rec, "recorded", func(*v1alpha1.WorkerResult) (bool, string) { return true, "" })
	changed := rec.DeepCopy()
	changed.Containers[0].Message = msg
	wantRefused(t, "the user", "update the record", user.Update(t.Context(), changed), recordsPolicy)
	wantRefused(t, "the user", "patch the record", user.Patch(t.Context(), rec.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"index":1}`))), recordsPolicy)
	wantRefused(t, "the user", "delete the record", user.Delete(t.Context(), rec.DeepCopy()), recordsPolicy)
	wantRefused(t, "the user", "delete the namespace's records", user.DeleteAllOf(t.Context(), &v1alpha1.WorkerResult{}, client.InNamespace(ns)), recordsPolicy)

	finishWithResults(t, worker, pods[1:], shards[1:])
	acct := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acct"}}
	waitFor(t, fleet.manager, acct, "Accepted", func(a *v1alpha1.BatchAccount) (bool, string) {
		return apimeta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionAccepted), summary(a)
	})
	var recs v1alpha1.WorkerResultList
	if err := w.List(t.Context(), &recs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	realPods := map[types.UID]bool{pods[0].UID: true, pods[1].UID: true}
	for _, r := range recs.Items {
		if !realPods[r.PodUID] {
			t.Errorf("record %s of pod %s (%s) on %s, which is no pod of the Job", r.Name, r.Pod, r.PodUID, worker)
		}
	}
	var chunks v1alpha1.ShardResultsList
	if err := fleet.manager.List(t.Context(), &chunks, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range chunks.Items {
		for _, r := range c.Results {
			n++
			if !realPods[r.PodUID] || r.RejectReason != "" || r.Digest == "sha256:forged" {
				t.Errorf("the manager recorded %+v; want only the real pods' accepted results", r)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d results recorded on the manager, want the 2 real ones", n)
	}
}

// bareSpec is the spec of a pod of the user's own on the node of src: src's containers,
// without the volumes the API server gives each pod.
func bareSpec(src *corev1.Pod) corev1.PodSpec {
	spec := corev1.PodSpec{NodeName: src.Spec.NodeName, Tolerations: src.Spec.Tolerations, RestartPolicy: corev1.RestartPolicyNever}
	for _, c := range src.Spec.Containers {
		spec.Containers = append(spec.Containers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	return spec
}

// refusedBy reports whether err is a Forbidden naming policy.
func refusedBy(err error, policy string) bool {
	return err != nil && apierrors.IsForbidden(err) && strings.Contains(err.Error(), policy)
}

// wantRefused fails the test unless err is policy's refusal.
func wantRefused(t *testing.T, who, what string, err error, policy string) {
	t.Helper()
	if !refusedBy(err, policy) {
		t.Errorf("%s: %s: %v; want Forbidden by %s", who, what, err, policy)
	}
}
