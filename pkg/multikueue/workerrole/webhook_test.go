package workerrole

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestPodHolderNamesTheWorkload: the worker's pod webhook holds a results-scope index
// pod as the single-cluster one does and, for a pod of a dispatched Job copy, names the
// manager Workload on it; other pods it leaves as the single-cluster webhook does.
func TestPodHolderNamesTheWorkload(t *testing.T) {
	for name, tc := range map[string]struct {
		jobs         []client.Object
		pod          *corev1.Pod
		wantHeld     bool
		wantWorkload string
	}{
		"dispatched copy":          {jobs: []client.Object{copyOfJ().Obj()}, pod: wrappers.MakeIndexPod(copyOfJ().Obj(), "j-3", 3).Obj(), wantHeld: true, wantWorkload: "job-j-d41e5"},
		"Job not found":            {pod: wrappers.MakeIndexPod(copyOfJ().Obj(), "j-3", 3).Obj(), wantHeld: true},
		"not dispatched":           {jobs: []client.Object{wrappers.MakeJob("j", "ns").UID("worker-j-uid").Obj()}, pod: wrappers.MakeIndexPod(copyOfJ().Obj(), "j-3", 3).Obj(), wantHeld: true},
		"coverage scope":           {jobs: []client.Object{copyOfJ().Obj()}, pod: wrappers.MakeIndexPod(copyOfJ().PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj(), "j-3", 3).Obj()},
		"annotated already, as is": {jobs: []client.Object{copyOfJ().Obj()}, pod: wrappers.MakeIndexPod(copyOfJ().Obj(), "j-3", 3).Annotation(v1alpha1.AnnotationWorkload, "other").Obj(), wantHeld: true, wantWorkload: "other"},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(tc.jobs...).Build()
			raw, err := json.Marshal(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			resp := PodHolder{Reader: c}.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Namespace: tc.pod.Namespace, Object: runtime.RawExtension{Raw: raw},
			}})
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
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
