package scheme

import (
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

func TestMustRecognizesEveryKindBatchledgerTalksTo(t *testing.T) {
	s := Must()
	for _, gvk := range []schema.GroupVersionKind{
		batchv1.SchemeGroupVersion.WithKind("Job"),
		kueue.GroupVersion.WithKind("Workload"),
		jobset.GroupVersion.WithKind("JobSet"),
		trainer.GroupVersion.WithKind(trainer.TrainJobKind),
		trainer.GroupVersion.WithKind(trainer.ClusterTrainingRuntimeKind),
		trainer.GroupVersion.WithKind(trainer.TrainingRuntimeKind),
		v1alpha1.GroupVersion.WithKind("BatchAccount"),
	} {
		t.Run(gvk.Kind, func(t *testing.T) {
			if !s.Recognizes(gvk) {
				t.Fatalf("scheme does not recognize %s", gvk)
			}
		})
	}
}

func TestMustMapsTrainJobObjectToItsKind(t *testing.T) {
	gvks, _, err := Must().ObjectKinds(&trainer.TrainJob{})
	if err != nil {
		t.Fatalf("ObjectKinds(TrainJob): %v", err)
	}
	want := schema.GroupVersionKind{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"}
	if len(gvks) != 1 || gvks[0] != want {
		t.Fatalf("ObjectKinds(TrainJob) = %v, want [%s]", gvks, want)
	}
}
