package localcluster

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// KwokNodeAnnotation marks the nodes kwok manages (value "fake"); e2e tells kwok's nodes from real kubelets by it.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// GPUTypeLabel is the node label ResourceFlavors select GPU models by.
	GPUTypeLabel = "gpu-type"
	// GPUResource is the extended resource fake nodes advertise.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
)

// NodeSpec describes a fake node.
type NodeSpec struct {
	// Name is the node name.
	Name string
	// Labels are added to the standard ones (kubernetes.io/hostname, type=kwok).
	Labels map[string]string
	// GPUs is the node's nvidia.com/gpu capacity.
	GPUs int
	// CPU and Memory are the node's capacity, as quantities ("256", "2Ti").
	CPU, Memory string
}

// DefaultNodes are the GPU nodes tests and the demo rely on: two `gpu-type: h100` and two
// `gpu-type: a100` nodes with 8 GPUs each and far more CPU and memory than GPU jobs ask for,
// so GPUs (and Kueue quota) are what runs out.
func DefaultNodes() []NodeSpec {
	var out []NodeSpec
	for _, model := range []string{"h100", "a100"} {
		for i := range 2 {
			out = append(out, NodeSpec{
				Name:   fmt.Sprintf("kwok-%s-%d", model, i),
				Labels: map[string]string{GPUTypeLabel: model},
				GPUs:   8,
				CPU:    "256",
				Memory: "2Ti",
			})
		}
	}
	return out
}

// node builds the Node object. Status carries the capacity (kwok keeps it); kwok fills in
// conditions, addresses and node info.
func (n NodeSpec) node() *corev1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname": n.Name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
	}
	for k, v := range n.Labels {
		labels[k] = v
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(n.CPU),
		corev1.ResourceMemory: resource.MustParse(n.Memory),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	if n.GPUs > 0 {
		capacity[GPUResource] = *resource.NewQuantity(int64(n.GPUs), resource.DecimalSI)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.Name,
			Labels:      labels,
			Annotations: map[string]string{KwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Phase:       corev1.NodePending,
		},
	}
}

// nodeSchedulable reports a Ready node without the not-ready/unreachable taints.
func nodeSchedulable(n *corev1.Node) bool {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return ready && !n.Spec.Unschedulable
}

func keyOf(name string) types.NamespacedName { return types.NamespacedName{Name: name} }
