package controller

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// exemptRules are ClusterRole rules granted for code that is not batchledger's own:
// their users are libraries the manager runs, which this test does not drive.
var exemptRules = map[string]string{
	"events.k8s.io/events":                                         "client-go's event broadcaster writes the events the reconciler records",
	"authentication.k8s.io/tokenreviews":                           "controller-runtime's metrics filter authenticates scrapes",
	"authorization.k8s.io/subjectaccessreviews":                    "controller-runtime's metrics filter authorizes scrapes",
	"admissionregistration.k8s.io/mutatingwebhookconfigurations":   "cert-controller injects the CA (pkg/certs)",
	"admissionregistration.k8s.io/validatingwebhookconfigurations": "cert-controller injects the CA (pkg/certs)",
	"/secrets": "cert-controller keeps the webhook certificate (pkg/certs)",
}

// TestClusterRoleGrantsOnlyWhatTheCodeUses drives every code path of the manager that
// calls the API server (reconcile with result capture, scope stamping of a suspended Job
// and JobSet, Workload publishing, the status write, pod release, the short form) against
// a fake client that records each verb, and compares with the ClusterRole `make generate`
// derives from the RBAC markers: a verb granted and never used fails, as does a verb used
// and not granted.
func TestClusterRoleGrantsOnlyWhatTheCodeUses(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	resourceOf := map[string]string{"BatchAccount": "batchaccounts", "ShardResults": "shardresults", "Job": "jobs",
		"Pod": "pods", "JobSet": "jobsets", "TrainJob": "trainjobs", "Workload": "workloads", "Namespace": "namespaces"}
	recording := true // off while the test itself writes
	record := func(_ client.Client, obj runtime.Object, sub string, verbs ...string) {
		if !recording {
			return
		}
		gvk, err := apiutil.GVKForObject(obj, s)
		if err != nil {
			t.Fatal(err)
		}
		kind := strings.TrimSuffix(gvk.Kind, "List")
		resource, ok := resourceOf[kind]
		if !ok {
			t.Fatalf("the manager called the API for a %s, which this test does not know the resource of", kind)
		}
		res := gvk.Group + "/" + resource
		if sub != "" {
			res += "/" + sub
		}
		for _, v := range verbs {
			used[res+" "+v] = true
		}
	}
	funcs := interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			record(c, obj, "", "list", "watch")
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			record(c, list, "", "list", "watch")
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			record(c, obj, "", "create")
			// Under the OwnerReferencesPermissionEnforcement admission plugin a
			// blockOwnerDeletion owner reference needs update on the owner's finalizers.
			for _, ref := range obj.GetOwnerReferences() {
				if recording && ptr.Deref(ref.BlockOwnerDeletion, false) {
					gv, err := schema.ParseGroupVersion(ref.APIVersion)
					if err != nil {
						t.Fatal(err)
					}
					used[gv.Group+"/"+resourceOf[ref.Kind]+"/finalizers update"] = true
				}
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			record(c, obj, "", "update")
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			record(c, obj, "", "patch")
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			record(c, obj, "", "delete")
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			record(c, obj, sub, "update")
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			record(c, obj, sub, "patch")
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		SubResourceApply: func(_ context.Context, c client.Client, sub string, _ runtime.ApplyConfiguration, _ ...client.SubResourceApplyOption) error {
			// Server-side apply is a patch; the only object applied is a Workload's status.
			record(c, &kueue.Workload{}, sub, "patch")
			return nil
		},
	}

	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	suspended := func(j *batchv1.Job) *batchv1.Job { j.Spec.Suspend = ptr.To(true); return j }
	// j covered index 0 before Kueue suspended it again: the account has news to publish.
	j := suspended(withUID(wrappers.MakeJob("j", "ns").Indexed(2).Completed("0", 1).Obj(), "j-uid"))
	child := suspended(jobSetChild("workers", "0"))
	js := wrappers.MakeJobSet("ts", "ns").Suspend(true).ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(1).Job(child).Obj()).Obj()
	child.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(js, jobsetapi.SchemeGroupVersion.WithKind("JobSet"))}
	// A suspended TrainJob, its JobSet and that JobSet's child, as Trainer renders them.
	tj := wrappers.MakeTrainJob("llm", "ns", "torch-distributed").NumNodes(2).Suspend(true).Obj()
	tj.UID = "llm-uid"
	tjs := wrappers.MakeJobSet("llm", "ns").Suspend(true).ReplicatedJob(wrappers.MakeReplicatedJob("node").Replicas(1).Obj()).Obj()
	tjs.UID = "llm-js-uid"
	tjs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainJobGVK)}
	node := suspended(withUID(wrappers.MakeJob("llm-node-0", "ns").Indexed(2).Label(jobsetapi.JobSetNameKey, "llm").
		Label(jobsetapi.ReplicatedJobNameKey, "node").Label(jobsetapi.JobIndexKey, "0").Obj(), "llm-node-0-uid"))
	node.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(tjs, jobsetapi.SchemeGroupVersion.WithKind("JobSet"))}
	llm := wrappers.MakeBatchAccount("llm", "ns").Shards("A", "B").AssignTrainJob("llm", "node", 0, "0-1", "0-1").RequireResults("").Obj()
	// Neither j nor its Workload carries the scope label: the reconciler reads them from the
	// API server (get the Job, list the Workload by Kueue's job-uid label) and labels them.
	wl := wrappers.MakeWorkload("job-j", "ns").UID("wl-uid").ForJob(j).Label(kueueconstants.JobUIDLabel, "j-uid").Obj()
	results := wrappers.MakeBatchAccount("results", "ns").Shards("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults("").Obj()
	results.UID = "results-uid"
	train := wrappers.MakeBatchAccount("train", "ns").Shards("W").AssignJobSet("ts", "workers", 0, "0", "0").Obj()
	short := wrappers.MakeJob("sf", "ns").Indexed(1).Annotation(v1alpha1.AnnotationInputRev, "D").Annotation(v1alpha1.AnnotationModelRev, "m").Annotation(v1alpha1.AnnotationShards, "A").Obj()
	// done finished (Accepted) and its TTL passed: retention deletes it.
	done := wrappers.MakeBatchAccount("done", "ns").Generation(1).Shards("A").AssignJob("gone", "0", "A").TTLSecondsAfterFinished(0).
		Condition(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "", now).
		TargetStatus(v1alpha1.TargetStatus{Name: "gone", Terminal: "Complete", TerminalObservedAt: &metav1.Time{Time: now}}).Obj()
	done.Status.ObservedGeneration = 1
	pod0 := wrappers.MakeIndexPod(j, "j-0", 0).Succeeded(now, reportOf(t, "A")).Finalizers(v1alpha1.ResultFinalizer).Obj()
	pod1 := wrappers.MakeIndexPod(j, "j-1", 1).Succeeded(now, reportOf(t, "B")).Finalizers(v1alpha1.ResultFinalizer).Obj()

	b := fake.NewClientBuilder().WithScheme(s).WithObjects(j, child, js, wl, results, train, done, short, pod0, tj, tjs, node, llm).
		WithStatusSubresource(&v1alpha1.BatchAccount{}, &kueue.Workload{}).WithInterceptorFuncs(funcs)
	c := withIndexes(t, b).Build()
	ctx := context.Background()
	r := &Reconciler{Client: selectedCache{c}, APIReader: liveReader{Reader: c, got: func(obj client.Object) { record(c, obj, "", "get") }},
		Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return now }}
	reconcile := func(name string) {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: name}}); err != nil {
			t.Fatalf("reconcile %s: %v", name, err)
		}
	}
	// j-0 succeeded, its result not recorded yet: the releaser holds it, and reads whether
	// its namespace is being deleted.
	if _, err := (&PodReleaser{Client: c, Now: func() time.Time { return now }}).Reconcile(ctx,
		ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod0)}); err != nil {
		t.Fatal(err)
	}
	reconcile("results") // captures j-0 (chunk created), stamps j, writes status, publishes on the Workload
	reconcile("train")   // stamps the suspended JobSet's template and its child
	reconcile("llm")     // stamps the suspended TrainJob's runtime patches and its JobSet's child
	reconcile("done")    // deletes the account: its TTL after its batch finished passed
	recording = false
	if err := c.Create(ctx, pod1); err != nil {
		t.Fatal(err)
	}
	recording = true
	reconcile("results") // captures j-1 into the same chunk (update)
	if _, err := (&PodReleaser{Client: c, Now: func() time.Time { return now }}).Reconcile(ctx,
		ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod0)}); err != nil {
		t.Fatal(err)
	}
	// j-1 loses its scope label while held: the out-of-scope release reads it live.
	recording = false
	delete(pod1.Labels, v1alpha1.LabelScope)
	if err := c.Update(ctx, pod1); err != nil {
		t.Fatal(err)
	}
	recording = true
	if _, err := (&PodReleaser{Client: c, APIReader: c, Now: func() time.Time { return now }}).ReleaseOutOfScope(ctx,
		ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod1)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod1), pod1); err != nil || slices.Contains(pod1.Finalizers, v1alpha1.ResultFinalizer) {
		t.Fatalf("the pod that left the results scope was not released (%v): %v", err, pod1.Finalizers)
	}
	if _, err := (&ShortFormReconciler{Client: c, Kind: jobkind.Kind{}}).Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(short)}); err != nil {
		t.Fatal(err)
	}

	granted := map[string]bool{}
	for _, rule := range clusterRole(t).Rules {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				if _, exempt := exemptRules[g+"/"+res]; exempt {
					continue
				}
				for _, v := range rule.Verbs {
					granted[g+"/"+res+" "+v] = true
				}
			}
		}
	}
	var unused, missing []string
	for k := range granted {
		if !used[k] {
			unused = append(unused, k)
		}
	}
	for k := range used {
		if !granted[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(unused)
	sort.Strings(missing)
	if len(unused) > 0 {
		t.Errorf("the ClusterRole grants verbs no code path used: %v", unused)
	}
	if len(missing) > 0 {
		t.Errorf("code paths used verbs the ClusterRole does not grant: %v", missing)
	}
	if len(used) < 10 || !slices.Contains(keys(used), "batch/jobs patch") {
		t.Errorf("the scenario drove too little: %v", keys(used))
	}
}

// liveReader is the API server read directly (the manager's APIReader): its Get is the
// verb get, where the cache's is list and watch.
type liveReader struct {
	client.Reader
	got func(client.Object)
}

func (r liveReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.got(obj)
	return r.Reader.Get(ctx, key, obj, opts...)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// clusterRole reads the ClusterRole `make generate` writes from the RBAC markers.
func clusterRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---") {
		var cr rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &cr); err != nil {
			t.Fatal(err)
		}
		if cr.Kind == "ClusterRole" && cr.Name == "manager-role" {
			return &cr
		}
	}
	t.Fatal("no ClusterRole manager-role in config/rbac/role.yaml")
	return nil
}
