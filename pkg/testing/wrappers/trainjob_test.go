package wrappers

import (
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestTrainJobReferencesClusterRuntimeWithNodesQueueAndResources(t *testing.T) {
	tj := MakeTrainJob("llm", "ml", "torch-distributed").
		NumNodes(3).
		Queue("default").
		GPU(8).
		Request(corev1.ResourceCPU, "16").
		Suspend(true).
		Obj()

	ref := tj.Spec.RuntimeRef
	if ref.Name != "torch-distributed" || ptr.Deref(ref.APIGroup, "") != "trainer.kubeflow.org" ||
		ptr.Deref(ref.Kind, "") != trainer.ClusterTrainingRuntimeKind {
		t.Errorf("runtimeRef = %s %v %v, want ClusterTrainingRuntime torch-distributed", ref.Name, ptr.Deref(ref.APIGroup, ""), ptr.Deref(ref.Kind, ""))
	}
	if got := ptr.Deref(tj.Spec.Trainer.NumNodes, 0); got != 3 {
		t.Errorf("numNodes = %d, want 3", got)
	}
	if got := tj.Labels[QueueLabel]; got != "default" {
		t.Errorf("queue label = %q, want default", got)
	}
	res := tj.Spec.Trainer.ResourcesPerNode
	for name, want := range map[string]struct {
		list corev1.ResourceList
		key  corev1.ResourceName
		q    string
	}{
		"gpu request": {res.Requests, GPU, "8"},
		"gpu limit":   {res.Limits, GPU, "8"},
		"cpu request": {res.Requests, corev1.ResourceCPU, "16"},
	} {
		got := want.list[want.key]
		if got.Cmp(resource.MustParse(want.q)) != 0 {
			t.Errorf("%s = %s, want %s", name, got.String(), want.q)
		}
	}
	if _, ok := res.Limits[corev1.ResourceCPU]; ok {
		t.Error("cpu limit set, want only a request")
	}
	if !ptr.Deref(tj.Spec.Suspend, false) {
		t.Error("suspend not set")
	}
}

func TestMakeTrainJobRunsOneNodeUntilTold(t *testing.T) {
	tj := MakeTrainJob("llm", "ml", "torch-distributed").Obj()
	if got := ptr.Deref(tj.Spec.Trainer.NumNodes, 0); got != 1 {
		t.Errorf("numNodes = %d, want 1", got)
	}
	if tj.Spec.Suspend != nil || tj.Spec.Trainer.ResourcesPerNode != nil || tj.Labels != nil {
		t.Errorf("defaults set more than the runtime and nodes: %+v", tj.Spec)
	}
}
