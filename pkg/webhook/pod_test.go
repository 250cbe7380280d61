package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// indexPod is the pod of index 0 of Job j as the Job controller creates it: the labels of
// the Job's pod template (the scope label, if any) plus the Job controller's.
func indexPod(scope string, finalizers ...string) *corev1.Pod {
	job := wrappers.MakeJob("j", "ml-team").Indexed(1)
	if scope != "" {
		job.PodLabel(v1alpha1.LabelScope, scope)
	}
	return wrappers.MakeIndexPod(job.Obj(), "j-0-x7k2p", 0).NotByJobController().Finalizers(finalizers...).Obj()
}

func admit(t *testing.T, h admission.Handler, raw []byte) admission.Response {
	t.Helper()
	return h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "ml-team", Object: runtime.RawExtension{Raw: raw},
	}})
}

// patchOf round-trips a response's patch through JSON, as the API server reads it.
func patchOf(t *testing.T, resp admission.Response) []jsonpatch.JsonPatchOperation {
	t.Helper()
	var got []jsonpatch.JsonPatchOperation
	if len(resp.Patches) > 0 {
		b, _ := json.Marshal(resp.Patches)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// TestPodResultHolder: only pods whose Job opted in to "nothing lost" (scope results) are
// held; the decision reads the pod's metadata alone, so there is no lookup to fail.
func TestPodResultHolder(t *testing.T) {
	h := PodResultHolder{}
	unindexed := indexPod(v1alpha1.ScopeResults)
	delete(unindexed.Annotations, batchv1.JobCompletionIndexAnnotation)
	cases := map[string]struct {
		pod   *corev1.Pod
		patch []jsonpatch.JsonPatchOperation
	}{
		"pod of a Job in the results scope is held": {
			pod:   indexPod(v1alpha1.ScopeResults),
			patch: []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/metadata/finalizers", []any{v1alpha1.ResultFinalizer})},
		},
		"other finalizers are kept": {
			pod:   indexPod(v1alpha1.ScopeResults, "example.com/keep"),
			patch: []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/metadata/finalizers/-", v1alpha1.ResultFinalizer)},
		},
		"already held":                                     {pod: indexPod(v1alpha1.ScopeResults, v1alpha1.ResultFinalizer)},
		"coverage scope: counted, never held":              {pod: indexPod(v1alpha1.ScopeCoverage)},
		"no scope: a Job batchledger does not account for": {pod: indexPod("")},
		"pod without a completion index":                   {pod: unindexed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			resp := admit(t, h, raw)
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			if diff := cmp.Diff(tc.patch, patchOf(t, resp)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("metadata after spec is still read", func(t *testing.T) {
		raw := []byte(`{"spec":{"containers":[{"name":"w","image":"w"}]},"kind":"Pod","metadata":` +
			`{"labels":{"batch.kubernetes.io/job-name":"j","batchledger.dev/scope":"results"},"annotations":{"batch.kubernetes.io/job-completion-index":"1"}}}`)
		resp := admit(t, h, raw)
		if !resp.Allowed || len(resp.Patches) != 1 || resp.Patches[0].Path != "/metadata/finalizers" {
			t.Errorf("response: allowed=%v patches=%+v", resp.Allowed, resp.Patches)
		}
	})

	t.Run("a pod it cannot read is allowed unchanged, with a warning and a metric", func(t *testing.T) {
		before := testutil.ToFloat64(unclassifiedObjects.WithLabelValues(PodMutatePath))
		resp := admit(t, h, []byte(`{"metadata":`))
		if !resp.Allowed || len(resp.Patches) != 0 || len(resp.Warnings) != 1 {
			t.Errorf("response to a malformed pod: allowed=%v patches=%v warnings=%v", resp.Allowed, resp.Patches, resp.Warnings)
		}
		if got := testutil.ToFloat64(unclassifiedObjects.WithLabelValues(PodMutatePath)) - before; got != 1 {
			t.Errorf("batchledger_webhook_unclassified_total grew by %v, want 1", got)
		}
	})
}

// benchPod is an index pod as the API server sends it to the webhook: metadata first,
// then a spec and status of realistic size.
func benchPod(b *testing.B) []byte {
	b.Helper()
	p := indexPod(v1alpha1.ScopeResults)
	for i := range 8 {
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("BATCH_VAR_%d", i), Value: strings.Repeat("v", 64)})
	}
	p.Spec.Volumes = []corev1.Volume{{Name: "data"}, {Name: "token"}}
	raw, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// BenchmarkPodMetadata: reading only the metadata, against decoding the whole object
// into PartialObjectMetadata (which scans every byte).
func BenchmarkPodMetadata(b *testing.B) {
	raw := benchPod(b)
	b.Run("objectMeta", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ObjectMeta(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m metav1.PartialObjectMetadata
			if err := json.Unmarshal(raw, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
