package relations

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
)

// The short form is parsed here, once, for both of its readers: the controller creates
// the account ShortForm returns, and the Job and JobSet webhooks stamp the scope of that
// same account (ShortFormScope). So a short form that does not parse gets neither an
// account nor a scope: no pod is held for an account that will never exist.

// shortFormAnnotations are the annotations of the short form. Any one of them declares
// one, so that a short form missing its input revision is reported, not ignored.
var shortFormAnnotations = []string{
	v1alpha1.AnnotationInputRev, v1alpha1.AnnotationModelRev, v1alpha1.AnnotationShards,
	v1alpha1.AnnotationShardCount, v1alpha1.AnnotationShardPrefix, v1alpha1.AnnotationReplicatedJob,
	v1alpha1.AnnotationRequire, v1alpha1.AnnotationRule,
}

// HasShortForm reports whether annotations declare a short form: any of its annotations.
func HasShortForm(annotations map[string]string) bool {
	for _, k := range shortFormAnnotations {
		if _, ok := annotations[k]; ok {
			return true
		}
	}
	return false
}

// ShortForm is the account spec the short-form annotations of a Job or JobSet declare,
// or an error naming the annotation to fix and what is wrong with it.
func ShortForm(obj client.Object) (v1alpha1.BatchAccountSpec, error) {
	switch o := obj.(type) {
	case *batchv1.Job:
		return ShortFormJob(o)
	case *jobsetapi.JobSet:
		return ShortFormJobSet(o)
	default:
		return v1alpha1.BatchAccountSpec{}, fmt.Errorf("a short form is declared on a Job or a JobSet, not a %T", obj)
	}
}

// ShortFormScope is the scope the short form of a Job or JobSet gives the pods of the Jobs
// its account names (for a JobSet, those of the replicatedJob it names): the scope of the
// account ShortForm declares. It is "" when obj carries no short form or one that does
// not parse.
func ShortFormScope(obj client.Object) string {
	if !HasShortForm(obj.GetAnnotations()) {
		return ""
	}
	spec, err := ShortForm(obj)
	if err != nil {
		return ""
	}
	return specScope(&spec)
}

// ShortFormJob is the account a short-form Job declares: indexes 0..n-1 onto the n
// shards, in order. A shard count that differs from completions is left for the account
// to report (UnmappedIndexes / IndexOutOfRange), not silently adjusted.
func ShortFormJob(job *batchv1.Job) (v1alpha1.BatchAccountSpec, error) {
	spec, n, err := shortFormCommon(job.Annotations)
	if err != nil {
		return spec, err
	}
	spec.Assignments = []v1alpha1.Assignment{{
		Target:        v1alpha1.TargetRef{Job: job.Name},
		Indexes:       indexset.Range(0, n-1).String(),
		ShardOrdinals: indexset.Range(0, n-1).String(),
	}}
	return spec, checkMapping(job.Namespace, job.Annotations, &spec)
}

// ShortFormJobSet is the account a short-form JobSet declares over one replicatedJob:
// child Job i's indexes 0..completions-1 onto shard ordinals i*completions onwards.
func ShortFormJobSet(js *jobsetapi.JobSet) (v1alpha1.BatchAccountSpec, error) {
	spec, n, err := shortFormCommon(js.Annotations)
	if err != nil {
		return spec, err
	}
	rjName := js.Annotations[v1alpha1.AnnotationReplicatedJob]
	if rjName == "" {
		return spec, fmt.Errorf("annotation %s is missing: on a JobSet it names the replicatedJob whose child Jobs run the shards", v1alpha1.AnnotationReplicatedJob)
	}
	names := make([]string, 0, len(js.Spec.ReplicatedJobs))
	for _, rj := range js.Spec.ReplicatedJobs {
		names = append(names, rj.Name)
		if rj.Name != rjName {
			continue
		}
		c := int(ptr.Deref(rj.Template.Spec.Completions, 1))
		if c*int(rj.Replicas) != n {
			return spec, fmt.Errorf("annotation %s declares %d shards, but replicatedJob %s runs %d replicas x %d completions = %d indexes: declare %d shards or change the replicatedJob",
				shardsAnnotation(js.Annotations), n, rjName, rj.Replicas, c, c*int(rj.Replicas), c*int(rj.Replicas))
		}
		for i := range int(rj.Replicas) {
			spec.Assignments = append(spec.Assignments, v1alpha1.Assignment{
				Target:        v1alpha1.TargetRef{JobSet: js.Name, ReplicatedJob: rjName, JobIndex: ptr.To(int32(i))},
				Indexes:       indexset.Range(0, c-1).String(),
				ShardOrdinals: indexset.Range(i*c, (i+1)*c-1).String(),
			})
		}
		return spec, checkMapping(js.Namespace, js.Annotations, &spec)
	}
	return spec, fmt.Errorf("annotation %s names replicatedJob %q, which the JobSet does not have (it has %s)",
		v1alpha1.AnnotationReplicatedJob, rjName, strings.Join(names, ", "))
}

