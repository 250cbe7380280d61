package wrappers

import (
	"strconv"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TrainJobWrapper builds a Kubeflow Trainer TrainJob.
type TrainJobWrapper struct{ trainer.TrainJob }

// MakeTrainJob starts a TrainJob of one node on the ClusterTrainingRuntime runtime; set
// the nodes with NumNodes.
func MakeTrainJob(name, ns, runtime string) *TrainJobWrapper {
	return &TrainJobWrapper{trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{
				Name:     runtime,
				APIGroup: new(trainer.GroupVersion.Group),
				Kind:     new(trainer.ClusterTrainingRuntimeKind),
			},
			Trainer: &trainer.Trainer{NumNodes: new(int32(1))},
		},
	}}
}

// NumNodes sets how many nodes (pods of the runtime's node Job, one per completion index)
// the TrainJob runs.
func (w *TrainJobWrapper) NumNodes(n int32) *TrainJobWrapper {
	w.Spec.Trainer.NumNodes = &n
	return w
}

// Image sets the image of the trainer (node) containers instead of the runtime's.
func (w *TrainJobWrapper) Image(image string) *TrainJobWrapper {
	w.Spec.Trainer.Image = &image
	return w
}

// Queue submits the TrainJob to a Kueue LocalQueue: one Workload for all its nodes.
func (w *TrainJobWrapper) Queue(localQueue string) *TrainJobWrapper {
	return w.Label(QueueLabel, localQueue)
}

// Label sets a label on the TrainJob.
func (w *TrainJobWrapper) Label(k, v string) *TrainJobWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// Annotation sets an annotation on the TrainJob.
func (w *TrainJobWrapper) Annotation(k, v string) *TrainJobWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

// GPU makes each node request (and limit) n GPUs, as the device plugin requires.
func (w *TrainJobWrapper) GPU(n int) *TrainJobWrapper {
	q := resource.MustParse(strconv.Itoa(n))
	w.resources()
	setResource(&w.Spec.Trainer.ResourcesPerNode.Requests, GPU, q)
	setResource(&w.Spec.Trainer.ResourcesPerNode.Limits, GPU, q)
	return w
}

// Request makes each node request quantity of a resource ("8", "64Gi").
func (w *TrainJobWrapper) Request(name corev1.ResourceName, quantity string) *TrainJobWrapper {
	w.resources()
	setResource(&w.Spec.Trainer.ResourcesPerNode.Requests, name, resource.MustParse(quantity))
	return w
}

func (w *TrainJobWrapper) resources() {
	if w.Spec.Trainer.ResourcesPerNode == nil {
		w.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{}
	}
}

// Suspend sets spec.suspend.
func (w *TrainJobWrapper) Suspend(s bool) *TrainJobWrapper {
	w.Spec.Suspend = &s
	return w
}

// UID sets the TrainJob's UID, as the API server would.
func (w *TrainJobWrapper) UID(uid string) *TrainJobWrapper {
	w.ObjectMeta.UID = types.UID(uid)
	return w
}

// Condition sets a status condition of the TrainJob (Complete, Failed...) True.
func (w *TrainJobWrapper) Condition(typ string, at time.Time) *TrainJobWrapper {
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ, LastTransitionTime: metav1.NewTime(at)})
	return w
}

// Obj returns the TrainJob.
func (w *TrainJobWrapper) Obj() *trainer.TrainJob { return &w.TrainJob }
