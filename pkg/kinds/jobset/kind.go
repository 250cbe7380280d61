// Package jobset is the JobSet (jobset.x-k8s.io) as a kind of target: a target
// {jobSet: NAME, replicatedJob: RJ, jobIndex: N} names child Job N of replicatedJob RJ, of
// every restart attempt; each restart's child is a new identity. Kinds that render a
// JobSet (pkg/kinds/trainjob) build on the functions here.
package jobset

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetconstants "sigs.k8s.io/jobset/pkg/constants"
	"sigs.k8s.io/jobset/pkg/util/placement"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/shortform"
)

// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=list;watch;patch

// KindJobSet is JobSet's Kubernetes kind, as owner references name it.
const KindJobSet = "JobSet"

// LabelRestartAttempt is the label JobSet puts on its child Jobs with the restart attempt
// that created them (JobSet keeps it with its controller's constants, not in its API).
const LabelRestartAttempt = jobsetconstants.RestartsKey

// Kind is the JobSet kind of target.
type Kind struct{}

var (
	_ kinds.Owner          = Kind{}
	_ kinds.Controller     = Kind{}
	_ kinds.JobSetRenderer = Kind{}
	_ kinds.Dispatcher     = Kind{}
)

// Terminal implements kinds.Owner.
func (Kind) Terminal(owner client.Object) string {
	if js, ok := owner.(*jobsetapi.JobSet); ok {
		return Terminal(js)
	}
	return ""
}

// ChildSelector implements kinds.Owner: the JobSet name label JobSet puts on every child.
func (Kind) ChildSelector(name string) map[string]string {
	return map[string]string{jobsetapi.JobSetNameKey: name}
}

// Name implements kinds.Kind.
func (Kind) Name() string { return v1alpha1.TargetKindJobSet }

// Object implements kinds.Kind.
func (Kind) Object() schema.GroupVersionKind {
	return jobsetapi.SchemeGroupVersion.WithKind(KindJobSet)
}

// OptionalAPI implements kinds.Kind: JobSet's CRDs may not be installed.
func (Kind) OptionalAPI() bool { return true }

// NewObject implements kinds.Kind.
func (Kind) NewObject() client.Object { return &jobsetapi.JobSet{} }

// JobSetOwner implements kinds.JobSetRenderer: a JobSet target names the JobSet itself.
func (Kind) JobSetOwner(js metav1.Object) (string, bool) { return js.GetName(), true }

// JobKeys implements kinds.Kind: a child Job answers to the JobSet that controls it.
func (Kind) JobKeys(job metav1.Object) []kinds.IndexKey {
	if !IsChild(job) {
		return nil
	}
	return []kinds.IndexKey{kinds.Key(v1alpha1.TargetKindJobSet, job.GetLabels()[jobsetapi.JobSetNameKey])}
}

// PodTarget implements kinds.Kind through PodChild.
func (Kind) PodTarget(job string, labels map[string]string) (v1alpha1.TargetRef, bool) {
	return PodChild(job, labels)
}

// NamesJob implements kinds.Kind: job is a child the target means, of any restart
// attempt (IsChildOf).
func (Kind) NamesJob(ref v1alpha1.TargetRef, job metav1.Object) bool {
	return IsChildOf(ref.JobSet, ref, job, "")
}

// CandidateLabels implements kinds.Kind through ChildLabels.
func (Kind) CandidateLabels(ref v1alpha1.TargetRef) map[string]string {
	return ChildLabels(ref.JobSet, ref)
}

// RestartAttempt implements kinds.Kind: the attempt JobSet labels a child with (0 when the
// label is absent or unreadable).
func (Kind) RestartAttempt(job metav1.Object) int32 {
	a, _ := strconv.Atoi(job.GetLabels()[LabelRestartAttempt])
	return int32(a)
}

