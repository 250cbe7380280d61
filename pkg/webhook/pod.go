package webhook

import (
	"context"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
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

var _ admission.Defaulter[*corev1.Pod] = &PodResultHolder{}

// +kubebuilder:webhook:path=/mutate--v1-pod,mutating=true,failurePolicy=fail,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=mpod.batchledger.dev,admissionReviewVersions=v1,timeoutSeconds=5

// SetupWithManager registers the pod defaulter on the manager's webhook server.
func (h *PodResultHolder) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &corev1.Pod{}).WithDefaulter(h).Complete()
}

// Default adds the finalizer when an account requiring results names the pod's Job.
func (h *PodResultHolder) Default(ctx context.Context, pod *corev1.Pod) error {
	if _, indexed := pod.Annotations[batchv1.JobCompletionIndexAnnotation]; !indexed || slices.Contains(pod.Finalizers, v1alpha1.ResultFinalizer) {
		return nil
	}
	keys := controller.PodTargetKeys(pod)
	if len(keys) == 0 {
		return nil
	}
	ns := pod.Namespace
	if ns == "" {
		if req, err := admission.RequestFromContext(ctx); err == nil {
			ns = req.Namespace
		}
	}
	accounts, err := controller.AccountsRequiringResults(ctx, h.Reader, ns, keys)
	if err != nil {
		return err
	}
	if len(accounts) > 0 {
		pod.Finalizers = append(pod.Finalizers, v1alpha1.ResultFinalizer)
	}
	return nil
}
