package repair

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/worker"
)

// Labels a repair Job keeps from its original so that Kueue queues it the same way.
const (
	// QueueLabel names the Kueue LocalQueue a Job is submitted to.
	QueueLabel = "kueue.x-k8s.io/queue-name"
	// PriorityClassLabel names the Kueue WorkloadPriorityClass of a Job.
	PriorityClassLabel = "kueue.x-k8s.io/priority-class"
)

// Environment of a repair Job's containers. The pod template is the original's, whose
// worker maps its completion index onto its shard; in a repair Job index k stands for
// another original index, and these variables say which. A container that declares its
// shards the way pkg/worker reads them (BATCH_SHARDS, or BATCH_SHARD_PREFIX for compact
// populations) gets BATCH_SHARDS rewritten to the repaired shards in index order, so that
// such a worker processes the right shard without knowing about repairs.
const (
	// EnvRepairOf is the original Job's name.
	EnvRepairOf = "BATCHLEDGER_REPAIR_OF"
	// EnvOriginalIndexes lists the original completion index of each repair index, in
	// order: the k-th entry is what index k replaces. Ascending lists use the Job
	// controller's interval format ("3", "3-5,9").
	EnvOriginalIndexes = "BATCHLEDGER_ORIGINAL_INDEXES"
)

// generatedPodLabels are set on a Job's pod template by the Job controller (selector
// and identity of the original Job); a repair Job gets its own.
var generatedPodLabels = []string{
	batchv1.ControllerUidLabel, batchv1.JobNameLabel, "controller-uid", "job-name", batchv1.JobCompletionIndexAnnotation,
}

// templateSource is a repair Job of the deleted Job original, the newest by name, whose
// pod template is a copy of the original's.
func templateSource(jobs map[string]*batchv1.Job, original string) *batchv1.Job {
	var best *batchv1.Job
	for _, j := range jobs {
		if j.Annotations[v1alpha1.AnnotationRepairOf] == original && (best == nil || j.Name > best.Name) {
			best = j
		}
	}
	return best
}

// freeRepairName is "<job>-repair-<n>" with the first n no Job and no assignment uses: a
// name an assignment still names (its Job deleted) would join the new Job to the old
// identity's entry.
func freeRepairName(job string, taken map[string]bool) (string, error) {
	for n := 1; ; n++ {
		name := fmt.Sprintf("%s-repair-%d", job, n)
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return "", fmt.Errorf("cannot name a repair Job of Job %q: %q is not a valid Job name (%s)", job, name, strings.Join(errs, "; "))
		}
		if !taken[name] {
			return name, nil
		}
	}
}

func shardNamesOf(m *account.Mapping, ordinals []int) []string {
	names := make([]string, len(ordinals))
	for i, o := range ordinals {
		names[i] = m.Shards.Name(o)
	}
	return names
}

// describeList writes indexes in the interval format when ascending, else as a list.
func describeList(indexes []int) string {
	if slices.IsSorted(indexes) {
		return indexset.Of(indexes...).String()
	}
	s := make([]string, len(indexes))
	for i, x := range indexes {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// repairJob builds the follow-up Job: the original's pod template (as queued, without the
// Job controller's generated labels) over len(indexes) indexes, at most its parallelism,
// its failure handling, its Kueue queue and priority, created suspended.
//
// origName is the Job whose identities are repaired; orig is the Job whose template is
// copied: origName itself, or an earlier repair Job of it when it was deleted.
func repairJob(accountName, origName string, orig *batchv1.Job, queued *corev1.PodTemplateSpec, name string, indexes []int, shardNames []string, shards string) *batchv1.Job {
	tmpl := orig.Spec.Template.DeepCopy()
	if queued != nil {
		// What Kueue restores when it suspends a Job: the fields admission injects.
		tmpl.Labels = maps.Clone(queued.Labels)
		tmpl.Annotations = maps.Clone(queued.Annotations)
		tmpl.Spec.NodeSelector = maps.Clone(queued.Spec.NodeSelector)
		tmpl.Spec.Tolerations = slices.Clone(queued.Spec.Tolerations)
		tmpl.Spec.SchedulingGates = slices.Clone(queued.Spec.SchedulingGates)
	}
	for _, l := range generatedPodLabels {
		delete(tmpl.Labels, l)
		delete(tmpl.Annotations, l)
	}
	if len(tmpl.Labels) == 0 {
		tmpl.Labels = nil
	}
	if len(tmpl.Annotations) == 0 {
		tmpl.Annotations = nil
	}
	for i := range tmpl.Spec.Containers {
		c := &tmpl.Spec.Containers[i]
		declaresShards := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == worker.EnvShards || e.Name == worker.EnvShardPrefix })
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == EnvRepairOf || e.Name == EnvOriginalIndexes || (declaresShards && e.Name == worker.EnvShards)
		})
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvRepairOf, Value: origName}, corev1.EnvVar{Name: EnvOriginalIndexes, Value: describeList(indexes)})
		if declaresShards {
			// An explicit list takes precedence over the compact form in pkg/worker.
			c.Env = append(c.Env, corev1.EnvVar{Name: worker.EnvShards, Value: strings.Join(shardNames, ",")})
		}
	}
	var labels map[string]string
	for _, l := range []string{QueueLabel, PriorityClassLabel} {
		if v, ok := orig.Labels[l]; ok {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[l] = v
		}
	}
	k := int32(len(indexes))
	// At most the original's pods at once: its parallelism is what its queue's quota
	// admits, and Kueue admits all of a Job's parallel pods together.
	parallelism := k
	if p := orig.Spec.Parallelism; p != nil && *p > 0 && *p < k {
		parallelism = *p
	}
	spec := batchv1.JobSpec{
		Completions:    ptr.To(k),
		Parallelism:    ptr.To(parallelism),
		CompletionMode: ptr.To(batchv1.IndexedCompletion),
		// Suspended until the account names it, so that no pod runs unaccounted; Kueue
		// unsuspends a queued Job when it admits it, repair unsuspends the others.
		Suspend: ptr.To(true),
		// The original's failure handling. Its successPolicy names original indexes and
		// is dropped: a repair Job must run every one of its indexes. So is
		// ttlSecondsAfterFinished: the account keeps coverage only of Jobs that exist.
		BackoffLimit:          orig.Spec.BackoffLimit,
		BackoffLimitPerIndex:  orig.Spec.BackoffLimitPerIndex,
		PodFailurePolicy:      orig.Spec.PodFailurePolicy.DeepCopy(),
		ActiveDeadlineSeconds: orig.Spec.ActiveDeadlineSeconds,
		PodReplacementPolicy:  orig.Spec.PodReplacementPolicy,
		Template:              *tmpl,
	}
	if mfi := orig.Spec.MaxFailedIndexes; mfi != nil {
		spec.MaxFailedIndexes = ptr.To(min(*mfi, k))
	}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: orig.Namespace, Labels: labels,
			Annotations: map[string]string{
				v1alpha1.AnnotationRepairFor:    accountName,
				v1alpha1.AnnotationRepairOf:     origName,
				v1alpha1.AnnotationRepairShards: shards,
			},
		},
		Spec: spec,
	}
}
