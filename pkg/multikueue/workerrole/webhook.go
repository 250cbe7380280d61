package workerrole

import (
	"context"
	"net/http"
	"slices"

	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/webhook"
)

// PodHolder is the worker role's pod webhook, served where the single-cluster one is
// (webhook.PodMutatePath, the same webhook configuration): it holds a new index pod of
// the results scope exactly as webhook.PodResultHolder does and, when the Job controller
// creates it for a Job copy MultiKueue made (multikueue.CopiedFor), names on it
// (v1alpha1.AnnotationWorkload) the manager Workload the copy was dispatched for. The
// annotation is the worker role's only attribution of a pod (the Job may be gone when
// its result is recorded), so the webhook always removes one the pod's creator wrote.
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

// annotationPath is the JSON pointer of v1alpha1.AnnotationWorkload.
var annotationPath = webhook.AnnotationPath(v1alpha1.AnnotationWorkload)

// Handle holds the pod (webhook.HoldPod) and sets or removes its Workload
// annotation.
func (h PodHolder) Handle(ctx context.Context, req admission.Request) admission.Response {
	meta, resp, ok := webhook.HoldPod(req.Object.Raw)
	if !ok {
		return resp
	}
	_, claimed := meta.Annotations[v1alpha1.AnnotationWorkload]
	wl := ""
	if webhook.HeldForResults(meta) && slices.Contains(webhook.JobControllers, req.UserInfo.Username) {
		var err error
		if wl, err = h.copiedFor(ctx, req.Namespace, &meta); err != nil {
			// Refused, not admitted unattributed: the Job controller creates the pod again.
			return admission.Errored(http.StatusServiceUnavailable, err)
		}
		if wl == "" {
			// Held, and let go at once by the releaser: nothing records it here.
			ctrl.LoggerFrom(ctx).V(2).Info("held index pod of no dispatched Job copy: its result is not recorded on this worker",
				"namespace", req.Namespace, "generateName", meta.GenerateName, "owner", relations.ControllingJob(&meta))
		}
	}
	switch {
	case wl != "" && claimed:
		resp.Patches = append(resp.Patches, jsonpatch.NewOperation("replace", annotationPath, wl))
	case wl != "":
		// A held index pod always has annotations (the completion index): add a key.
		resp.Patches = append(resp.Patches, jsonpatch.NewOperation("add", annotationPath, wl))
	case claimed:
		resp.Patches = append(resp.Patches, jsonpatch.NewOperation("remove", annotationPath, nil))
	}
	return resp
}

// copiedFor is the manager Workload of the Job that controls a new pod, when that Job
// (the very one: same UID) is a copy MultiKueue made, or a child Job of a JobSet that is
// (dispatchedChild); "" otherwise. The Job controller
// creates a pod only for a Job that exists: one missing from the cache is an error.
func (h PodHolder) copiedFor(ctx context.Context, namespace string, meta metav1.Object) (string, error) {
	owner := relations.ControllingJob(meta)
	if owner == nil {
		return "", nil
	}
	job := jobMetadata()
	if err := h.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: owner.Name}, job); err != nil {
		return "", err
	}
	if job.UID != owner.UID {
		return "", nil
	}
	if wl := multikueue.CopiedFor(job); wl != "" {
		return wl, nil
	}
	// A child Job of a dispatched JobSet: MultiKueue's marks are on its JobSet (or the
	// TrainJob that rendered it), not on the Job.
	d, _, err := dispatchedChild(ctx, h.Reader, job)
	return d.Workload, err
}
