package workerrole

import (
	"context"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/webhook"
)

// PodHolder is the worker role's pod webhook, served where the single-cluster one is
// (webhook.PodMutatePath, the same webhook configuration): it holds a new index pod of
// the results scope exactly as webhook.PodResultHolder does, and names on it
// (v1alpha1.AnnotationWorkload) the manager Workload its Job copy was dispatched for,
// so that its result is still attributed if Kueue deletes the Job before the capture
// recorded it. A Job it cannot read leaves the pod held without the annotation: the
// capture then reads the Job itself.
type PodHolder struct {
	// Reader reads Jobs' metadata (the manager's cache).
	Reader client.Reader
}

var _ admission.Handler = PodHolder{}

// SetupWithManager registers the handler on the manager's webhook server.
func (h PodHolder) SetupWithManager(mgr ctrl.Manager) error {
	mgr.GetWebhookServer().Register(webhook.PodMutatePath, &admission.Webhook{Handler: h})
	return nil
}

// Handle holds the pod (webhook.PodResultHolder) and, when it does, annotates it.
func (h PodHolder) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := webhook.PodResultHolder{}.Handle(ctx, req)
	if len(resp.Patches) == 0 {
		return resp
	}
	meta, err := webhook.ObjectMeta(req.Object.Raw)
	if err != nil || meta.Annotations[v1alpha1.AnnotationWorkload] != "" {
		return resp
	}
	wl, err := dispatchedFor(ctx, h.Reader, req.Namespace, &meta)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "reading the Job of a held pod: the capture reads it again")
		return resp
	}
	if wl == "" {
		return resp
	}
	// An index pod always has annotations (the completion index): add a key to them.
	path := "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(v1alpha1.AnnotationWorkload)
	resp.Patches = append(resp.Patches, jsonpatch.NewOperation("add", path, wl))
	return resp
}
