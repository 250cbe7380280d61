// Package v1alpha1 holds the batchledger.dev/v1alpha1 API: the BatchAccount, which joins
// Kubernetes' per-Job completion indexes to a batch's declared shards through an explicit
// assignment mapping.
//
// +kubebuilder:object:generate=true
// +groupName=batchledger.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "batchledger.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
