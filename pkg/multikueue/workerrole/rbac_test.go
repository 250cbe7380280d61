package workerrole

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/controller"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/release"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
	"batchledger.dev/batchledger/pkg/webhook"
)

// TestWorkerRoleGrantsOnlyWhatTheCodeUses drives every path of the worker role that calls
// the API server (the webhook reading a Job, the capture recording a pod and releasing it,
// a pod left unrecorded in a namespace being deleted, a pod that left the results scope,
// a record past its retention; the Job webhook reading a child's JobSet and TrainJob, the
// Job recorder creating and updating WorkerJobs and releasing a Job, a WorkerJob past its
// retention) against a fake client that records each verb, a read
// through the cache counting as list and watch, and compares with the ClusterRole of
// config/worker/worker_role.yaml: a verb granted and never used fails, as does a verb used
// and not granted. Events are client-go's broadcaster's, granted apart.
func TestWorkerRoleGrantsOnlyWhatTheCodeUses(t *testing.T) {
	s := scheme.Must()
	used := map[string]bool{}
	record := func(obj runtime.Object, verbs ...string) {
		gvk, err := apiutil.GVKForObject(obj, s)
		if err != nil {
			t.Fatal(err)
		}
		kind := strings.TrimSuffix(gvk.Kind, "List")
		resource := strings.ToLower(kind) + "s"
		if kind == "WorkerResult" {
			resource = "workerresults"
		}
		for _, v := range verbs {
			used[gvk.Group+"/"+resource+" "+v] = true
		}
	}
	funcs := interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			record(obj, "list", "watch")
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			record(list, "list", "watch")
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			record(obj, "create")
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			record(obj, "update")
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			record(obj, "patch")
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			record(obj, "delete")
			return c.Delete(ctx, obj, opts...)
		},
	}
	succeeded := heldPod(copyOfJ().Obj()).Succeeded(testNow.Add(-maxHold/2), "").Obj()
	deleting := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone", DeletionTimestamp: &metav1.Time{Time: testNow.Add(-maxHold)}, Finalizers: []string{"kubernetes"}}}
	// A held pod deleted before it finished, in a namespace being deleted: the release
	// rules read the Namespace.
	inGone := wrappers.MakeIndexPod(wrappers.MakeJob("k", "gone").UID("k-uid").Obj(), "k-0", 0).Finalizers(v1alpha1.ResultFinalizer).
		Annotation(v1alpha1.AnnotationWorkload, "job-k-12345").Phase(corev1.PodRunning).Deleting(testNow).Obj()
	outOfScope := heldPod(copyOfJ().Obj()).Obj()
	outOfScope.Name, outOfScope.UID = "j-5", "j-5-uid"
	outOfScope.Labels[v1alpha1.LabelScope] = "none"
	old := recordPastRetention("old-uid")
	// A dispatched TrainJob's JobSet's child that completed (its record written, then
	// released), another whose record is out of date (updated), a record past retention.
	done := child(tjJobSet(), 0).Finalizers(v1alpha1.WorkerJobFinalizer).Completed("0-3", 4).Complete(testNow).Obj()
	changed := child(copyOfJS().Obj(), 0).UID("changed-uid").Completed("0", 1).Obj()
	staleRec := multikueue.NewJobRecord(child(copyOfJS().Obj(), 0).UID("changed-uid").Obj(), multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"})
	oldJobRec := multikueue.NewJobRecord(child(copyOfJS().Obj(), 0).UID("old-job-uid").Obj(), multikueue.Dispatch{Workload: "jobset-js-f2331", JobSet: "js"})
	oldJobRec.CreationTimestamp = metav1.NewTime(testNow.Add(-2 * DefaultRetention))
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(copyOfJ().Obj(), succeeded, deleting, inGone, outOfScope, old,
		copyOfJS().Obj(), trainJobTJ(), tjJobSet(), done, changed, staleRec, oldJobRec).
		// The API server's field selector on pod names (ReleaseOutOfScope reads the pod live).
		WithIndex(&corev1.Pod{}, release.NameField, func(o client.Object) []string { return []string{o.GetName()} }).
		WithInterceptorFuncs(funcs).Build()
	now := func() time.Time { return testNow }
	capture := &Capture{Client: c, Now: now, Releaser: &controller.PodReleaser{Client: c, APIReader: c, Recorders: Recorders{c}, MaxHold: maxHold, Now: now}}
	ctx := context.Background()

	raw, _ := json.Marshal(wrappers.MakeIndexPod(copyOfJ().Obj(), "j-4", 4).Obj())
	if resp := (PodHolder{Reader: c}.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "ns",
		Object: runtime.RawExtension{Raw: raw}, UserInfo: authenticationv1.UserInfo{Username: webhook.JobControllers[0]}}})); len(resp.Patches) != 2 {
		t.Fatalf("the webhook patched %+v, want the finalizer and the Workload annotation", resp.Patches)
	}
	for _, p := range []*corev1.Pod{succeeded, inGone} {
		if _, err := capture.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := capture.Releaser.ReleaseOutOfScope(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(outOfScope)}); err != nil {
		t.Fatal(err)
	}
	if _, err := capture.Expire(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(old)}); err != nil {
		t.Fatal(err)
	}
	rawJob, _ := json.Marshal(child(tjJobSet(), 1).Obj())
	if resp := (JobHolder{Reader: c}.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "ns",
		Object: runtime.RawExtension{Raw: rawJob}}})); len(resp.Patches) != 2 {
		t.Fatalf("the Job webhook patched %+v, want the attribution and the finalizer", resp.Patches)
	}
	jobs := &JobRecorder{Client: c, MaxHold: maxHold, Now: now}
	for _, j := range []*batchv1.Job{done, changed} {
		if _, err := jobs.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(j)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := capture.ExpireJobs(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(oldJobRec)}); err != nil {
		t.Fatal(err)
	}

	granted := map[string]bool{}
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "worker", "worker_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil || role.Kind != "ClusterRole" {
			continue
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if res != "events" {
							granted[g+"/"+res+" "+v] = true
						}
					}
				}
			}
		}
	}
	for v := range used {
		if !granted[v] {
			t.Errorf("used and not granted: %s", v)
		}
	}
	for v := range granted {
		if !used[v] {
			t.Errorf("granted and never used: %s", v)
		}
	}
	if t.Failed() {
		keys := func(m map[string]bool) []string {
			var out []string
			for k := range m {
				out = append(out, k)
			}
			slices.Sort(out)
			return out
		}
		t.Logf("used %v\ngranted %v", keys(used), keys(granted))
	}
}

// recordPastRetention is a WorkerResult of pod UID uid, written long before its retention.
func recordPastRetention(uid string) *v1alpha1.WorkerResult {
	rec := multikueue.NewRecord(heldPod(copyOfJ().Obj()).UID(uid).Obj(), "job-j-d41e5", "j", 3, testNow)
	rec.CreationTimestamp = metav1.NewTime(testNow.Add(-2 * DefaultRetention))
	return rec
}
