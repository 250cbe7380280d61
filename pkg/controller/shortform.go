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
)

// Annotations of the short form: on a Job or JobSet they declare a batch, and the
// controller creates the BatchAccount of the same name. The account is not owned by the
// Job or JobSet: a ledger outlives the Jobs it describes (TTL, cleanup), so deleting the
// Job keeps the account and its results; delete the account when its record is no longer
// needed (LabelShortFormOf finds the accounts made from short forms). Indexes map onto
// shards in order; for a JobSet, child Job i of the replicatedJob takes the i-th block.
const (
	AnnotationShards        = "batchledger.dev/shards"         // "A,B,C,D"
	AnnotationShardCount    = "batchledger.dev/shard-count"    // "100000"
	AnnotationShardPrefix   = "batchledger.dev/shard-prefix"   // "shard-"
	AnnotationInputRev      = "batchledger.dev/input-revision" // required
	AnnotationModelRev      = "batchledger.dev/model-revision" // required
	AnnotationReplicatedJob = "batchledger.dev/replicated-job" // JobSet only
	AnnotationRequire       = "batchledger.dev/require-results"
	AnnotationRule          = "batchledger.dev/acceptance-rule"
	// LabelShortFormOf on a BatchAccount the controller created from a short form names
	// the kind of object that declared it ("Job" or "JobSet"); the name is the account's.
	LabelShortFormOf = "batchledger.dev/short-form-of"
)

// ShortFormReconciler creates the BatchAccount a short-form Job or JobSet declares.
type ShortFormReconciler struct {
	client.Client
	// Kind is "Job" or "JobSet".
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
	case "JobSet":
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
			Labels: map[string]string{LabelShortFormOf: r.Kind},
		},
		Spec: spec,
	}
	return ctrl.Result{}, client.IgnoreAlreadyExists(r.Create(ctx, ba))
}

// SetupWithManager watches annotated Jobs or JobSets.
func (r *ShortFormReconciler) SetupWithManager(mgr ctrl.Manager) error {
	hasShortForm := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetAnnotations()[AnnotationInputRev]
		return ok
	})
	var obj client.Object = &batchv1.Job{}
	if r.Kind == "JobSet" {
		obj = &jobsetapi.JobSet{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(obj, builder.WithPredicates(hasShortForm, predicate.GenerationChangedPredicate{})).
		Named("shortform-" + strings.ToLower(r.Kind)).
		Complete(r)
}

// shortFormCommon reads the revisions, shard population and acceptance annotations.
func shortFormCommon(ann map[string]string) (v1alpha1.BatchAccountSpec, int, error) {
	spec := v1alpha1.BatchAccountSpec{InputRevision: ann[AnnotationInputRev], ModelRevision: ann[AnnotationModelRev]}
	if spec.InputRevision == "" || spec.ModelRevision == "" {
		return spec, 0, fmt.Errorf("annotations %s and %s are both required", AnnotationInputRev, AnnotationModelRev)
	}
	n := 0
	switch {
	case ann[AnnotationShards] != "":
		spec.Shards.Names = strings.Split(ann[AnnotationShards], ",")
		for i := range spec.Shards.Names {
			spec.Shards.Names[i] = strings.TrimSpace(spec.Shards.Names[i])
		}
		n = len(spec.Shards.Names)
	case ann[AnnotationShardCount] != "":
		c, err := strconv.Atoi(ann[AnnotationShardCount])
		if err != nil || c < 1 {
			return spec, 0, fmt.Errorf("annotation %s=%q is not a positive count", AnnotationShardCount, ann[AnnotationShardCount])
		}
		spec.Shards.Prefix = ann[AnnotationShardPrefix]
		spec.Shards.Count = ptr.To(int32(c))
		n = c
	default:
		return spec, 0, fmt.Errorf("annotation %s or %s is required", AnnotationShards, AnnotationShardCount)
	}
	if ann[AnnotationRequire] == "true" || ann[AnnotationRule] != "" {
		spec.Acceptance = &v1alpha1.AcceptanceCriterion{RequireResults: ann[AnnotationRequire] == "true", Rule: ann[AnnotationRule]}
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
	rjName := js.Annotations[AnnotationReplicatedJob]
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
	return spec, fmt.Errorf("jobset %s: annotation %s names replicatedJob %q, which the JobSet does not have", js.Name, AnnotationReplicatedJob, rjName)
}
