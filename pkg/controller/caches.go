package controller

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/all"
	"batchledger.dev/batchledger/pkg/relations"
)

// CacheOptions keep the manager's cache to what accounting reads. Jobs and Kueue Workloads:
// only those carrying v1alpha1.LabelScope on their own metadata (scopedSelector), which the
// scope webhook and the controller set on every Job an account follows and Kueue copies
// onto its Workload (labelKeysToCopy) or the controller sets (labelWorkload): a Job no
// account follows, and its Workload, are never sent to the controller. Pods: only those of the results
// scope (their Job's template carries v1alpha1.LabelScope=results), in every phase, since
// the releaser must see a held pod deleted before it ran; the coverage scope's pods are in
// the coverage pod cache (NewCoveragePodCache). Without managed fields and with a spec cut down to the container names
// a result is read from, so memory follows the accounted pods, not every pod of the
// cluster. Workloads: without the pod templates Kueue copies into each podSet. Jobs:
// without the pod spec of their template (jobTransform). The other kinds of target as
// they cut themselves down (kinds.Cached).
func CacheOptions() cache.Options {
	opts := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {
				Label:     scopeSelector(v1alpha1.ScopeResults),
				Transform: podTransform,
			},
			&batchv1.Job{}: {Label: scopedSelector(), Transform: jobTransform},
			&kueue.Workload{}: {
				Label: scopedSelector(),
				Transform: func(obj any) (any, error) {
					if wl, ok := obj.(*kueue.Workload); ok {
						wl.ManagedFields = nil
						for i := range wl.Spec.PodSets {
							wl.Spec.PodSets[i].Template = corev1.PodTemplateSpec{}
						}
					}
					return obj, nil
				},
			},
		},
	}
	for _, k := range all.Kinds {
		if c, ok := k.(kinds.Cached); ok {
			opts.ByObject[k.NewObject()] = cache.ByObject{Transform: c.CacheTransform}
		}
	}
	return opts
}

// NewCoveragePodCache creates the second pod cache (Reconciler.CoveragePods), with the
// relations.RegisterPodIndexes indexes the reconciler lists it by: the pods of the
// coverage scope, and only once they succeeded (a field selector on status.phase). A
// coverage account counts only succeeded pods and holds none, so the API server never
// sends it the Pending and Running updates of those pods, which were most of the pod
// traffic the controller decoded only to drop. It holds their metadata only
// (relations.PodMetadata): owner, completion index, UID and finalizers are all an account
// reads of a succeeded pod, and the API server then sends neither spec nor status. base
// gives what the cache shares with its caller (HTTP client, scheme, RESTMapper); the
// cache starts when the caller starts it.
func NewCoveragePodCache(ctx context.Context, cfg *rest.Config, base cache.Options) (cache.Cache, error) {
	base.DefaultTransform = cache.TransformStripManagedFields()
	base.ByObject = map[client.Object]cache.ByObject{
		relations.PodMetadata(): {
			Label: scopeSelector(v1alpha1.ScopeCoverage),
			Field: succeededSelector(),
		},
	}
	c, err := cache.New(cfg, base)
	if err != nil {
		return nil, err
	}
	if err := relations.RegisterPodIndexes(ctx, c, relations.PodMetadata()); err != nil {
		return nil, err
	}
	return c, nil
}

// succeededSelector selects the pods that succeeded, as the API server serves it: the
// coverage pod cache, a late Job's pod cache and the live read of a late Job's pods ask
// for exactly these.
func succeededSelector() fields.Selector {
	return fields.OneTermEqualSelector("status.phase", string(corev1.PodSucceeded))
}

// scopedSelector selects the objects carrying the opt-in scope label, of any scope: the
// Jobs and Workloads of the manager's cache.
func scopedSelector() labels.Selector {
	req, err := labels.NewRequirement(v1alpha1.LabelScope, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key: cannot fail
	}
	return labels.NewSelector().Add(*req)
}

// scopeSelector selects the pods labelled with the opt-in scope.
func scopeSelector(scope string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{v1alpha1.LabelScope: scope})
}

// podTransform strips a cached pod to what accounting and result capture read.
func podTransform(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p.ManagedFields = nil
		p.Spec = containerNames(p.Spec)
	}
	return obj, nil
}

// jobTransform strips a cached Job to what the controllers read: its metadata, its spec
// but for the pod spec of its template (the template's labels and annotations carry the
// opt-in scope), and its status. Each reconcile copies its targets' Jobs out of the cache: a pod spec (images,
// environment, volumes) is most of a Job and no controller reads it, but for the pods'
// termination grace period (terminationGrace: a dispatched Job's pod ending within it
// after an eviction still ran the index). A patch answers with the whole Job; that copy
// is the caller's, never the cache's.
func jobTransform(obj any) (any, error) {
	if j, ok := obj.(*batchv1.Job); ok {
		j.ManagedFields = nil
		j.Spec.Template.Spec = corev1.PodSpec{TerminationGracePeriodSeconds: j.Spec.Template.Spec.TerminationGracePeriodSeconds}
	}
	return obj, nil
}

// containerNames keeps of a pod spec what result capture reads: the node, the containers'
// names in spec order (the default result container is the first) and the native sidecars.
func containerNames(spec corev1.PodSpec) corev1.PodSpec {
	out := corev1.PodSpec{NodeName: spec.NodeName}
	for _, c := range spec.Containers {
		out.Containers = append(out.Containers, corev1.Container{Name: c.Name})
	}
	for _, c := range spec.InitContainers {
		out.InitContainers = append(out.InitContainers, corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy})
	}
	return out
}
