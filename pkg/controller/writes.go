package controller

import (
	"context"
	"encoding/json"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// StatusWriter sends the reconciler's two writes: an account's status and our conditions
// on a Workload. Neither caller reads the answer: the account's new state is the one just
// computed, and our informers bring the stored objects back anyway.
type StatusWriter interface {
	// UpdateAccountStatus replaces the status of ba, at ba's resourceVersion (a stale
	// read conflicts).
	UpdateAccountStatus(ctx context.Context, ba *v1alpha1.BatchAccount) error
	// ApplyWorkloadStatus applies ac to a Workload's status under FieldManager, forcing
	// ownership of the fields it names.
	ApplyWorkloadStatus(ctx context.Context, ac *kueueac.WorkloadApplyConfiguration) error
}

// clientWriter is the StatusWriter of a controller-runtime client: each answer is decoded
// into an object. The reconciler's default, which unit tests' fake clients serve.
type clientWriter struct{ c client.Client }

func (w clientWriter) UpdateAccountStatus(ctx context.Context, ba *v1alpha1.BatchAccount) error {
	return w.c.Status().Update(ctx, ba)
}

func (w clientWriter) ApplyWorkloadStatus(ctx context.Context, ac *kueueac.WorkloadApplyConfiguration) error {
	return w.c.Status().Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership)
}

// restWriter is the StatusWriter of the manager: plain requests whose answers are read
// but never decoded. Each answer is the whole object (an account with its status, a
// Workload with its pod templates), and decoding them was 5% of the controller's CPU in
// the 1000x2 load profile (docs/benchmarks.md) for objects nobody read.
type restWriter struct {
	accounts, workloads rest.Interface
}

// NewRESTStatusWriter is the StatusWriter that never decodes an answer, over cfg and the
// manager's HTTP client; scheme decodes the errors the API server answers with.
func NewRESTStatusWriter(cfg *rest.Config, httpClient *http.Client, scheme *runtime.Scheme) (StatusWriter, error) {
	codecs := serializer.NewCodecFactory(scheme).WithoutConversion()
	clientFor := func(gv schema.GroupVersion) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.APIPath = "/apis"
		c.GroupVersion = &gv
		c.NegotiatedSerializer = codecs
		c.ContentType = runtime.ContentTypeJSON
		return rest.RESTClientForConfigAndClient(c, httpClient)
	}
	accounts, err := clientFor(v1alpha1.GroupVersion)
	if err != nil {
		return nil, err
	}
	workloads, err := clientFor(kueue.GroupVersion)
	if err != nil {
		return nil, err
	}
	return restWriter{accounts: accounts, workloads: workloads}, nil
}

func (w restWriter) UpdateAccountStatus(ctx context.Context, ba *v1alpha1.BatchAccount) error {
	out := *ba
	out.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "BatchAccount"}
	body, err := json.Marshal(&out)
	if err != nil {
		return err
	}
	return w.accounts.Put().Namespace(ba.Namespace).Resource("batchaccounts").Name(ba.Name).SubResource("status").
		SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body).Do(ctx).Error()
}

func (w restWriter) ApplyWorkloadStatus(ctx context.Context, ac *kueueac.WorkloadApplyConfiguration) error {
	body, err := json.Marshal(ac)
	if err != nil {
		return err
	}
	return w.workloads.Patch(types.ApplyPatchType).Namespace(*ac.GetNamespace()).Resource("workloads").Name(*ac.GetName()).
		SubResource("status").Param("fieldManager", FieldManager).Param("force", "true").
		Body(body).Do(ctx).Error()
}
