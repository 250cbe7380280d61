package workerrole

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"gomodules.xyz/jsonpatch/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/controller"
	"batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/webhook"
)

// JobMutatePath is the path of the worker role's Job webhook (JobHolder), configured by
// config/worker/worker_job_webhook.yaml.
const JobMutatePath = "/mutate-worker-batch-v1-job"

// partial is an empty object of gvk in the form the worker role reads owners:
// metadata only.
func partial(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(gvk)
	return o
}

// errOwnerNotRead is dispatchedChild's error when the owner a Job's controller
// reference names is not in the cache: gone, or not seen yet.
var errOwnerNotRead = errors.New("the owner is not in the worker role's cache")

// getOwner reads the metadata of the owner named ref (of gvk) in namespace, when it is
// the very object ref names (same UID); nil when another object has its name, or its API
// is not served on this worker (JobSet, Trainer not installed). errOwnerNotRead when
// there is none of its name in the cache.
func getOwner(ctx context.Context, r client.Reader, namespace string, gvk schema.GroupVersionKind, ref *metav1.OwnerReference) (*metav1.PartialObjectMetadata, error) {
	o := partial(gvk)
	err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, o)
	switch {
	case apierrors.IsNotFound(err):
		return nil, errOwnerNotRead
	case apimeta.IsNoMatchError(err):
		return nil, nil
	case err != nil:
		return nil, err
	case o.UID != ref.UID:
		return nil, nil
	}
	return o, nil
}

// dispatchedChild is what the child Job job of a JobSet was dispatched for, when its
// controlling JobSet (by UID) is a copy MultiKueue made (multikueue.CopiedFor), or is
// rendered by a TrainJob (by UID) that is; false for any other Job, and for one created
// after its JobSet's deletion started (createdBefore). Kueue v0.17 copies
// the JobSet (or the TrainJob) onto the worker with both of MultiKueue's marks; the JobSet
// controller does not put them on the child Jobs. errOwnerNotRead when the JobSet, or the
// TrainJob controlling it, is not in the cache: the webhooks cannot judge the Job or
// its pod then (the JobSet controller creates a child, the Job controller a pod, only for
// an owner that exists), while a Job recorded later may outlive its JobSet.
func dispatchedChild(ctx context.Context, r client.Reader, job metav1.Object) (multikueue.Dispatch, bool, error) {
	name, uid, ok := jobset.Controlling(job)
	if !ok || !jobset.IsChild(job) {
		return multikueue.Dispatch{}, false, nil
	}
	js, err := getOwner(ctx, r, job.GetNamespace(), jobsetapi.SchemeGroupVersion.WithKind(jobset.KindJobSet),
		&metav1.OwnerReference{Name: name, UID: uid})
	if err != nil || js == nil {
		return multikueue.Dispatch{}, false, err
	}
	if !createdBefore(job, js.DeletionTimestamp) {
		// The JobSet controller creates no child for a JobSet being deleted: a Job
		// claiming it since is a namespace user's (one who keeps the copy Kueue deleted
		// with a finalizer of their own), which the manager would follow as its newest
		// child.
		return multikueue.Dispatch{}, false, nil
	}
	d := multikueue.Dispatch{Workload: multikueue.CopiedFor(js), JobSet: js.Name}
	if owner := metav1.GetControllerOfNoCopy(js); owner != nil && jobset.IsTrainJob(owner) {
		tj, err := getOwner(ctx, r, job.GetNamespace(), trainer.GroupVersion.WithKind(trainer.TrainJobKind), owner)
		if err != nil {
			return multikueue.Dispatch{}, false, err
		}
		if tj != nil {
			d.TrainJob = tj.Name
			if d.Workload == "" {
				d.Workload = multikueue.CopiedFor(tj)
			}
		}
	}
	return d, d.Workload != "", nil
}

// createdBefore reports whether job was created no later than deleted, the start of its
// JobSet's deletion (nil: none started), to the second the API server keeps. A Job being
// admitted has no creation time yet: it is created now.
func createdBefore(job metav1.Object, deleted *metav1.Time) bool {
	if deleted == nil {
		return true
	}
	created := job.GetCreationTimestamp()
	return !created.IsZero() && !created.After(deleted.Time)
}

