package webhook

// Paths of the opt-in scope webhooks on Jobs and JobSets. They stamp
// v1alpha1.LabelScope onto the pod template of a Job or JobSet that an account names (or
// that carries the short-form annotations), so that the pod webhook and the controller's
// pod cache see only pods whose batch opted in. They fail open (failurePolicy Ignore):
// a Job created while batchledger is down is created unlabelled, and the controller
// stamps it later while it is still suspended and never started.
const (
	JobMutatePath    = "/mutate-batch-v1-job"
	JobSetMutatePath = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
)

// +kubebuilder:webhook:path=/mutate-batch-v1-job,mutating=true,failurePolicy=ignore,sideEffects=None,groups=batch,resources=jobs,verbs=create,versions=v1,name=mjob.batchledger.dev,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/mutate-jobset-x-k8s-io-v1alpha2-jobset,mutating=true,failurePolicy=ignore,sideEffects=None,groups=jobset.x-k8s.io,resources=jobsets,verbs=create,versions=v1alpha2,name=mjobset.batchledger.dev,admissionReviewVersions=v1,timeoutSeconds=5