// Resolve implements kinds.Kind: the CurrentChild among the Jobs with the target's
// ChildLabels, judged against the JobSet when it exists.
func (k Kind) Resolve(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (*batchv1.Job, int32, error) {
	return k.ResolveObserved(ctx, r, namespace, ref, kinds.Followed{})
}

// ResolveObserved is Resolve for an account that follows the identity observed (the zero
// value: none): of the Job Resolve finds, only one that MayBeFollowed observed.
func (Kind) ResolveObserved(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef, observed kinds.Followed) (*batchv1.Job, int32, error) {
	var js jobsetapi.JobSet
	var owner *jobsetapi.JobSet
	switch err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.JobSet}, &js, client.UnsafeDisableDeepCopy); {
	case err == nil:
		owner = &js
	case !apierrors.IsNotFound(err):
		return nil, 0, err
	}
	job, attempt, err := ResolveChild(ctx, r, namespace, ref.JobSet, ref, owner, time.Time{}, time.Time{})
	if err != nil || job == nil || owner == nil || MayBeFollowed(owner, job, observed) {
		return job, attempt, err
	}
	return nil, 0, nil
}

// MayBeFollowed reports whether job, a child CurrentChild picked of owner, may be the child
// a target following observed (the zero value: none) follows now. CurrentChild takes a
// child created up to kinds.ClockSkewAllowance after owner ended, since two clocks write
// the two times, and within that a namespace editor may delete a child and make a Job of
// its name, labels and controller reference. Owner ended (its terminal condition, or its
// deletion) restarts no more, so a child made about its end is of its last restart
// attempt (status.restarts, which JobSet raises before it makes that attempt's children)
// and, when the account follows another identity already, of a later attempt than that
// one's: JobSet makes each child once per attempt, and leaves an ended JobSet's alone.
// Any other child may be followed, as while owner ran.
func MayBeFollowed(owner *jobsetapi.JobSet, job *batchv1.Job, observed kinds.Followed) bool {
	var end time.Time
	switch c := terminalCondition(owner); {
	case c != nil:
		end = c.LastTransitionTime.Time
	case owner.DeletionTimestamp != nil:
		end = owner.DeletionTimestamp.Time
	default:
		return true
	}
	if job.UID == observed.UID || kinds.BeforeBeyondSkew(job.CreationTimestamp.Time, end) {
		return true
	}
	a := (Kind{}).RestartAttempt(job)
	return a <= owner.Status.Restarts && (observed.UID == "" || a > observed.RestartAttempt)
}

// ResolveChild is the CurrentChild, among the Jobs in namespace with ChildLabels(jobSet,
// ref), of the JobSet named jobSet (owner, when it was read; nil when it is gone). From
// the manager's cache the candidates are read without a copy: only their metadata is
// compared, and the Job returned is copied. A candidate created before since, or after
// until (unless they are zero), is no child: nothing above the JobSet creates a child
// before it exists itself, or after it ended, while anyone who may create Jobs can make
// one of the child's name then.
func ResolveChild(ctx context.Context, r client.Reader, namespace, jobSet string, ref v1alpha1.TargetRef, owner *jobsetapi.JobSet, since, until time.Time) (*batchv1.Job, int32, error) {
	var jobs batchv1.JobList
	if err := r.List(ctx, &jobs, client.InNamespace(namespace), client.MatchingLabels(ChildLabels(jobSet, ref)), client.UnsafeDisableDeepCopy); err != nil {
		return nil, 0, err
	}
	candidates := jobs.Items
	if !since.IsZero() || !until.IsZero() {
		// A copy of the list: its items are the cache's own.
		candidates = slices.DeleteFunc(slices.Clone(candidates), func(j batchv1.Job) bool {
			created := j.CreationTimestamp.Time
			return !since.IsZero() && created.Before(since) || !until.IsZero() && created.After(until)
		})
	}
	job, attempt := CurrentChild(jobSet, ref, owner, candidates)
	if job != nil {
		job = job.DeepCopy()
	}
	return job, attempt, nil
}