// AnnotationTrainJob on a held child Job of a dispatched JobSet names the TrainJob that
// rendered its JobSet, beside v1alpha1.AnnotationWorkload: both written by JobHolder at
// the Job's creation, so that the Job is still attributed once Kueue deleted its JobSet.
const AnnotationTrainJob = "batchledger.dev/trainjob"

// attribution is what job was dispatched for: as JobHolder wrote it on the Job held
// since its creation (its JobSet may be gone: Kueue deletes the JobSet, and the garbage
// collector its Jobs, once the Workload finished), else from its owners (dispatchedChild).
func attribution(ctx context.Context, r client.Reader, job *batchv1.Job) (multikueue.Dispatch, bool, error) {
	if wl := job.Annotations[v1alpha1.AnnotationWorkload]; wl != "" && holdsJob(job) && jobset.IsChild(job) {
		return multikueue.Dispatch{Workload: wl, JobSet: job.Labels[jobsetapi.JobSetNameKey], TrainJob: job.Annotations[AnnotationTrainJob]}, true, nil
	}
	d, ok, err := dispatchedChild(ctx, r, job)
	if errors.Is(err, errOwnerNotRead) {
		return multikueue.Dispatch{}, false, nil // its JobSet is gone, and it was not held
	}
	return d, ok, err
}

// JobRecorder records each child Job of a dispatched JobSet in its WorkerJob (those in
// batchledger's scope, or held) as the Job changes (only when what the record says
// changed), and removes the worker role's
// finalizer (v1alpha1.WorkerJobFinalizer, JobHolder) once the record holds the Job's last
// status: it is terminal, or being deleted with every success of its pods counted
// (countingSuccess); never later than MaxHold after its deletion (or the recorder's
// start, when later).
type JobRecorder struct {
	client.Client
	// APIReader reads from the API server the pods of a Job deleted before it terminated
	// (relations.TrackedPods): the worker role caches only the results scope's pods, and
	// its cache may still show running a pod that has just succeeded. nil: the recorder
	// waits only for the successes its cache shows.
	APIReader client.Reader
	// MaxHold bounds how long a deleted Job is kept for its record, from its deletion or
	// the recorder's start when later (the pods' MaxHold; 0:
	// controller.DefaultMaxResultHold, as for the pods, never no hold at all).
	MaxHold time.Duration
	// NamespaceGrace bounds, once its namespace is being deleted, how long a deleted Job
	// whose record cannot be written is kept, from the latest of the namespace's deletion,
	// the Job's and the recorder's start (the pods' NamespaceGrace; 0:
	// controller.DefaultNamespaceGrace).
	NamespaceGrace time.Duration
	// Now is the clock; tests may replace it.
	Now func() time.Time

	// started is when the recorder first reconciled: a record is given MaxHold, and in
	// a namespace being deleted NamespaceGrace, from then too, as the pods' releaser
	// gives them, so that the worker role back from an outage does not let go at once
	// what it could still record.
	started   time.Time
	startOnce sync.Once
}

