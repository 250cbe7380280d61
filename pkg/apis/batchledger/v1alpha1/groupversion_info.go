// Package v1alpha1 holds the batchledger.dev/v1alpha1 API: the BatchAccount, which joins
// Kubernetes' per-Job completion indexes to a batch's declared shards through an explicit
// assignment mapping, and the ShardResults chunks that record reported results.
//
// Besides the kinds it holds the API's vocabulary, so that the controller, the webhooks,
// the CLI and the tests name it alike: condition types and their reasons, the reasons a
// result is rejected for, the annotations and labels batchledger reads and writes, the
// Workload condition types batchledger publishes (IsWorkloadCondition) and the grammar
// of target keys (TargetRef.Key, ParseTargetKey).
//
// The package registers its kinds with apimachinery's scheme builder, so that it links
// no client code: the pure accounting core imports it.
//
// +kubebuilder:object:generate=true
// +groupName=batchledger.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "batchledger.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// knownTypes are the kinds of this package, each followed by its list.
var knownTypes []runtime.Object

// register adds kinds to the package's scheme registration; each kind file calls it from init.
func register(objs ...runtime.Object) { knownTypes = append(knownTypes, objs...) }

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