// Ended implements kinds.Kind through Ended.
func (Kind) Ended(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (string, error) {
	return Ended(ctx, r, namespace, ref)
}

// WorkloadOwner implements kinds.Kind through WorkloadOwner.
func (Kind) WorkloadOwner(ctx context.Context, r client.Reader, _ v1alpha1.TargetRef, job *batchv1.Job) (types.UID, error) {
	return WorkloadOwner(ctx, r, job)
}

// ChildWorkloadOwner implements kinds.Controller: a child of a JobSet (IsChild) runs
// under WorkloadOwner's Workload, also when a target names it by its Job name.
func (Kind) ChildWorkloadOwner(ctx context.Context, r client.Reader, job *batchv1.Job) (types.UID, bool, error) {
	if !IsChild(job) {
		return "", false, nil
	}
	uid, err := WorkloadOwner(ctx, r, job)
	return uid, true, err
}

// OwnerReplaced implements kinds.Controller: the JobSet controlling job (Controlling) was
// deleted and a JobSet of its name created after job, so CurrentChild, which takes only
// the children of the JobSet it reads, never follows job again. A JobSet read under
// another UID but created before job is no successor: the cache has not seen job's own
// JobSet yet.
func (Kind) OwnerReplaced(ctx context.Context, r client.Reader, job *batchv1.Job) (bool, error) {
	name, uid, ok := Controlling(job)
	if !ok {
		return false, nil
	}
	var js jobsetapi.JobSet
	switch err := r.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: name}, &js, client.UnsafeDisableDeepCopy); {
	case apierrors.IsNotFound(err), apimeta.IsNoMatchError(err):
		// Without JobSet's API served (an optional API) no JobSet replaced it either.
		return false, nil
	case err != nil:
		return false, err
	}
	return js.UID != uid && js.CreationTimestamp.After(job.CreationTimestamp.Time), nil
}

// WorkloadOwner is the UID of the object whose Kueue Workload the child Job job runs
// under: Kueue gives one Workload to the topmost object of a kind it manages, so that
// of the JobSet controlling job or, for a JobSet a TrainJob rendered, the TrainJob's
// (whichever way a target names the child: as a JobSet child or by its Job name).
func WorkloadOwner(ctx context.Context, r client.Reader, job *batchv1.Job) (types.UID, error) {
	name, uid, ok := Controlling(job)
	if !ok {
		return "", nil
	}
	var js jobsetapi.JobSet
	switch err := r.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: name}, &js, client.UnsafeDisableDeepCopy); {
	case apierrors.IsNotFound(err):
		return uid, nil
	case err != nil:
		return "", err
	}
	if child, ok := PodChild(job.Name, job.Labels); ok && js.UID == uid && Lacks(&js, child) != "" {
		// A Job claiming a child its JobSet never creates (replicatedJobs are immutable)
		// runs under no Workload of that JobSet: anyone who may create Jobs can write its
		// labels and a controller reference to a JobSet they can read.
		return "", nil
	}
	if ref := metav1.GetControllerOfNoCopy(&js); js.UID == uid && ref != nil && ref.Name == js.Name && IsTrainJob(ref) {
		return ref.UID, nil
	}
	return uid, nil
}

// IsTrainJob reports whether ref names a Kubeflow Trainer TrainJob, of any version of its
// API: an object is the same whichever served version names it, and the version an owner
// reference spells is whichever its writer's client used (Trainer v2.2.0 writes
// v1alpha1; a later Trainer serving another version may write that one).
func IsTrainJob(ref *metav1.OwnerReference) bool {
	if ref.Kind != trainer.TrainJobKind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == trainer.GroupVersion.Group
}

// StampScope implements kinds.Kind through StampReplicatedJob, on the JobSet itself.
func (Kind) StampScope(ctx context.Context, c client.Client, namespace string, ref v1alpha1.TargetRef, scope string) (int, error) {
	return StampReplicatedJob(ctx, c, namespace, ref.JobSet, ref.ReplicatedJob, scope)
}

// ShortForm implements kinds.Kind: over one replicatedJob (annotation
// batchledger.dev/replicated-job), child Job i's indexes 0..completions-1 onto shard
// ordinals i*completions onwards.
func (Kind) ShortForm(obj client.Object) (v1alpha1.BatchAccountSpec, error) {
	js, ok := obj.(*jobsetapi.JobSet)
	if !ok {
		return v1alpha1.BatchAccountSpec{}, fmt.Errorf("a JobSet short form is declared on a JobSet, not a %T", obj)
	}
	spec, n, err := shortform.Common(js.Annotations)
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
				shortform.ShardsAnnotation(js.Annotations), n, rjName, rj.Replicas, c, c*int(rj.Replicas), c*int(rj.Replicas))
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
	return spec, fmt.Errorf("annotation %s names replicatedJob %q, which the JobSet does not have (it has %s)",
		v1alpha1.AnnotationReplicatedJob, rjName, strings.Join(names, ", "))
}

