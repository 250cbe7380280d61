// Package scheme builds the runtime.Scheme every batchledger program talks to the cluster
// with: the built-in types, Kueue v1beta2, JobSet v1alpha2, Kubeflow Trainer v1alpha1 and
// batchledger v1alpha1.
package scheme

import (
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// New returns a scheme with every type batchledger reads or writes.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kueue.AddToScheme, jobset.AddToScheme, trainer.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Must is New for package-level variables: registration of these compiled-in types only
// fails on a programming error.
func Must() *runtime.Scheme {
	s, err := New()
	if err != nil {
		panic(err)
	}
	return s
}
