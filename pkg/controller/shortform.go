package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/relations"
)

// ShortFormReconciler creates the BatchAccount a short-form Job or JobSet declares.
type ShortFormReconciler struct {
	client.Client
	// Kind is relations.KindJob or relations.KindJobSet.
	Kind string
}

// +kubebuilder:rbac:groups=batchledger.dev,resources=batchaccounts,verbs=list;watch;create

// Reconcile applies the declared account. Errors in the annotations become an event-free
// account-less log line: there is no account to carry a condition yet, so the message
// names the annotation to fix.
func (r *ShortFormReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var obj client.Object
	var spec v1alpha1.BatchAccountSpec
	var err error
	switch r.Kind {
	case relations.KindJobSet:
		var js jobsetapi.JobSet
		if err := r.Get(ctx, req.NamespacedName, &js); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		obj = &js
		spec, err = ShortFormJobSet(&js)
	default:
		var job batchv1.Job
		if err := r.Get(ctx, req.NamespacedName, &job); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		obj = &job
		spec, err = ShortFormJob(&job)
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("ignoring malformed batchledger short form", "error", err.Error())
		return ctrl.Result{}, nil
	}
	var existing v1alpha1.BatchAccount
	if err := r.Get(ctx, req.NamespacedName, &existing); err == nil {
		return ctrl.Result{}, nil // created before; the account is the user's from now on
	} else if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	ba := &v1alpha1.BatchAccount{
		ObjectMeta: metav1.ObjectMeta{
			Name: obj.GetName(), Namespace: obj.GetNamespace(),
			Labels: map[string]string{v1alpha1.LabelShortFormOf: r.Kind},
		},
		Spec: spec,
	}
	return ctrl.Result{}, client.IgnoreAlreadyExists(r.Create(ctx, ba))
}

// SetupWithManager watches annotated Jobs or JobSets.
func (r *ShortFormReconciler) SetupWithManager(mgr ctrl.Manager) error {
	hasShortForm := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetAnnotations()[v1alpha1.AnnotationInputRev]
		return ok
	})
	var obj client.Object = &batchv1.Job{}
	if r.Kind == relations.KindJobSet {
		obj = &jobsetapi.JobSet{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(obj, builder.WithPredicates(hasShortForm, predicate.GenerationChangedPredicate{})).
		Named("shortform-" + strings.ToLower(r.Kind)).
		Complete(r)
}

// shortFormCommon reads the revisions, shard population and acceptance annotations.
func shortFormCommon(ann map[string]string) (v1alpha1.BatchAccountSpec, int, error) {
	spec := v1alpha1.BatchAccountSpec{InputRevision: ann[v1alpha1.AnnotationInputRev], ModelRevision: ann[v1alpha1.AnnotationModelRev]}
	if spec.InputRevision == "" || spec.ModelRevision == "" {
		return spec, 0, fmt.Errorf("annotations %s and %s are both required", v1alpha1.AnnotationInputRev, v1alpha1.AnnotationModelRev)
	}
	n := 0
	switch {
	case ann[v1alpha1.AnnotationShards] != "":
		spec.Shards.Names = strings.Split(ann[v1alpha1.AnnotationShards], ",")
		for i := range spec.Shards.Names {
			spec.Shards.Names[i] = strings.TrimSpace(spec.Shards.Names[i])
		}
		n = len(spec.Shards.Names)
	case ann[v1alpha1.AnnotationShardCount] != "":
		c, err := strconv.Atoi(ann[v1alpha1.AnnotationShardCount])
		if err != nil || c < 1 {
			return spec, 0, fmt.Errorf("annotation %s=%q is not a positive count", v1alpha1.AnnotationShardCount, ann[v1alpha1.AnnotationShardCount])
		}
		spec.Shards.Prefix = ann[v1alpha1.AnnotationShardPrefix]
		spec.Shards.Count = ptr.To(int32(c))
		n = c
	default:
		return spec, 0, fmt.Errorf("annotation %s or %s is required", v1alpha1.AnnotationShards, v1alpha1.AnnotationShardCount)
	}
	if ann[v1alpha1.AnnotationRequire] == "true" || ann[v1alpha1.AnnotationRule] != "" {
		spec.Acceptance = &v1alpha1.AcceptanceCriterion{RequireResults: ann[v1alpha1.AnnotationRequire] == "true", Rule: ann[v1alpha1.AnnotationRule]}
	}
	return spec, n, nil
}

// ShortFormJob is the account a short-form Job declares: indexes 0..n-1 onto the n
// shards, in order. A shard count that differs from completions is left for the account
// to report (UnmappedIndexes / IndexOutOfRange), not silently adjusted.
func ShortFormJob(job *batchv1.Job) (v1alpha1.BatchAccountSpec, error) {
	spec, n, err := shortFormCommon(job.Annotations)
	if err != nil {
		return spec, fmt.Errorf("job %s: %w", job.Name, err)
	}
	spec.Assignments = []v1alpha1.Assignment{{
		Target:        v1alpha1.TargetRef{Job: job.Name},
		Indexes:       indexset.Range(0, n-1).String(),
		ShardOrdinals: indexset.Range(0, n-1).String(),
	}}
	return spec, nil
}

// ShortFormJobSet is the account a short-form JobSet declares over one replicatedJob:
// child Job i's indexes 0..completions-1 onto shard ordinals i*completions onwards.
func ShortFormJobSet(js *jobsetapi.JobSet) (v1alpha1.BatchAccountSpec, error) {
	spec, n, err := shortFormCommon(js.Annotations)
	if err != nil {
		return spec, fmt.Errorf("jobset %s: %w", js.Name, err)
	}
	rjName := js.Annotations[v1alpha1.AnnotationReplicatedJob]
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name != rjName {
			continue
		}
		c := int(ptr.Deref(rj.Template.Spec.Completions, 1))
		if c*int(rj.Replicas) != n {
			return spec, fmt.Errorf("jobset %s: replicatedJob %s runs %d replicas x %d completions = %d indexes for %d shards", js.Name, rjName, rj.Replicas, c, c*int(rj.Replicas), n)
		}
		for i := range int(rj.Replicas) {
			spec.Assignments = append(spec.Assignments, v1alpha1.Assignment{
				Target:        v1alpha1.TargetRef{JobSet: js.Name, ReplicatedJob: rjName, JobIndex: ptr.To(int32(i))},
				Indexes:       indexset.Range(0, c-1).String(),
				ShardOrdinals: indexset.Range(i*c, (i+1)*c-1).String(),
			})
		}
		return spec, nil
	}
	return spec, fmt.Errorf("jobset %s: annotation %s names replicatedJob %q, which the JobSet does not have", js.Name, v1alpha1.AnnotationReplicatedJob, rjName)
}