// Reconcile records a Job and lets it go when its last status is recorded.
func (r *JobRecorder) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.startOnce.Do(func() {
		if r.started.IsZero() {
			r.started = r.now()
		}
	})
	var job batchv1.Job
	if err := r.Get(ctx, req.NamespacedName, &job); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !scoped(&job) && !holdsJob(&job) {
		// No account named its JobSet on the manager: nothing to record, as for pods
		// outside the scope.
		return ctrl.Result{}, nil
	}
	d, ok, err := attribution(ctx, r, &job)
	var recordErr error
	unrecordable := false
	switch {
	case err != nil:
		recordErr = err
	case ok:
		recordErr = r.record(ctx, &job, d)
		if apierrors.HasStatusCause(recordErr, corev1.NamespaceTerminatingCause) {
			// No record can be created in a namespace being deleted, which takes the
			// worker's records along: holding the Job would keep the namespace from going
			// for MaxHold, for a record never written (the pods' hold allows a few
			// seconds there).
			ctrl.LoggerFrom(ctx).Info("releasing a Job unrecorded: its namespace is being deleted")
			recordErr, unrecordable = nil, true
		}
	}
	if !holdsJob(&job) {
		return ctrl.Result{}, recordErr
	}
	// A Job deleted before it terminated is released once recorded, but not while the Job
	// controller may still count a success of it: gone, the Job would never record it.
	counting, countRecheck := false, time.Duration(0)
	if recordErr == nil && ok && !unrecordable {
		if counting, countRecheck, err = r.countingSuccess(ctx, &job); err != nil {
			return ctrl.Result{}, err
		}
	}
	done := recordErr == nil && !counting && (!ok || unrecordable || terminal(&job) || job.DeletionTimestamp != nil)
	if !done && job.DeletionTimestamp != nil {
		nsDeleted, err := controller.NamespaceDeleted(ctx, r.Client, job.Namespace)
		if err != nil {
			return ctrl.Result{}, errors.Join(recordErr, err)
		}
		if nsDeleted != nil {
			// A record that cannot be written holds a deleted Job of a namespace being
			// deleted no longer than NamespaceGrace from the latest of the deletion's
			// start, the Job's own deletion and the recorder's start, as the pods, so
			// that the namespace is never held. The record is tried again then, not
			// after the queue's backoff, which after many failures is minutes.
			from := nsDeleted.Time
			for _, t := range []time.Time{job.DeletionTimestamp.Time, r.started} {
				if t.After(from) {
					from = t
				}
			}
			if left := cmp.Or(r.NamespaceGrace, controller.DefaultNamespaceGrace) - r.now().Sub(from); left > 0 {
				if recordErr != nil {
					ctrl.LoggerFrom(ctx).Error(recordErr, "recording a Job in a namespace being deleted")
				}
				return ctrl.Result{RequeueAfter: soonest(left, countRecheck)}, nil
			}
			ctrl.LoggerFrom(ctx).Info("releasing a deleted Job unrecorded: its namespace is being deleted", "error", recordErr)
		} else {
			// A record that cannot be written holds a deleted Job no longer than MaxHold
			// from its deletion or, when later, the recorder's start: a Job deleted while
			// the worker role was down longer is what the hold is for, and a record that
			// fails once as it comes back is tried again, as the manager's Jobs are.
			from := job.DeletionTimestamp.Time
			if r.started.After(from) {
				from = r.started
			}
			left := cmp.Or(r.MaxHold, controller.DefaultMaxResultHold) - r.now().Sub(from)
			if left > 0 {
				return ctrl.Result{RequeueAfter: soonest(left, countRecheck)}, recordErr
			}
			ctrl.LoggerFrom(ctx).Info("releasing a deleted Job unrecorded: MaxHold passed", "error", recordErr)
		}
		done = true
	}
	if !done {
		return ctrl.Result{}, recordErr
	}
	return ctrl.Result{}, errors.Join(recordErr, releaseJob(ctx, r.Client, &job))
}

// countingSuccess reports whether the Job controller may still count a success of job,
// deleted before it terminated (as controller.JobRecorder's hold, on the manager), and
// how soon to look again (0: on the Job's next change). The worker's Job controller
// counts the worker's copy: MultiKueue clears the managedBy of the JobSet it copies here,
// and the JobSet controller creates the children (relations.CountedByJobController).
//
// With an APIReader, it may while a pod the Job controls carries the tracking finalizer
// (relations.TrackedPods): the first sync that sees the deletion counts the successes
// among those pods, then takes the finalizer off all of them, running or not, and no
// Job write says it did. The cache would miss a pod that succeeded a moment ago and
// still shows Running, and holds no pod outside the results scope. Without one, the Job
// is held only for a success the cache shows: an index pod Succeeded with the tracking
// finalizer still on and its index not in completedIndexes. Either way it is held for a
// non-indexed success in uncountedTerminatedPods, whose count writes the Job.
func (r *JobRecorder) countingSuccess(ctx context.Context, job *batchv1.Job) (bool, time.Duration, error) {
	if job.DeletionTimestamp == nil || terminal(job) {
		return false, 0, nil
	}
	if r.APIReader != nil && relations.CountedByJobController(job) {
		if tracked, recheck := relations.StillTracked(ctx, r.APIReader, job, r.now()); tracked {
			return true, recheck, nil
		}
		return controller.UncountedSuccess(job, nil), 0, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}, client.UnsafeDisableDeepCopy); err != nil {
		return false, 0, err
	}
	return controller.UncountedSuccess(job, pods.Items), 0, nil
}

