// Package shortform reads the short form: annotations on a Job, JobSet or TrainJob that
// declare its account (the input and model revisions, the shards, the acceptance
// criterion), so that a team need not write a BatchAccount. Each kind builds its
// assignments (pkg/kinds/*, Kind.ShortForm); the annotations every kind shares are read
// here, once.
package shortform

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// annotations are the annotations of the short form. Any one of them declares one, so
// that a short form missing its input revision is reported, not ignored.
var annotations = []string{
	v1alpha1.AnnotationInputRev, v1alpha1.AnnotationModelRev, v1alpha1.AnnotationShards,
	v1alpha1.AnnotationShardCount, v1alpha1.AnnotationShardPrefix, v1alpha1.AnnotationReplicatedJob,
	v1alpha1.AnnotationRequire, v1alpha1.AnnotationRule,
}

// Declared reports whether annotations declare a short form: any of its annotations.
func Declared(ann map[string]string) bool {
	for _, k := range annotations {
		if _, ok := ann[k]; ok {
			return true
		}
	}
	return false
}

// Common reads the annotations every kind's short form has: the revisions, the shard
// population and the acceptance criterion. n is the number of shards declared.
func Common(ann map[string]string) (v1alpha1.BatchAccountSpec, int, error) {
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
		if _, ok := ann[v1alpha1.AnnotationShardPrefix]; ok {
			// A prefix names only counted shards: ignored, the shards would silently
			// not be named as their author wrote.
			return spec, 0, fmt.Errorf("annotation %s applies only with %s; with %s the shards are named as listed: remove one of them",
				v1alpha1.AnnotationShardPrefix, v1alpha1.AnnotationShardCount, v1alpha1.AnnotationShards)
		}
		spec.Shards.Names = strings.Split(names, ",")
		for i, s := range spec.Shards.Names {
			if spec.Shards.Names[i] = strings.TrimSpace(s); spec.Shards.Names[i] == "" {
				return spec, 0, fmt.Errorf("annotation %s has an empty shard name at position %d: list the names separated by single commas",
					v1alpha1.AnnotationShards, i+1)
			}
		}
		n = len(spec.Shards.Names)
	case count != "":
		// Parsed as int32, the type of spec.shards.count: a larger number must not wrap
		// around into a small count.
		c, err := strconv.ParseInt(count, 10, 32)
		if err != nil || c < 1 || c > v1alpha1.MaxShardCount {
			return spec, 0, fmt.Errorf("annotation %s=%q is not a count from 1 to %d", v1alpha1.AnnotationShardCount, count, v1alpha1.MaxShardCount)
		}
		spec.Shards.Prefix = ann[v1alpha1.AnnotationShardPrefix]
		spec.Shards.Count = ptr.To(int32(c))
		n = int(c)
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
	rule := ann[v1alpha1.AnnotationRule]
	if rule != "" && !require {
		// Results are read and judged only when required: a rule alone would never run.
		return spec, 0, fmt.Errorf("annotation %s applies only with %s: \"true\"; without it no result is read or judged",
			v1alpha1.AnnotationRule, v1alpha1.AnnotationRequire)
	}
	if require {
		spec.Acceptance = &v1alpha1.AcceptanceCriterion{RequireResults: true, Rule: rule}
	}
	return spec, n, nil
}

// ShardsAnnotation is the annotation that declared the shards, for messages.
func ShardsAnnotation(ann map[string]string) string {
	if ann[v1alpha1.AnnotationShards] != "" {
		return v1alpha1.AnnotationShards
	}
	return v1alpha1.AnnotationShardCount
}