// FinishedAt implements kinds.Kind: when the JobSet recorded Completed or Failed.
func (Kind) FinishedAt(obj client.Object) (time.Time, bool) {
	if js, ok := obj.(*jobsetapi.JobSet); ok {
		if c := terminalCondition(js); c != nil {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// CacheTransform implements kinds.Cached: of a JobSet batchledger reads all but the pod
// specs of its replicatedJobs' templates and its managed fields.
func (Kind) CacheTransform(obj any) (any, error) {
	if js, ok := obj.(*jobsetapi.JobSet); ok {
		js.ManagedFields = nil
		for i := range js.Spec.ReplicatedJobs {
			js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec = corev1.PodSpec{}
		}
	}
	return obj, nil
}

// DispatchedOwner implements kinds.Dispatcher: the JobSet, when MultiKueue dispatches it.
func (Kind) DispatchedOwner(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (client.Object, error) {
	var js jobsetapi.JobSet
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.JobSet}, &js, client.UnsafeDisableDeepCopy); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !Dispatched(&js) {
		return nil, nil
	}
	return &js, nil
}

// DispatchedOwnerRan implements kinds.Dispatcher: the JobSet is dispatched and runs, or
// ran (Ran).
func (Kind) DispatchedOwnerRan(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (bool, error) {
	var js jobsetapi.JobSet
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.JobSet}, &js, client.UnsafeDisableDeepCopy); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return Dispatched(&js) && Ran(&js), nil
}

// Ran reports whether js runs or ran: it is not suspended (Kueue unsuspends a JobSet it
// admitted), or, suspended again by a preemption, its status shows a restart, its end,
// or child Jobs that were active or ended (a dispatched JobSet's status is its worker
// copy's, which MultiKueue copies back).
func Ran(js *jobsetapi.JobSet) bool {
	if !ptr.Deref(js.Spec.Suspend, false) || js.Status.Restarts > 0 || terminalCondition(js) != nil {
		return true
	}
	return slices.ContainsFunc(js.Status.ReplicatedJobsStatus, func(s jobsetapi.ReplicatedJobStatus) bool {
		return s.Active+s.Ready+s.Succeeded+s.Failed > 0
	})
}

// Dispatched reports whether MultiKueue dispatches js (spec.managedBy
// kueue.x-k8s.io/multikueue, immutable): its child Jobs run on a worker cluster.
func Dispatched(js *jobsetapi.JobSet) bool {
	return ptr.Deref(js.Spec.ManagedBy, "") == kueue.MultiKueueControllerName
}

// RecordNames implements kinds.Dispatcher: a record of a child of the JobSet itself (not
// of one a TrainJob rendered), of the target's replicatedJob and job index.
func (Kind) RecordNames(ref v1alpha1.TargetRef, rec *v1alpha1.WorkerJob) bool {
	return RecordOf(ref.JobSet, ref, rec) && rec.TrainJob == ""
}

// RecordKey implements kinds.Dispatcher: the JobSet whose child rec records, also when a
// TrainJob rendered it.
func (Kind) RecordKey(rec *v1alpha1.WorkerJob) (kinds.IndexKey, bool) {
	return kinds.Key(v1alpha1.TargetKindJobSet, rec.JobSet), rec.JobSet != ""
}

// RecordOf reports whether rec records a child Job of the JobSet named jobSet that ref's
// replicatedJob and job index mean, of any restart attempt: under the name JobSet gives
// that child, since the labels the record was read from are writable on the worker (as
// CurrentChild does on this cluster).
func RecordOf(jobSet string, ref v1alpha1.TargetRef, rec *v1alpha1.WorkerJob) bool {
	return jobSet != "" && rec.JobSet == jobSet && rec.ReplicatedJob == ref.ReplicatedJob && rec.JobIndex == ref.Index() &&
		rec.Job == ChildJobName(jobSet, ref.ReplicatedJob, int(ref.Index()))
}

// ChildLabels are the labels JobSet puts on every child Job of the JobSet named jobSet
// that ref's replicatedJob and job index mean, of every restart attempt. They select the
// candidates only: anyone can put them on a Job, and only the Jobs the JobSet controls
// are its children (IsChildOf).
func ChildLabels(jobSet string, ref v1alpha1.TargetRef) map[string]string {
	return map[string]string{
		jobsetapi.JobSetNameKey:        jobSet,
		jobsetapi.ReplicatedJobNameKey: ref.ReplicatedJob,
		jobsetapi.JobIndexKey:          strconv.Itoa(int(ref.Index())),
	}
}

// Controlling is the name and UID of the JobSet that controls obj: its controller owner
// reference, when that is a JobSet of JobSet's API group (any version). It is read from
// obj alone, so the watches and the webhooks can ask it of every Job.
func Controlling(obj metav1.Object) (string, types.UID, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != KindJobSet {
		return "", "", false
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != jobsetapi.GroupVersion.Group {
		return "", "", false
	}
	return ref.Name, ref.UID, true
}

// IsChild reports whether job is a child Job of the JobSet its labels name: it has the
// name JobSet gives the child its labels mean (PodChild), and that JobSet controls it. A
// Job that only carries the labels (made by hand, or copied from a child), or that a
// namespace editor gave a controller reference to the JobSet under another name, is no
// child of anything.
func IsChild(job metav1.Object) bool {
	ref, named := PodChild(job.GetName(), job.GetLabels())
	name, _, controlled := Controlling(job)
	return named && controlled && name == ref.JobSet
}

// IsChildOf reports whether job is a child Job of the JobSet named jobSet that ref's
// replicatedJob and job index mean, of any restart attempt: it has the name JobSet gives
// that child (ChildJobName), carries ChildLabels and the JobSet controls it. A namespace
// editor may create a Job of another name with the JobSet's labels and a controller
// reference to it (owner references are not authenticated), while only one Job of the
// child's name can exist at a time. jobSetUID, when known (the JobSet object was read),
// must be the controller's UID: a Job left over from a deleted JobSet of the same name
// is no child of its successor.
func IsChildOf(jobSet string, ref v1alpha1.TargetRef, job metav1.Object, jobSetUID types.UID) bool {
	if jobSet == "" || job.GetName() != ChildJobName(jobSet, ref.ReplicatedJob, int(ref.Index())) {
		return false
	}
	l := job.GetLabels()
	if l[jobsetapi.JobSetNameKey] != jobSet || l[jobsetapi.ReplicatedJobNameKey] != ref.ReplicatedJob || l[jobsetapi.JobIndexKey] != strconv.Itoa(int(ref.Index())) {
		return false
	}
	name, uid, ok := Controlling(job)
	return ok && name == jobSet && (jobSetUID == "" || uid == jobSetUID)
}

// ChildJobName is the name JobSet gives the child Job of a replicatedJob and job index,
// in every restart attempt (JobSet's placement.GenJobName).
func ChildJobName(jobSet, replicatedJob string, jobIndex int) string {
	return placement.GenJobName(jobSet, replicatedJob, jobIndex)
}

// CurrentChild picks, among candidate Jobs of the JobSet named jobSet for ref (listed by
// ChildLabels), the one the target follows: of its children (IsChildOf, by owner's UID
// when the JobSet was read; none created after owner recorded its terminal condition
// (give or take kinds.ClockSkewAllowance), nor after its deletion started, since a JobSet that
// ended or is being deleted creates no Job, while a namespace editor may make one under a
// child's name once the child is gone), the
// highest restart attempt that
// is not being deleted (a restart deletes the old children before it creates new ones,
// and a child being deleted is on its way out). While none is, the child being deleted
// that the record finalizer (v1alpha1.RecordFinalizer) still holds, of the highest
// attempt: it is followed until its end is recorded, so that what it completed before a
// restart (or its owner's end) deleted it is its record. Among equal attempts the first
// wins. A candidate that is no child is never followed, whatever its restart attempt. It
// returns nil when no child is left, for an owner MultiKueue dispatches (Dispatched): its
// children run on a worker cluster, none here; and for an owner that lacks the child
// (Lacks): no replicatedJob of its name, or too few replicas.
func CurrentChild(jobSet string, ref v1alpha1.TargetRef, owner *jobsetapi.JobSet, jobs []batchv1.Job) (*batchv1.Job, int32) {
	if owner != nil && (Dispatched(owner) || Lacks(owner, ref) != "") {
		// The JobSet controller makes no child here for a dispatched JobSet, nor one its
		// replicatedJobs (immutable) do not have: a Job of that name is anyone's, its
		// controller reference and labels being writable by whoever may create Jobs.
		// A dispatched JobSet's coverage the worker records.
		return nil, 0
	}
	var jobSetUID types.UID
	var ended *metav1.Condition
	var deleted *metav1.Time
	if owner != nil {
		// The JobSet controller leaves a JobSet being deleted alone, and records no
		// terminal condition for it: its deletion, written by the API server whose clock
		// also writes a child's creation, ends it as surely.
		jobSetUID, ended, deleted = owner.UID, terminalCondition(owner), owner.DeletionTimestamp
	}
	var live, held *batchv1.Job
	liveAttempt, heldAttempt := int32(-1), int32(-1)
	for i := range jobs {
		j := &jobs[i]
		if !IsChildOf(jobSet, ref, j, jobSetUID) || ended != nil && kinds.AfterBeyondSkew(j.CreationTimestamp.Time, ended.LastTransitionTime.Time) ||
			deleted != nil && j.CreationTimestamp.After(deleted.Time) {
			continue
		}
		a := (Kind{}).RestartAttempt(j)
		switch {
		case j.DeletionTimestamp == nil && a > liveAttempt:
			live, liveAttempt = j, a
		case j.DeletionTimestamp != nil && slices.Contains(j.Finalizers, v1alpha1.RecordFinalizer) && a > heldAttempt:
			held, heldAttempt = j, a
		}
	}
	switch {
	case live != nil:
		return live, liveAttempt
	case held != nil:
		return held, heldAttempt
	}
	return nil, 0
}

// PodChild is the JobSet target a pod of the Job named job belongs to, from the JobSet
// labels the pod carries (JobSet puts them on its children's pod templates). A pod does
// not say whether its Job is controlled by the JobSet, but JobSet names each child
// ChildJobName(jobSet, replicatedJob, jobIndex) in every restart attempt: the pod of a
// Job of another name carries the labels of a child it is not (a hand-made Job, or one
// copied from a child), and belongs to no JobSet target. The Job of that name is followed
// only while the JobSet controls it (Resolve); a pod of any other Job of that name
// reports under that Job's UID, which the account judges (StaleIdentity).
func PodChild(job string, labels map[string]string) (v1alpha1.TargetRef, bool) {
	js, rj := labels[jobsetapi.JobSetNameKey], labels[jobsetapi.ReplicatedJobNameKey]
	if js == "" || rj == "" {
		return v1alpha1.TargetRef{}, false
	}
	idx, err := strconv.ParseInt(labels[jobsetapi.JobIndexKey], 10, 32)
	if err != nil || idx < 0 || job != ChildJobName(js, rj, int(idx)) {
		return v1alpha1.TargetRef{}, false
	}
	return v1alpha1.TargetRef{JobSet: js, ReplicatedJob: rj, JobIndex: ptr.To(int32(idx))}, true
}

// Ended says why the JobSet ref names will create no more child Jobs for ref: it is gone
// (account.OwnerDeleted), being deleted (account.OwnerBeingDeleted), recorded its
// terminal condition (Completed, Failed), or has no such child (Lacks); "" while it may
// still create or recreate it. JobSet deletes its active children when it finishes or
// fails, and a restart deletes them too: only this tells the one from the other.
func Ended(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (string, error) {
	var js jobsetapi.JobSet
	switch err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.JobSet}, &js); {
	case apierrors.IsNotFound(err):
		return account.OwnerDeleted, nil
	case err != nil:
		return "", err
	case js.DeletionTimestamp != nil:
		return account.OwnerBeingDeleted, nil
	}
	return cmp.Or(Terminal(&js), Lacks(&js, ref)), nil
}

// Lacks says how js lacks the child ref names ("" when it has it): no replicatedJob of
// that name, or fewer replicas than its jobIndex needs. JobSet's webhook keeps
// replicatedJobs immutable, so such a child is never created.
func Lacks(js *jobsetapi.JobSet, ref v1alpha1.TargetRef) string {
	var names []string
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name != ref.ReplicatedJob {
			names = append(names, rj.Name)
			continue
		}
		if i := ptr.Deref(ref.JobIndex, 0); i >= rj.Replicas {
			return fmt.Sprintf("has %d %s of replicatedJob %q, none of jobIndex %d", rj.Replicas, plural(rj.Replicas, "replica"), rj.Name, i)
		}
		return ""
	}
	if len(names) == 0 {
		return fmt.Sprintf("has no replicatedJob %q (it has none)", ref.ReplicatedJob)
	}
	return fmt.Sprintf("has no replicatedJob %q (it has %s)", ref.ReplicatedJob, strings.Join(names, ", "))
}