// shortFormCommon reads the revisions, shard population and acceptance annotations.
func shortFormCommon(ann map[string]string) (v1alpha1.BatchAccountSpec, int, error) {
	spec := v1alpha1.BatchAccountSpec{InputRevision: ann[v1alpha1.AnnotationInputRev], ModelRevision: ann[v1alpha1.AnnotationModelRev]}
	for _, k := range []string{v1alpha1.AnnotationInputRev, v1alpha1.AnnotationModelRev} {
		if ann[k] == "" {
			return spec, 0, fmt.Errorf("annotation %s is missing or empty: the short form needs both %s and %s",
				k, v1alpha1.AnnotationInputRev, v1alpha1.AnnotationModelRev)
		}
	}
	names, count := ann[v1alpha1.AnnotationShards], ann[v1alpha1.AnnotationShardCount]
	n := 0
	switch {
	case names != "" && count != "":
		return spec, 0, fmt.Errorf("annotations %s and %s both declare the shards: keep one",
			v1alpha1.AnnotationShards, v1alpha1.AnnotationShardCount)
	case names != "":
		spec.Shards.Names = strings.Split(names, ",")
		for i, s := range spec.Shards.Names {
			if spec.Shards.Names[i] = strings.TrimSpace(s); spec.Shards.Names[i] == "" {
				return spec, 0, fmt.Errorf("annotation %s has an empty shard name at position %d: list the names separated by single commas",
					v1alpha1.AnnotationShards, i+1)
			}
		}
		n = len(spec.Shards.Names)
	case count != "":
		c, err := strconv.Atoi(count)
		if err != nil || c < 1 {
			return spec, 0, fmt.Errorf("annotation %s=%q is not a positive count", v1alpha1.AnnotationShardCount, count)
		}
		spec.Shards.Prefix = ann[v1alpha1.AnnotationShardPrefix]
		spec.Shards.Count = ptr.To(int32(c))
		n = c
	default:
		return spec, 0, fmt.Errorf("annotation %s (shard names, comma-separated) or %s (a number of shards) is required",
			v1alpha1.AnnotationShards, v1alpha1.AnnotationShardCount)
	}
	require := false
	if v := ann[v1alpha1.AnnotationRequire]; v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return spec, 0, fmt.Errorf("annotation %s=%q is not true or false", v1alpha1.AnnotationRequire, v)
		}
		require = b
	}
	if require || ann[v1alpha1.AnnotationRule] != "" {
		spec.Acceptance = &v1alpha1.AcceptanceCriterion{RequireResults: require, Rule: ann[v1alpha1.AnnotationRule]}
	}
	return spec, n, nil
}

// shardsAnnotation is the annotation that declared the shards.
func shardsAnnotation(ann map[string]string) string {
	if ann[v1alpha1.AnnotationShards] != "" {
		return v1alpha1.AnnotationShards
	}
	return v1alpha1.AnnotationShardCount
}

// checkMapping refuses a declared account whose mapping is not a partition, by the rules
// the account itself is checked by (account.Compile): of a short form, only its shard
// list can be at fault (a name given twice).
func checkMapping(namespace string, ann map[string]string, spec *v1alpha1.BatchAccountSpec) error {
	m := account.Compile(namespace, spec)
	if len(m.Problems) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(m.Problems))
	for _, p := range m.Problems {
		msgs = append(msgs, p.Message)
	}
	return fmt.Errorf("annotation %s: %s", shardsAnnotation(ann), strings.Join(msgs, "; "))
}
