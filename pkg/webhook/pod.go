package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"gomodules.xyz/jsonpatch/v2"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/controller"
)

// PodMutatePath is where the pod mutating webhook is served.
const PodMutatePath = "/mutate--v1-pod"

// PodResultHolder adds the result-capture finalizer to a new index pod of a Job that an
// account requiring results names, so that the pod's result can be read even if the pod
// is deleted right after it succeeds while the controller is down. Pods of other Jobs are
// left untouched; the webhook's objectSelector (config/webhook) sends it only pods that
// carry a completion index.
type PodResultHolder struct {
	// Reader reads BatchAccounts, indexed by controller.IndexAccountTarget.
	Reader client.Reader
}

var _ admission.Handler = &PodResultHolder{}

// +kubebuilder:webhook:path=/mutate--v1-pod,mutating=true,failurePolicy=fail,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=mpod.batchledger.dev,admissionReviewVersions=v1,timeoutSeconds=5

// SetupWithManager registers the handler on the manager's webhook server.
func (h *PodResultHolder) SetupWithManager(mgr ctrl.Manager) error {
	mgr.GetWebhookServer().Register(PodMutatePath, &admission.Webhook{Handler: h})
	return nil
}

// objectMeta decodes the metadata of a JSON object and stops there: the API server
// writes metadata before spec and status, so the rest of the pod (most of its bytes) is
// never scanned. A metadata field further down is still found, after skipping what
// comes before it.
func objectMeta(raw []byte) (metav1.ObjectMeta, error) {
	var meta metav1.ObjectMeta
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil {
		return meta, err
	} else if tok != json.Delim('{') {
		return meta, fmt.Errorf("not a JSON object")
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return meta, err
		}
		if key == "metadata" {
			return meta, dec.Decode(&meta)
		}
		var skipped json.RawMessage
		if err := dec.Decode(&skipped); err != nil {
			return meta, err
		}
	}
	return meta, nil
}

// Handle adds the finalizer when an account requiring results names the pod's Job. It
// reads only the pod's metadata and answers with a one-operation JSON patch: every index
// pod of the cluster passes here, and decoding, re-encoding and diffing whole pods (as a
// CustomDefaulter does) was a tenth of the controller's CPU under load.
func (h *PodResultHolder) Handle(ctx context.Context, req admission.Request) admission.Response {
	meta, err := objectMeta(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod's metadata: %w", err))
	}
	if _, indexed := meta.Annotations[batchv1.JobCompletionIndexAnnotation]; !indexed || slices.Contains(meta.Finalizers, v1alpha1.ResultFinalizer) {
		return admission.Allowed("")
	}
	keys := controller.PodTargetKeys(&corev1.Pod{ObjectMeta: meta})
	if len(keys) == 0 {
		return admission.Allowed("")
	}
	ns := meta.Namespace
	if ns == "" {
		// Pods created by the Job controller have no namespace in the object yet.
		ns = req.Namespace
	}
	accounts, err := controller.AccountsRequiringResults(ctx, h.Reader, ns, keys)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(accounts) == 0 {
		return admission.Allowed("")
	}
	if len(meta.Finalizers) == 0 {
		return admission.Patched("", jsonpatch.NewOperation("add", "/metadata/finalizers", []string{v1alpha1.ResultFinalizer}))
	}
	return admission.Patched("", jsonpatch.NewOperation("add", "/metadata/finalizers/-", v1alpha1.ResultFinalizer))
}
