package relations

import (
	"context"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// TrackingRecheck is how soon a Job deleted deletedFor ago, before it terminated, is
// looked at again while pods of it carry the Job controller's tracking finalizer
// (TrackedPods): the Job controller takes it off a running pod without writing the Job,
// so no event says it did. Soon at first (the Job controller's first sync after the
// deletion takes it off), then a quarter of the time since the deletion, at most a
// minute: while the Job controller is down, the pods are not listed every few seconds
// until MaxHold.
func TrackingRecheck(deletedFor time.Duration) time.Duration {
	return min(max(deletedFor/4, 5*time.Second), time.Minute)
}

// StillTracked reports whether job, deleted before it terminated, still has a pod the Job
// controller tracks (TrackedPods, read with r) at now, and how soon to look again
// (TrackingRecheck). A read that fails is logged and taken for tracked: the Job is held,
// within its recorder's MaxHold, rather than the reconcile failing before that bound is
// looked at (a role without pods list would hold the Job for good).
func StillTracked(ctx context.Context, r client.Reader, job *batchv1.Job, now time.Time) (bool, time.Duration) {
	recheck := TrackingRecheck(now.Sub(job.DeletionTimestamp.Time))
	tracked, err := TrackedPods(ctx, r, job)
	if err != nil {
		log.FromContext(ctx).Error(err, "reading the pods of a Job deleted before it terminated; holding it as if the Job controller may still count them",
			"job", client.ObjectKeyFromObject(job))
		return true, recheck
	}
	return tracked, recheck
}

// CountedByJobController reports whether the built-in Job controller counts job's pods:
// not one another controller manages (spec.managedBy). A Job MultiKueue dispatched is
// managed by MultiKueue on the manager; the copy it runs as on a worker (or the JobSet
// whose children run there) has managedBy cleared, and the worker's Job controller
// counts it.
func CountedByJobController(job *batchv1.Job) bool {
	return job.Spec.ManagedBy == nil || *job.Spec.ManagedBy == batchv1.JobControllerName
}

// JobPodSelector selects job's pods as the Job controller does: by its spec.selector, or
// the controller-uid label when it has none (a Job not read from the API server). A Job
// with manualSelector gives its pods neither the controller-uid nor the job-name label:
// only its own selector finds them. The selector may match other Jobs' pods too; their
// owner tells them apart (IndexPodJob).
func JobPodSelector(job *batchv1.Job) (labels.Selector, error) {
	if job.Spec.Selector == nil {
		return labels.SelectorFromSet(labels.Set{batchv1.ControllerUidLabel: string(job.UID)}), nil
	}
	return metav1.LabelSelectorAsSelector(job.Spec.Selector)
}

// TrackedPods reports whether a pod job controls still carries the Job controller's
// tracking finalizer (batchv1.JobTrackingFinalizer), as r (the API server: a cache may
// lag, or hold none of the pods) lists their metadata, selected as the Job controller
// selects them. For a Job being deleted this is whether the Job controller may still
// count a success: the first sync that sees the deletion writes the successes among the
// pods it tracks to the Job's status, then takes the finalizer off every pod of it,
// running or not (canRemoveFinalizer); once none carries it, the Job's counts are final.
// An orphan (a deletion with propagationPolicy Orphan) does not count: a Job being
// deleted adopts no pod, and the Job controller takes an orphan's finalizer off
// uncounted.
func TrackedPods(ctx context.Context, r client.Reader, job *batchv1.Job) (bool, error) {
	selector, err := JobPodSelector(job)
	if err != nil {
		return false, err
	}
	list := PodMetadataList()
	limit := int64(trackedPodsPage)
	for {
		err := r.List(ctx, list, client.InNamespace(job.Namespace), client.MatchingLabelsSelector{Selector: selector},
			client.Limit(limit), client.Continue(list.Continue))
		if apierrors.IsResourceExpired(err) && list.Continue != "" {
			// The continue token outlived the API server's compaction (410 Gone). As
			// client-go's pager does, read the rest as one whole list from the start:
			// the pages read so far held no tracked pod, and paging again could
			// expire again.
			list.Continue, limit = "", 0
			continue
		}
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			p := &list.Items[i]
			if owner := metav1.GetControllerOfNoCopy(p); owner != nil && owner.UID == job.UID && slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
				return true, nil
			}
		}
		if list.Continue == "" {
			return false, nil
		}
	}
}

// trackedPodsPage is how many pods' metadata one list of TrackedPods reads: a Job of
// thousands of pods is read in pages, as client-go's pager does, not in one response the
// API server and the controller hold whole.
const trackedPodsPage = 500