// plural is word, with an s unless n is 1.
func plural(n int32, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// Terminal is the JobSet's terminal condition type that is True (Completed, Failed), or "".
func Terminal(js *jobsetapi.JobSet) string {
	if c := terminalCondition(js); c != nil {
		return c.Type
	}
	return ""
}

// terminalCondition is the JobSet's terminal condition that is True; nil when none is.
func terminalCondition(js *jobsetapi.JobSet) *metav1.Condition {
	return kinds.TrueCondition(js.Status.Conditions, string(jobsetapi.JobSetCompleted), string(jobsetapi.JobSetFailed))
}

// StampReplicatedJob raises the scope label of replicatedJob's pod template, on the
// JobSet named jobSet while it is suspended (StampJobSet); a JobSet not found is no error.
func StampReplicatedJob(ctx context.Context, c client.Client, namespace, jobSet, replicatedJob, scope string) (int, error) {
	var js jobsetapi.JobSet
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: jobSet}, &js); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	return StampJobSet(ctx, c, &js, replicatedJob, scope)
}

// StampJobSet raises the scope label of replicatedJob's pod template on js while js is
// suspended, so that a restart's new children keep the scope; it returns how many
// templates it patched (0 or 1). The Job template is not stamped: JobSet's webhook lets a
// suspended JobSet change only its pod templates' metadata (the children's own labels are
// stamped on each Job by the account's reconcile).
func StampJobSet(ctx context.Context, c client.Client, js *jobsetapi.JobSet, replicatedJob, scope string) (int, error) {
	if !ptr.Deref(js.Spec.Suspend, false) {
		return 0, nil
	}
	for i, rj := range js.Spec.ReplicatedJobs {
		have := rj.Template.Spec.Template.Labels[v1alpha1.LabelScope]
		if rj.Name != replicatedJob || kinds.StrongerScope(have, scope) == have {
			continue
		}
		// The test pins the replicatedJob at that index: the list is immutable but for
		// templates, so this only guards against a JobSet replaced under the same name.
		patch := fmt.Appendf(nil, `[{"op":"test","path":"/spec/replicatedJobs/%d/name","value":%q},%s]`, i, rj.Name,
			scopeLabelsOp(fmt.Sprintf("/spec/replicatedJobs/%d/template/spec/template", i), &rj.Template.Spec.Template.ObjectMeta, scope))
		if err := c.Patch(ctx, js, client.RawPatch(types.JSONPatchType, patch)); err != nil {
			return 0, err
		}
		return 1, nil
	}
	return 0, nil
}

// scopeLabelsOp is the JSON patch operation that sets the scope label in the metadata
// meta of the template at path, keeping its other labels. A JobSet is stored as written,
// so an empty metadata may be absent: it is added whole then.
func scopeLabelsOp(path string, meta *metav1.ObjectMeta, scope string) []byte {
	labels := maps.Clone(meta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.LabelScope] = scope
	if len(meta.Labels) == 0 && len(meta.Annotations) == 0 && meta.Name == "" && meta.Namespace == "" {
		b, _ := json.Marshal(map[string]any{"labels": labels})
		return fmt.Appendf(nil, `{"op":"add","path":%q,"value":%s}`, path+"/metadata", b)
	}
	b, _ := json.Marshal(labels)
	return fmt.Appendf(nil, `{"op":"add","path":%q,"value":%s}`, path+"/metadata/labels", b)
}