// soonest is the sooner of two requeue delays, 0 meaning none.
func soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// record creates or updates job's WorkerJob when what it says changed.
func (r *JobRecorder) record(ctx context.Context, job *batchv1.Job, d multikueue.Dispatch) error {
	want := multikueue.NewJobRecord(job, d)
	var have v1alpha1.WorkerJob
	switch err := r.Get(ctx, client.ObjectKeyFromObject(want), &have); {
	case apierrors.IsNotFound(err):
		// AlreadyExists is an error: the record was created so shortly before (the Job's
		// previous change) that the cache does not show it yet, and it may say less than
		// want. Taken for written, a Job that ended meanwhile would be let go with its
		// end never recorded; retried, the cache shows the record to update.
		return r.Create(ctx, want)
	case err != nil:
		return err
	case multikueue.SameJobRecord(&have, want):
		return nil
	}
	want.ObjectMeta = have.ObjectMeta
	return r.Update(ctx, want)
}

// releaseJob removes the worker role's finalizer from job, pinned to the resourceVersion
// read (an optimistic lock), so that a concurrent change is read again: the copy
// recorded may predate the Job controller's last count, written before it took off the
// tracking finalizers that countingSuccess found gone.
func releaseJob(ctx context.Context, c client.Client, job *batchv1.Job) error {
	keep := slices.DeleteFunc(slices.Clone(job.Finalizers), func(f string) bool { return f == v1alpha1.WorkerJobFinalizer })
	patch := client.MergeFromWithOptions(job.DeepCopy(), client.MergeFromWithOptimisticLock{})
	job.Finalizers = keep
	return client.IgnoreNotFound(c.Patch(ctx, job, patch))
}

func (r *JobRecorder) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// terminal reports whether the Job recorded Complete or Failed.
func terminal(job *batchv1.Job) bool {
	return multikueue.NewJobRecord(job, multikueue.Dispatch{}).Terminal != ""
}

// scoped reports whether an account on the manager named the JobSet of job: the scope
// label on the Job (JobSet copies it from the stamped Job template, or JobHolder put it
// there) or on its pod template (a child of a JobSet created before its account, admitted
// while JobHolder was down).
func scoped(job *batchv1.Job) bool {
	_, labelled := job.Labels[v1alpha1.LabelScope]
	return labelled || job.Spec.Template.Labels[v1alpha1.LabelScope] != ""
}

// holdsJob reports whether a Job carries the worker role's finalizer.
func holdsJob(o metav1.Object) bool {
	return slices.Contains(o.GetFinalizers(), v1alpha1.WorkerJobFinalizer)
}

// SetupWithManager watches the JobSets' child Jobs and the Jobs it holds (childOrHeld),
// and the start of a namespace's deletion, which bounds the hold of its Jobs
// (worker-job-record); and the WorkerJobs' retention (worker-job-retention, given
// retention).
func (r *JobRecorder) SetupWithManager(mgr ctrl.Manager, expire reconcile.Func) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&batchv1.Job{}, builder.WithPredicates(childOrHeld))
	if err := controller.WatchNamespaceDeletions(b, r.heldJobsOfNamespace).Named("worker-job-record").Complete(r); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.WorkerJob{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("worker-job-retention").
		Complete(expire)
}

// childOrHeld passes the events of JobSets' child Jobs, and of any Job the worker role
// holds: a held Job whose JobSet labels or owner reference were changed is no child any
// more (jobset.IsChild), and were its events dropped, nothing would ever let it go
// (Reconcile releases it: no record names such a Job).
var childOrHeld = predicate.NewPredicateFuncs(func(o client.Object) bool { return jobset.IsChild(o) || holdsJob(o) })

