package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"gomodules.xyz/jsonpatch/v2"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
)

// PodMutatePath is where the pod mutating webhook is served.
const PodMutatePath = "/mutate--v1-pod"

// PodResultHolder adds the result-capture finalizer to a new index pod whose Job opted in
// to "nothing lost" (its pod template carries v1alpha1.LabelScope=ScopeResults, stamped
// for the user by the scope webhooks or the controller), so that the pod's result can be
// read even if the pod is deleted right after it succeeds while the controller is down.
//
// The webhook configuration's objectSelector sends it only such pods, so that its
// failurePolicy Fail holds back only pods whose batch asked for it; a controller outage
// never blocks any other pod of the cluster. The decision needs the pod's metadata only,
// no lookup: a pod it cannot read is allowed, with a warning and a metric, never denied.
// Holding a pod no account records after all costs one release by the PodReleaser.
//
// With Assign set it also tells the pod its assignment in the same call, so that a
// results pod costs the API server one admission call, not two (the pod assignment
// webhook then selects only the coverage scope's pods). That part keeps its own fail-open
// rule under this webhook's failurePolicy Fail: a lookup that fails, panics or outlasts
// AssignTimeout leaves the pod held without its annotations, with a warning.
type PodResultHolder struct {
	// Assign tells a held pod its assignment; nil (the worker role, which has no
	// accounts) holds only.
	Assign *PodAssignmentAnnotator
	// AssignTimeout bounds the assignment lookup (0: DefaultAssignTimeout), well inside
	// the webhook's own timeout so that a slow cache never refuses a pod.
	AssignTimeout time.Duration
}

// DefaultAssignTimeout bounds the assignment lookup of the pod webhook: the manager's
// cache answers in microseconds once synced, and waits for the sync before that.
const DefaultAssignTimeout = 2 * time.Second

var _ admission.Handler = PodResultHolder{}

// +kubebuilder:webhook:path=/mutate--v1-pod,mutating=true,failurePolicy=fail,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=mpod.batchledger.dev,admissionReviewVersions=v1,timeoutSeconds=5

// SetupWithManager registers the handler on the manager's webhook server.
func (h PodResultHolder) SetupWithManager(mgr ctrl.Manager) error {
	mgr.GetWebhookServer().Register(PodMutatePath, &admission.Webhook{Handler: h})
	return nil
}

// ObjectMeta decodes the metadata of a JSON object and stops there: the API server
// writes metadata before spec and status, so the rest of the pod (most of its bytes) is
// never scanned. A metadata field further down is still found, after skipping what
// comes before it.
func ObjectMeta(raw []byte) (metav1.ObjectMeta, error) {
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

// Handle adds the finalizer to an index pod labelled ScopeResults, marks it when the Job
// controller creates it (indexPodMark) and, with Assign set, adds its assignment
// annotations. It reads only the pod's metadata, once.
func (h PodResultHolder) Handle(ctx context.Context, req admission.Request) admission.Response {
	meta, resp, ok := HoldPod(req.Object.Raw)
	if !ok {
		return resp
	}
	resp.Patches = append(resp.Patches, indexPodMark(meta, req.UserInfo.Username)...)
	if h.Assign == nil {
		return resp
	}
	told := h.assign(ctx, meta, req.Namespace)
	resp.Patches = append(resp.Patches, told.Patches...)
	resp.Warnings = append(resp.Warnings, told.Warnings...)
	return resp
}

// assign is the assignment part of Handle, failing open on its own: the pod is held
// whatever the lookup does.
func (h PodResultHolder) assign(ctx context.Context, meta metav1.ObjectMeta, namespace string) (resp admission.Response) {
	defer func() {
		if r := recover(); r != nil {
			resp = unclassified(PodAssignPath, fmt.Errorf("telling the pod its assignment: %v", r))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(h.AssignTimeout, DefaultAssignTimeout))
	defer cancel()
	return h.Assign.annotate(ctx, meta, namespace)
}

// HoldPod is the holding part of the pod webhook, for a handler that goes on from it (the
// MultiKueue worker role's): the metadata of the pod in raw, decoded once, and the answer
// that holds the pod if HeldForResults. ok is false when the pod cannot be read; resp is
// then the webhook's fail-open answer, to be returned as it is.
func HoldPod(raw []byte) (meta metav1.ObjectMeta, resp admission.Response, ok bool) {
	meta, err := ObjectMeta(raw)
	if err != nil {
		return meta, unclassified(PodMutatePath, fmt.Errorf("decoding the pod's metadata: %w", err)), false
	}
	return meta, hold(meta), true
}

// HeldForResults reports whether the pod webhook holds a pod of metadata meta until its
// result is recorded: an index pod whose batch opted in to the results scope.
func HeldForResults(meta metav1.ObjectMeta) bool {
	return relations.HasCompletionIndex(meta.Annotations) && meta.Labels[v1alpha1.LabelScope] == v1alpha1.ScopeResults
}

// hold is the finalizer patch of a pod HeldForResults that lacks it.
func hold(meta metav1.ObjectMeta) admission.Response {
	if !HeldForResults(meta) || slices.Contains(meta.Finalizers, v1alpha1.ResultFinalizer) {
		return admission.Allowed("")
	}
	if len(meta.Finalizers) == 0 {
		return admission.Patched("", jsonpatch.NewOperation("add", "/metadata/finalizers", []string{v1alpha1.ResultFinalizer}))
	}
	return admission.Patched("", jsonpatch.NewOperation("add", "/metadata/finalizers/-", v1alpha1.ResultFinalizer))
}
