package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestJobTransformsKeepWhatControllersRead: the cached Jobs lose their template's pod
// spec and managed fields, and keep everything the controllers read: the template's
// labels (the opt-in scope) and annotations, its pods' termination grace period, the
// rest of the Job spec, and the status.
func TestJobTransformsKeepWhatControllersRead(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	job := func() *batchv1.Job {
		j := wrappers.MakeJob("train", "team-a").Indexed(4).Parallelism(2).BackoffLimitPerIndex(1).
			PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).PodAnnotation("a", "b").
			Container("worker", "registry.example/worker:1").Sidecar("proxy", "registry.example/proxy:1").
			GPU(1).NodeSelector("gpu-type", "h100").Completed("0-1", 2).Complete(now).Obj()
		j.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		j.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](900)
		return j
	}
	want := job()
	want.ManagedFields = nil
	want.Spec.Template.Spec = corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](900)}

	got, err := jobTransform(job())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobTransform (-want +got):\n%s", diff)
	}
}