// heldJobsOfNamespace wakes the Jobs the worker role holds in a namespace (its
// deletion started: WatchNamespaceDeletions).
func (r *JobRecorder) heldJobsOfNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	return controller.HeldInNamespace(r.Client, func() client.ObjectList { return &batchv1.JobList{} },
		func(o client.Object) bool { return holdsJob(o) })(ctx, ns)
}

// JobHolder is the worker role's Job webhook (JobMutatePath; config/worker): it puts
// v1alpha1.WorkerJobFinalizer, and what the Job was dispatched for
// (v1alpha1.AnnotationWorkload, AnnotationTrainJob), on a new child Job of a JobSet
// MultiKueue dispatched here, so that Kueue's deletion of the JobSet once its Workload
// finished waits until the Job's last status is recorded, also while the worker role is
// down. It sees two sets of Jobs. Those carrying batchledger.dev/scope, which the manager
// stamps on the Job templates of a JobSet an account names at its creation: a Job of them
// it cannot judge is refused (failurePolicy Fail), for the JobSet controller to create it
// again. And the JobSet children without it (failurePolicy Ignore): the children of a
// JobSet created before its account, whose Job templates the manager cannot stamp (JobSet
// lets a suspended JobSet change only its pod templates), so only their pod template
// carries the scope; a dispatched one gets the scope on its own labels too, as the
// manager's account stamps each child there. Any other Job is admitted unchanged.
type JobHolder struct {
	// Reader reads JobSets' and TrainJobs' metadata (the manager's cache).
	Reader client.Reader
}

var _ admission.Handler = JobHolder{}

// SetupWithManager registers the handler on the manager's webhook server.
func (h JobHolder) SetupWithManager(mgr ctrl.Manager) error {
	mgr.GetWebhookServer().Register(JobMutatePath, &admission.Webhook{Handler: h})
	return nil
}

// scopedJob is the part of a new Job JobHolder reads: its metadata, and its pod
// template's labels.
type scopedJob struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels,omitempty"`
			} `json:"metadata"`
		} `json:"template"`
	} `json:"spec"`
}

// Handle adds the finalizer to a dispatched JobSet's new child Job.
func (h JobHolder) Handle(ctx context.Context, req admission.Request) admission.Response {
	var job scopedJob
	if err := json.Unmarshal(req.Object.Raw, &job); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	meta := job.ObjectMeta
	meta.Namespace = req.Namespace
	_, labelled := meta.Labels[v1alpha1.LabelScope]
	podScope := job.Spec.Template.Metadata.Labels[v1alpha1.LabelScope]
	if !labelled && podScope == "" {
		// A child of a JobSet no account named: most of what the second set brings.
		return admission.Allowed("")
	}
	d, ok, err := dispatchedChild(ctx, h.Reader, &meta)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, err)
	}
	// The attribution is this webhook's alone: one the Job's creator wrote is replaced,
	// or removed (config/worker's worker-job-workload policy keeps it unchanged later).
	annotations := map[string]string{}
	for k, v := range meta.Annotations {
		if k != v1alpha1.AnnotationWorkload && k != AnnotationTrainJob {
			annotations[k] = v
		}
	}
	if !ok {
		if len(annotations) == len(meta.Annotations) {
			return admission.Allowed("")
		}
		return admission.Patched("", jsonpatch.NewOperation("replace", "/metadata/annotations", annotations))
	}
	annotations[v1alpha1.AnnotationWorkload] = d.Workload
	if d.TrainJob != "" {
		annotations[AnnotationTrainJob] = d.TrainJob
	}
	ops := []jsonpatch.JsonPatchOperation{
		jsonpatch.NewOperation("add", "/metadata/annotations", annotations),
		jsonpatch.NewOperation("add", "/metadata/finalizers", append(slices.DeleteFunc(slices.Clone(meta.Finalizers),
			func(f string) bool { return f == v1alpha1.WorkerJobFinalizer }), v1alpha1.WorkerJobFinalizer)),
	}
	if !labelled {
		// A JobSet child always has labels (JobSet's own).
		ops = append(ops, jsonpatch.NewOperation("add", webhook.LabelPath("", v1alpha1.LabelScope), podScope))
	}
	return admission.Patched("", ops...)
}
