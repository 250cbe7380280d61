package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AnnotationWorkload on a held pod of a MultiKueue worker names the manager's Workload
// its Job copy was dispatched for (Kueue's prebuilt-workload-name on the Job): the
// worker role's pod webhook writes it at the pod's creation, so that the pod's result is
// still attributed when Kueue deleted the Job before the result was recorded.
const AnnotationWorkload = "batchledger.dev/workload"

// WorkerResult is what batchledger in the worker role of a MultiKueue worker cluster
// records of one succeeded pod of a Job that MultiKueue dispatched there, before it
// releases the pod: the manager's identity of the pod's index (the manager Workload,
// the Job's name and completion index) and the pod's termination messages, unjudged.
// The manager reads it with read-only credentials and judges it under its account's
// acceptance rule, as it judges a pod of its own cluster (docs/multikueue.md). It is
// owned by nothing: Kueue deletes the worker's Job as soon as the Workload finishes,
// and the record must outlive it until the manager read it; the worker deletes it after
// its retention.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=batchledger
// +kubebuilder:printcolumn:name="Workload",type=string,JSONPath=`.workload`
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.job`
// +kubebuilder:printcolumn:name="Index",type=integer,JSONPath=`.index`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.pod`,priority=1
// +kubebuilder:printcolumn:name="Finished",type=date,JSONPath=`.finishedAt`
type WorkerResult struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Workload is the name of the manager's Workload, in the record's namespace, that
	// MultiKueue dispatched the Job for.
	// +kubebuilder:validation:MinLength=1
	Workload string `json:"workload"`
	// Job is the name of the Job (the same on the manager and on the worker).
	// +kubebuilder:validation:MinLength=1
	Job string `json:"job"`
	// JobUID is the UID of the worker's copy of the Job (not the manager's).
	// +optional
	JobUID types.UID `json:"jobUID,omitempty"`
	// Index is the pod's completion index.
	// +kubebuilder:validation:Minimum=0
	Index int32 `json:"index"`
	// Pod is the name of the worker's pod that reported the result.
	Pod string `json:"pod"`
	// PodUID is the UID of that pod: a record per pod.
	PodUID types.UID `json:"podUID"`
	// FinishedAt is when the pod finished.
	FinishedAt metav1.Time `json:"finishedAt"`
	// ResultContainer is the pod's batchledger.dev/result-container annotation.
	// +optional
	ResultContainer string `json:"resultContainer,omitempty"`
	// DefaultContainer is the pod's kubectl.kubernetes.io/default-container annotation:
	// with ResultContainer and the account's resultContainer it tells, as for a pod of
	// the manager's cluster, which container reports the result.
	// +optional
	DefaultContainer string `json:"defaultContainer,omitempty"`
	// Containers are the pod's containers in spec order, then its init containers in
	// theirs, each with its termination message as result capture reads it: all of
	// them, since the account's resultContainer, which the worker does not know, may
	// name any. The list has no count bound, as a pod's containers have none: a bound
	// would refuse the record of a pod the manager would judge on its own cluster. Its
	// size follows the pod's: per container it holds a name (a DNS label) and flags,
	// less than the pod's spec and status hold, and the kubelet shares 12 KiB of
	// termination messages among all of a pod's containers, so a record fits where its
	// pod did.
	// +listType=atomic
	Containers []ContainerMessage `json:"containers"`
}

// ContainerMessage is a container of a worker's pod and its termination message.
type ContainerMessage struct {
	// Name of the container: a DNS label, as Kubernetes validates a container's name.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Message is its termination message; empty when it wrote none.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`
	// Sidecar is true for a native sidecar (an init container restarted Always).
	// +optional
	Sidecar bool `json:"sidecar,omitempty"`
	// Init is true for an init container that runs to completion before the pod's
	// work begins: it reports no result, so its message is not kept. It is recorded
	// because an account may name it, and result capture answers differently for a
	// container the pod lacks.
	// +optional
	Init bool `json:"init,omitempty"`
}

// WorkerResultList is a list of WorkerResult.
//
// +kubebuilder:object:root=true
type WorkerResultList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkerResult `json:"items"`
}

func init() {
	register(&WorkerResult{}, &WorkerResultList{})
}
