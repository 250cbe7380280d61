package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// specOps are the operations of ops on the object's spec (the scope label of its
// templates), without those on its own metadata (its scope label, the record finalizer).
func specOps(ops []jsonpatch.JsonPatchOperation) []jsonpatch.JsonPatchOperation {
	var out []jsonpatch.JsonPatchOperation
	for _, op := range ops {
		if strings.HasPrefix(op.Path, "/spec/") {
			out = append(out, op)
		}
	}
	return out
}

// finalizerOps are the record finalizer's operations of ops.
func finalizerOps(ops []jsonpatch.JsonPatchOperation) []jsonpatch.JsonPatchOperation {
	var out []jsonpatch.JsonPatchOperation
	for _, op := range ops {
		if strings.HasPrefix(op.Path, "/metadata/finalizers") {
			out = append(out, op)
		}
	}
	return out
}

// TestScopeStamperHoldsNamedJobs: a new Job that an account names (a JobSet child by its
// labels) or whose short form parses gets the record finalizer, after its own; a Job no
// account names, and one whose short form does not parse, do not.
func TestScopeStamperHoldsNamedJobs(t *testing.T) {
	const ns = "ml-team"
	named := wrappers.MakeBatchAccount("counts", ns).Shards("A").AssignJob("j", "0", "A").Obj()
	child := wrappers.MakeBatchAccount("train", ns).Shards("A").AssignJobSet("ts", "workers", 0, "0", "A").Obj()
	h := ScopeStamper{Reader: indexedReader(t, nil, named, child)}
	job := func(name string, finalizers ...string) *batchv1.Job {
		return &batchv1.Job{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: finalizers},
		}
	}
	add := func(path string, v any) []jsonpatch.JsonPatchOperation { return scopeOp(path, v) }
	cases := map[string]struct {
		job  *batchv1.Job
		want []jsonpatch.JsonPatchOperation
	}{
		"named, no finalizers": {job: job("j"), want: add("/metadata/finalizers", []any{v1alpha1.RecordFinalizer})},
		"named, with another's finalizer: ours after it": {
			job: job("j", "example.com/keep"), want: add("/metadata/finalizers/-", v1alpha1.RecordFinalizer),
		},
		"named, already held": {job: job("j", v1alpha1.RecordFinalizer)},
		"named, its scope already stamped: held all the same": {
			job: func() *batchv1.Job {
				j := job("j")
				j.Spec.Template.Labels = map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeCoverage}
				return j
			}(),
			want: add("/metadata/finalizers", []any{v1alpha1.RecordFinalizer}),
		},
		"the JobSet child an account names (its template stamped by the JobSet webhook)": {
			job: func() *batchv1.Job {
				j := job("ts-workers-0")
				j.Labels = map[string]string{jobsetapi.JobSetNameKey: "ts", jobsetapi.ReplicatedJobNameKey: "workers", jobsetapi.JobIndexKey: "0"}
				// The JobSet controller creates its children with their controller reference.
				j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "ts", UID: "ts-uid", Controller: ptr.To(true)}}
				j.Spec.Template.Labels = map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeCoverage}
				return j
			}(),
			want: add("/metadata/finalizers", []any{v1alpha1.RecordFinalizer}),
		},
		"a short form that parses": {
			job: func() *batchv1.Job {
				j := job("sf")
				j.Annotations = map[string]string{v1alpha1.AnnotationInputRev: "D", v1alpha1.AnnotationModelRev: "m", v1alpha1.AnnotationShards: "A"}
				return j
			}(),
			want: add("/metadata/finalizers", []any{v1alpha1.RecordFinalizer}),
		},
		"a short form that does not parse": {
			job: func() *batchv1.Job {
				j := job("sf")
				j.Annotations = map[string]string{v1alpha1.AnnotationInputRev: "D", v1alpha1.AnnotationShards: "A"}
				return j
			}(),
		},
		"no account names it": {job: job("other")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(tc.job)
			if err != nil {
				t.Fatal(err)
			}
			resp := admit(t, admission.HandlerFunc(h.handleJob), raw)
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			if diff := cmp.Diff(tc.want, finalizerOps(patchOf(t, resp))); diff != "" {
				t.Errorf("finalizer patch (-want +got):\n%s", diff)
			}
		})
	}
}
