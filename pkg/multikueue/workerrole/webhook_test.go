package workerrole

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
	"batchledger.dev/batchledger/pkg/webhook"
)

// TestPodHolderNamesTheWorkload: the worker's pod webhook holds a results-scope index
// pod as the single-cluster one does and names the manager Workload on it only when the
// Job controller creates it for the Job copy MultiKueue made that controls it (same UID,
// prebuilt Workload name and origin label); it removes a Workload annotation the pod's
// creator wrote, whoever creates it, and refuses a pod of the Job controller whose Job it
// cannot read (the Job controller creates it again).
func TestPodHolderNamesTheWorkload(t *testing.T) {
	jobController, mallory := webhook.JobControllers[0], "mallory"
	claiming := func(job *batchv1.Job) *wrappers.PodWrapper {
		return wrappers.MakeIndexPod(job, "j-3", 3).Annotation(v1alpha1.AnnotationWorkload, "job-j-d41e5")
	}
	bare := wrappers.MakeIndexPod(copyOfJ().Obj(), "j-3", 3).Annotation(v1alpha1.AnnotationWorkload, "job-j-d41e5").NoOwner().Obj()
	for name, tc := range map[string]struct {
		jobs         []client.Object
		user         string
		pod          *corev1.Pod
		wantDenied   bool
		wantHeld     bool
		wantWorkload string
	}{
		"dispatched copy": {jobs: []client.Object{copyOfJ().Obj()}, user: jobController, pod: wrappers.MakeIndexPod(copyOfJ().Obj(), "j-3", 3).Obj(),
			wantHeld: true, wantWorkload: "job-j-d41e5"},
		"Kueue v0.18 annotation": {jobs: []client.Object{copyOfJ().Label(multikueue.PrebuiltWorkloadKey, "").Annotation(multikueue.PrebuiltWorkloadKey, "job-j-d41e5").Obj()},
			user: jobController, pod: wrappers.MakeIndexPod(copyOfJ().Obj(), "j-3", 3).Obj(), wantHeld: true, wantWorkload: "job-j-d41e5"},
		"kube-controller-manager": {jobs: []client.Object{copyOfJ().Obj()}, user: "system:kube-controller-manager", pod: wrappers.MakeIndexPod(copyOfJ().Obj(), "j-3", 3).Obj(),
			wantHeld: true, wantWorkload: "job-j-d41e5"},
		"creator's annotation replaced": {jobs: []client.Object{copyOfJ().Obj()}, user: jobController,
			pod: wrappers.MakeIndexPod(copyOfJ().Obj(), "j-3", 3).Annotation(v1alpha1.AnnotationWorkload, "other").Obj(), wantHeld: true, wantWorkload: "job-j-d41e5"},
		"Job not in the cache": {user: jobController, pod: wrappers.MakeIndexPod(copyOfJ().Obj(), "j-3", 3).Obj(), wantDenied: true},
		"not dispatched": {jobs: []client.Object{wrappers.MakeJob("j", "ns").UID("worker-j-uid").Obj()}, user: jobController,
			pod: claiming(copyOfJ().Obj()).Obj(), wantHeld: true},
		"prebuilt name without origin": {jobs: []client.Object{wrappers.MakeJob("j", "ns").UID("worker-j-uid").Label(multikueue.PrebuiltWorkloadKey, "job-j-d41e5").Obj()},
			user: jobController, pod: claiming(copyOfJ().Obj()).Obj(), wantHeld: true},
		"a later Job of the name":       {jobs: []client.Object{copyOfJ().UID("later").Obj()}, user: jobController, pod: claiming(copyOfJ().Obj()).Obj(), wantHeld: true},
		"a user's pod claiming the Job": {jobs: []client.Object{copyOfJ().Obj()}, user: mallory, pod: claiming(copyOfJ().Obj()).Obj(), wantHeld: true},
		"a user's bare pod":             {jobs: []client.Object{copyOfJ().Obj()}, user: mallory, pod: bare, wantHeld: true},
		"a user's pod, held already": {jobs: []client.Object{copyOfJ().Obj()}, user: mallory,
			pod: claiming(copyOfJ().Obj()).Finalizers(v1alpha1.ResultFinalizer).Obj(), wantHeld: true},
		"coverage scope, claimed": {jobs: []client.Object{copyOfJ().Obj()}, user: jobController,
			pod: claiming(copyOfJ().PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj()).Obj()},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(tc.jobs...).Build()
			raw, err := json.Marshal(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			resp := PodHolder{Reader: c}.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Namespace: tc.pod.Namespace, Object: runtime.RawExtension{Raw: raw},
				UserInfo: authenticationv1.UserInfo{Username: tc.user},
			}})
			if denied := !resp.Allowed; denied != tc.wantDenied {
				t.Fatalf("denied = %v (%+v), want %v", denied, resp.Result, tc.wantDenied)
			}
			if tc.wantDenied {
				return
			}
			patched := raw
			if len(resp.Patches) > 0 {
				ops, _ := json.Marshal(resp.Patches)
				p, err := jsonpatch.DecodePatch(ops)
				if err != nil {
					t.Fatal(err)
				}
				if patched, err = p.Apply(raw); err != nil {
					t.Fatalf("applying %s: %v", ops, err)
				}
			}
			var got corev1.Pod
			if err := json.Unmarshal(patched, &got); err != nil {
				t.Fatal(err)
			}
			if held := slices.Contains(got.Finalizers, v1alpha1.ResultFinalizer); held != tc.wantHeld {
				t.Errorf("held = %v, want %v", held, tc.wantHeld)
			}
			if wl := got.Annotations[v1alpha1.AnnotationWorkload]; wl != tc.wantWorkload {
				t.Errorf("workload annotation = %q, want %q", wl, tc.wantWorkload)
			}
		})
	}
}

// TestPodHolderAllowsAPodItCannotRead: the worker's pod webhook fails open as the
// single-cluster one does: a pod whose metadata it cannot decode is allowed unchanged,
// with a warning, and no Job is looked up for it.
func TestPodHolderAllowsAPodItCannotRead(t *testing.T) {
	resp := PodHolder{}.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "ns", Object: runtime.RawExtension{Raw: []byte(`{"metadata": [`)},
		UserInfo: authenticationv1.UserInfo{Username: webhook.JobControllers[0]},
	}})
	if !resp.Allowed || len(resp.Patches) != 0 || len(resp.Warnings) != 1 {
		t.Errorf("response to a malformed pod: allowed=%v patches=%v warnings=%v", resp.Allowed, resp.Patches, resp.Warnings)
	}
}
