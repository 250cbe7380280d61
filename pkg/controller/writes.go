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

// Writer sends the reconciler's writes: an account's status, our conditions on a
// Workload, and the chunks of results. No caller reads the answer: the new state is the
// one just computed, and our informers bring the stored objects back anyway.
type Writer interface {
	// UpdateAccountStatus replaces the status of ba, at ba's resourceVersion (a stale
	// read conflicts).
	UpdateAccountStatus(ctx context.Context, ba *v1alpha1.BatchAccount) error
	// ApplyWorkloadStatus applies ac to a Workload's status under FieldManager, forcing
	// ownership of the fields it names.
	ApplyWorkloadStatus(ctx context.Context, ac *kueueac.WorkloadApplyConfiguration) error
	// WriteChunk creates c when it has no resourceVersion, else replaces it at its
	// resourceVersion (a stale read conflicts).
	WriteChunk(ctx context.Context, c *v1alpha1.ShardResults) error
}

// clientWriter is the Writer of a controller-runtime client: each answer is decoded
// into an object. The reconciler's default, which unit tests' fake clients serve.
type clientWriter struct{ c client.Client }

func (w clientWriter) UpdateAccountStatus(ctx context.Context, ba *v1alpha1.BatchAccount) error {
	return w.c.Status().Update(ctx, ba)
}

func (w clientWriter) WriteChunk(ctx context.Context, c *v1alpha1.ShardResults) error {
	if c.ResourceVersion == "" {
		return w.c.Create(ctx, c)
	}
	return w.c.Update(ctx, c)
}

func (w clientWriter) ApplyWorkloadStatus(ctx context.Context, ac *kueueac.WorkloadApplyConfiguration) error {
	return w.c.Status().Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership)
}

// restWriter is the Writer of the manager: plain requests whose answers are read
// but never decoded. Each answer is the whole object (an account with its status, a
// Workload with its pod templates, a chunk of up to 256 results), and decoding them was
// 5% of the controller's CPU in the 1000x2 load profile (docs/benchmarks.md), and the
// chunks' 4% at one account of 2,500 results, for objects nobody read.
type restWriter struct {
	batchledger, workloads rest.Interface
}

// NewRESTWriter is the Writer that never decodes an answer, over cfg and the
// manager's HTTP client; scheme decodes the errors the API server answers with.
func NewRESTWriter(cfg *rest.Config, httpClient *http.Client, scheme *runtime.Scheme) (Writer, error) {
	codecs := serializer.NewCodecFactory(scheme).WithoutConversion()
	clientFor := func(gv schema.GroupVersion) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.APIPath = "/apis"
		c.GroupVersion = &gv
		c.NegotiatedSerializer = codecs
		c.ContentType = runtime.ContentTypeJSON
		return rest.RESTClientForConfigAndClient(c, httpClient)
	}
	batchledger, err := clientFor(v1alpha1.GroupVersion)
	if err != nil {
		return nil, err
	}
	workloads, err := clientFor(kueue.GroupVersion)
	if err != nil {
		return nil, err
	}
	return restWriter{batchledger: batchledger, workloads: workloads}, nil
}

func (w restWriter) UpdateAccountStatus(ctx context.Context, ba *v1alpha1.BatchAccount) error {
	out := *ba
	out.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "BatchAccount"}
	return sendJSON(ctx, w.batchledger.Put().Namespace(ba.Namespace).Resource("batchaccounts").Name(ba.Name).SubResource("status"), &out)
}

func (w restWriter) WriteChunk(ctx context.Context, c *v1alpha1.ShardResults) error {
	out := *c
	out.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ShardResults"}
	req := w.batchledger.Post().Namespace(c.Namespace).Resource("shardresults")
	if c.ResourceVersion != "" {
		req = w.batchledger.Put().Namespace(c.Namespace).Resource("shardresults").Name(c.Name)
	}
	return sendJSON(ctx, req, &out)
}

// sendJSON sends obj as req's JSON body and reads the answer without decoding it (but
// for an error, which keeps its kind).
func sendJSON(ctx context.Context, req *rest.Request, obj any) error {
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return req.SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body).Do(ctx).Error()
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
