package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/controller"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// builderIndexer registers the controller's field indexes on a fake client builder.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// indexPod is a pod as the Job controller creates it: no namespace in the object.
func indexPod(job string, finalizers ...string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: job + "-0-",
			Labels:       map[string]string{batchv1.JobNameLabel: job, batchv1.JobCompletionIndexAnnotation: "0"},
			Annotations:  map[string]string{batchv1.JobCompletionIndexAnnotation: "0"},
			Finalizers:   finalizers,
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "w"}}},
	}
}

func TestPodResultHolder(t *testing.T) {
	const ns = "ml-team"
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	requiring := wrappers.MakeBatchAccount("ij245", ns).Shards("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults("true").Obj()
	notRequiring := wrappers.MakeBatchAccount("plain", ns).Shards("A").AssignJob("k", "0", "A").Obj()
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(requiring, notRequiring)
	if err := controller.RegisterIndexes(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	h := &PodResultHolder{Reader: b.Build()}

	unindexed := indexPod("j")
	delete(unindexed.Annotations, batchv1.JobCompletionIndexAnnotation)
	cases := map[string]struct {
		pod   *corev1.Pod
		patch []jsonpatch.JsonPatchOperation
	}{
		"pod of a Job whose account requires results is held": {
			pod:   indexPod("j"),
			patch: []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/metadata/finalizers", []any{v1alpha1.ResultFinalizer})},
		},
		"other finalizers are kept": {
			pod:   indexPod("j", "example.com/keep"),
			patch: []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/metadata/finalizers/-", v1alpha1.ResultFinalizer)},
		},
		"already held":                   {pod: indexPod("j", v1alpha1.ResultFinalizer)},
		"account not requiring results":  {pod: indexPod("k")},
		"Job no account names":           {pod: indexPod("other")},
		"pod without a completion index": {pod: unindexed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Namespace: ns, Object: runtime.RawExtension{Raw: raw},
			}})
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			// Round-trip the patch through JSON, as the API server reads it.
			var got []jsonpatch.JsonPatchOperation
			if len(resp.Patches) > 0 {
				b, _ := json.Marshal(resp.Patches)
				if err := json.Unmarshal(b, &got); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.patch, got); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("metadata after spec is still read", func(t *testing.T) {
		raw := []byte(`{"spec":{"containers":[{"name":"w","image":"w"}]},"kind":"Pod","metadata":` +
			`{"labels":{"batch.kubernetes.io/job-name":"j"},"annotations":{"batch.kubernetes.io/job-completion-index":"1"}}}`)
		resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: ns, Object: runtime.RawExtension{Raw: raw},
		}})
		if !resp.Allowed || len(resp.Patches) != 1 || resp.Patches[0].Path != "/metadata/finalizers" {
			t.Errorf("response: allowed=%v patches=%+v", resp.Allowed, resp.Patches)
		}
	})

	t.Run("malformed object is refused", func(t *testing.T) {
		resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: ns, Object: runtime.RawExtension{Raw: []byte(`{"metadata":`)},
		}})
		if resp.Allowed || resp.Result.Code != 400 {
			t.Errorf("response to a malformed pod: allowed=%v %+v", resp.Allowed, resp.Result)
		}
	})
}

// benchPod is an index pod as the API server sends it to the webhook: metadata first,
// then a spec and status of realistic size.
func benchPod(b *testing.B) []byte {
	b.Helper()
	p := indexPod("j")
	p.Namespace = "ml-team"
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
			if _, err := objectMeta(raw); err != nil {
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
