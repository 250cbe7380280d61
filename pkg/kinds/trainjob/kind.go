// Package trainjob is Kubeflow Trainer's TrainJob (trainer.kubeflow.org/v1alpha1) as a
// kind of target. A TrainJob renders a JobSet of its own name that it controls, whose
// replicatedJobs run Indexed Jobs (the torch runtime's "node": one completion index per
// node); Kueue's trainjob integration gives the Workload to the TrainJob. A target
// {trainJob: NAME, replicatedJob: RJ, jobIndex: N} names child Job N of RJ of that JobSet,
// of every JobSet restart attempt, and builds on pkg/kinds/jobset for everything but the
// TrainJob itself.
package trainjob

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/kinds/shortform"
)

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=list;watch;patch

// DefaultReplicatedJob is the replicatedJob a TrainJob's short form names when its
// annotation batchledger.dev/replicated-job is absent: the torch runtime's trainer nodes.
const DefaultReplicatedJob = "node"

// ScopePatchManager is the manager of the runtime patch through which batchledger raises
// the scope label of a TrainJob's replicatedJob pod template (StampScope).
const ScopePatchManager = "batchledger.dev/scope"

// Kind is the TrainJob kind of target.
type Kind struct{}

var (
	_ kinds.Owner          = Kind{}
	_ kinds.JobSetRenderer = Kind{}
	_ kinds.Dispatcher     = Kind{}
	_ kinds.Needing        = Kind{}
)

// Needs implements kinds.Needing: Trainer runs a TrainJob's Jobs as a JobSet's children,
// which are resolved through the JobSet (jobset.ResolveChild).
func (Kind) Needs() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{jobset.Kind{}.Object()}
}

// DispatchedOwner implements kinds.Dispatcher: the TrainJob, when MultiKueue dispatches it
// (Trainer on the worker renders its JobSet there; none exists on the manager).
func (Kind) DispatchedOwner(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (client.Object, error) {
	var tj trainer.TrainJob
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.TrainJob}, &tj, client.UnsafeDisableDeepCopy); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if tj.Spec.ManagedBy == nil || *tj.Spec.ManagedBy != kueue.MultiKueueControllerName {
		return nil, nil
	}
	return &tj, nil
}

// DispatchedOwnerRan implements kinds.Dispatcher: the TrainJob is dispatched and runs,
// or ran: it is not suspended (Kueue unsuspends a TrainJob it admitted), or, suspended
// again by a preemption, its status (its worker copy's, which MultiKueue copies back)
// shows its end or child Jobs that were active or ended.
func (Kind) DispatchedOwnerRan(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (bool, error) {
	var tj trainer.TrainJob
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.TrainJob}, &tj, client.UnsafeDisableDeepCopy); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !dispatched(&tj) {
		return false, nil
	}
	if !ptr.Deref(tj.Spec.Suspend, false) || terminal(&tj) != "" {
		return true, nil
	}
	return slices.ContainsFunc(tj.Status.JobsStatus, func(s trainer.JobStatus) bool {
		return ptr.Deref(s.Active, 0)+ptr.Deref(s.Ready, 0)+ptr.Deref(s.Succeeded, 0)+ptr.Deref(s.Failed, 0) > 0
	}), nil
}

// RecordNames implements kinds.Dispatcher: a record of a child of the JobSet the TrainJob
// rendered (of the TrainJob's name), of the target's replicatedJob and job index.
func (Kind) RecordNames(ref v1alpha1.TargetRef, rec *v1alpha1.WorkerJob) bool {
	return rec.TrainJob == ref.TrainJob && jobset.RecordOf(ref.TrainJob, ref, rec)
}

// RecordKey implements kinds.Dispatcher: the TrainJob that rendered the JobSet whose child
// rec records; none for a JobSet queued itself.
func (Kind) RecordKey(rec *v1alpha1.WorkerJob) (kinds.IndexKey, bool) {
	return kinds.Key(v1alpha1.TargetKindTrainJob, rec.TrainJob), rec.TrainJob != ""
}

// Name implements kinds.Kind.
func (Kind) Name() string { return v1alpha1.TargetKindTrainJob }

// Object implements kinds.Kind.
func (Kind) Object() schema.GroupVersionKind {
	return trainer.GroupVersion.WithKind(trainer.TrainJobKind)
}

// OptionalAPI implements kinds.Kind: Kubeflow Trainer may not be installed.
func (Kind) OptionalAPI() bool { return true }

// NewObject implements kinds.Kind.
func (Kind) NewObject() client.Object { return &trainer.TrainJob{} }

// JobSetOwner implements kinds.JobSetRenderer: the TrainJob that controls js.
func (Kind) JobSetOwner(js metav1.Object) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(js)
	if ref == nil || ref.Name != js.GetName() || !jobset.IsTrainJob(ref) {
		return "", false
	}
	return ref.Name, true
}

// JobKeys implements kinds.Kind: a JobSet child answers to the TrainJob of its JobSet's
// name, which a Job alone cannot confirm renders it; Resolve does.
func (Kind) JobKeys(job metav1.Object) []kinds.IndexKey {
	if !jobset.IsChild(job) {
		return nil
	}
	return []kinds.IndexKey{kinds.Key(v1alpha1.TargetKindTrainJob, job.GetLabels()[jobsetapi.JobSetNameKey])}
}

// PodTarget implements kinds.Kind: the pod of a JobSet child (jobset.PodChild) is the
// TrainJob target's of the JobSet's name.
func (Kind) PodTarget(job string, labels map[string]string) (v1alpha1.TargetRef, bool) {
	ref, ok := jobset.PodChild(job, labels)
	if !ok {
		return v1alpha1.TargetRef{}, false
	}
	return asTrainJob(ref), true
}

// asTrainJob is the TrainJob target of the JobSet target ref (the JobSet has the
// TrainJob's name), and jobSet the reverse.
func asTrainJob(ref v1alpha1.TargetRef) v1alpha1.TargetRef {
	return v1alpha1.TargetRef{TrainJob: ref.JobSet, ReplicatedJob: ref.ReplicatedJob, JobIndex: ref.JobIndex, Namespace: ref.Namespace}
}

// NamesJob implements kinds.Kind: job is a child of the TrainJob's JobSet that the target
// means, of any restart attempt.
func (Kind) NamesJob(ref v1alpha1.TargetRef, job metav1.Object) bool {
	return jobset.IsChildOf(ref.TrainJob, ref, job, "")
}

// CandidateLabels implements kinds.Kind: the child labels of the TrainJob's JobSet.
func (Kind) CandidateLabels(ref v1alpha1.TargetRef) map[string]string {
	return jobset.ChildLabels(ref.TrainJob, ref)
}

// RestartAttempt implements kinds.Kind: the JobSet restart attempt.
func (Kind) RestartAttempt(job metav1.Object) int32 { return jobset.Kind{}.RestartAttempt(job) }

// Resolve implements kinds.Kind: the current child of the JobSet the TrainJob renders;
// none for a TrainJob MultiKueue dispatches, nor of a JobSet Trainer rendered again after
// the TrainJob ended (its terminal condition, or Kueue's finish of its Workload: then only
// the JobSet that recorded that end is followed). A JobSet of the TrainJob's name that the
// TrainJob (by UID, when it is read) does not control is none of its; while that JobSet
// is gone, its children left behind are judged by their JobSet's name alone, as a JobSet
// target's are, and, when the TrainJob is read, by being created while it ran (give or
// take kinds.ClockSkewAllowance), and only once it ended after a JobSet of it ran.
func (Kind) Resolve(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (*batchv1.Job, int32, error) {
	return resolve(ctx, r, namespace, ref, kinds.Followed{}, false)
}

// ResolveObserved is Resolve for a target whose account follows the identity observed.
// The controller's caches lag independently: one may show the TrainJob's Workload
// finished while the JobSet that ran shows its own end, and the TrainJob its condition,
// only later. That JobSet is followed while its child is the Job followed, or a later
// restart attempt of it: a JobSet rendered again after the end starts again at attempt 0
// with children of other UIDs, and Kueue keeps it from running, so from restarting.
// Answering no child there would record the Job as deleted before it terminated, and a
// final verdict its TTL may act on. An account that follows nothing yet (its first
// observation) cannot tell that JobSet from one rendered again before Kueue finished the
// Workload: it is answered a kinds.CacheLagError, which its caller waits out.
func (Kind) ResolveObserved(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef, observed kinds.Followed) (*batchv1.Job, int32, error) {
	return resolve(ctx, r, namespace, ref, observed, true)
}

// resolve is Resolve, and, observing, ResolveObserved following the identity observed.
func resolve(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef, observed kinds.Followed, observing bool) (*batchv1.Job, int32, error) {
	var tj trainer.TrainJob
	var trainJobUID types.UID
	var since, until, ended time.Time
	switch err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.TrainJob}, &tj, client.UnsafeDisableDeepCopy); {
	case err == nil && dispatched(&tj):
		// Trainer renders a dispatched TrainJob's JobSet on a worker cluster, none here:
		// a JobSet of its name here, and its Jobs, are anyone's.
		return nil, 0, nil
	case err == nil:
		// No child of it is made before the TrainJob (give or take the API servers'
		// clocks); its JobSet's UID tells them apart, below.
		trainJobUID, since = tj.UID, tj.CreationTimestamp.Add(-kinds.ClockSkewAllowance)
	case !apierrors.IsNotFound(err):
		return nil, 0, err
	}
	var js jobsetapi.JobSet
	var owner *jobsetapi.JobSet
	switch err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.TrainJob}, &js, client.UnsafeDisableDeepCopy); {
	case err == nil:
		if !renders(&js, ref.TrainJob, trainJobUID) {
			return nil, 0, nil
		}
		if trainJobUID != "" {
			// A JobSet Trainer rendered again after the TrainJob ended runs outside any
			// admission: none of its children is the batch's, which ended. The end is
			// the TrainJob's terminal condition while the cache still shows it (Trainer
			// takes a failure off in the reconcile that renders the JobSet again, so
			// the new JobSet and its children may be seen first), or Kueue's finish of
			// its Workload when earlier or alone (batchEnd); alone, only a JobSet that
			// recorded that end itself was rendered for it (endedBatch). Compared
			// without the skew allowance, and in the same second too (timestamps have
			// no finer grain; Trainer renders again at once): the JobSet that ran was
			// made a whole run before it ended, and before Kueue made the Workload.
			end, recorded, err := batchEnd(ctx, r, &tj)
			if err != nil {
				return nil, 0, err
			}
			if !recorded {
				// The Workload's finish alone.
				if end != nil && !endedBatch(&js, end) {
					if !js.CreationTimestamp.Before(&end.LastTransitionTime) {
						// Made once the Workload finished, as below: a JobSet rendered
						// again, whatever restart attempt its children's label says
						// (anyone who may update Jobs may write it).
						return nil, 0, nil
					}
					if observing && observed.UID == "" {
						return nil, 0, &kinds.CacheLagError{Since: end.LastTransitionTime.Time,
							Reason: fmt.Sprintf("TrainJob %s/%s: its Workload finished, its JobSet shows no end", namespace, ref.TrainJob)}
					}
					return observedChild(ctx, r, namespace, ref, &js, since, end.LastTransitionTime.Add(kinds.ClockSkewAllowance), observed)
				}
			}
			if end == nil && observing && observed.UID != "" {
				return unendedChild(ctx, r, namespace, ref, &js, since, observed)
			}
			if end != nil && !js.CreationTimestamp.Before(&end.LastTransitionTime) {
				return nil, 0, nil
			}
		}
		owner = &js
	case !apierrors.IsNotFound(err):
		return nil, 0, err
	case trainJobUID != "":
		// The TrainJob is there and its JobSet is not: no JobSet UID tells its children,
		// and anyone who may create Jobs can make one of a child's name and labels.
		// Only a TrainJob that ended after a JobSet of it ran (Trainer deletes it at the
		// deadline, its TTL may) leaves children behind, created before it ended.
		// Trainer has yet to render one, or never will (a runtime it cannot render fails
		// the TrainJob), or renders it again: no child. The end is Trainer's clock (or
		// JobSet's), read before it deletes the JobSet, which may create a child until
		// then: a child's creation, the API server's clock, is allowed the skew.
		end, _, err := batchEnd(ctx, r, &tj)
		if err != nil {
			return nil, 0, err
		}
		if end == nil || len(tj.Status.JobsStatus) == 0 {
			return nil, 0, nil
		}
		ended = end.LastTransitionTime.Time
		until = ended.Add(kinds.ClockSkewAllowance)
	}
	job, attempt, err := jobset.ResolveChild(ctx, r, namespace, ref.TrainJob, ref, owner, since, until)
	if err != nil || job == nil {
		return job, attempt, err
	}
	if owner == nil {
		// The JobSet is gone, its UID with it: a Job of the child's name and labels
		// whose controller reference names a JobSet of that name (an apiVersion the
		// garbage collector cannot resolve keeps it) is anyone's. A child left behind is
		// one the account followed while the JobSet was there, or one the JobSet made
		// before the batch ended that the account never saw (leftBehind); once it
		// follows one, no other Job is that JobSet's.
		if observed.UID != "" && job.UID != observed.UID && !leftBehind(job, ended) {
			return nil, 0, nil
		}
		return job, attempt, nil
	}
	if jobset.MayBeFollowed(owner, job, observed) {
		return job, attempt, nil
	}
	// Made about the end of the JobSet that ran, and not of its last restart attempt
	// after the one followed: a Job of the child's name, labels and controller reference
	// made by hand once that child was let go.
	return nil, 0, nil
}

// leftBehind reports whether job, a Job of a child's name, labels and controller
// reference whose JobSet is gone, was that JobSet's child when the TrainJob's batch
// ended at end (zero: unknown), though the account followed another: a restart made it
// after the account last looked (the manager down, or its reconcile failing, from the
// restart to Trainer's deletion of the JobSet at the deadline). It was made before the
// end beyond kinds.ClockSkewAllowance, so while the JobSet ran, and its controller
// reference is of the API version JobSet writes, which the garbage collector resolves:
// a Job made then under another UID than the JobSet's is collected while the JobSet is
// there, so its deletion started before the end (held by the record finalizer only
// until the recorder finds no account follows it), while one under the JobSet's own UID
// is its child, as CurrentChild takes it while the JobSet runs, and is collected once
// the JobSet is deleted, at or after the end. A Job made about the end, kept by an
// apiVersion the garbage collector cannot resolve, or being deleted since before the
// end, is anyone's.
func leftBehind(job *batchv1.Job, end time.Time) bool {
	ref := metav1.GetControllerOfNoCopy(job)
	return !end.IsZero() && kinds.BeforeBeyondSkew(job.CreationTimestamp.Time, end) &&
		(job.DeletionTimestamp == nil || !kinds.BeforeBeyondSkew(job.DeletionTimestamp.Time, end)) &&
		ref != nil && ref.APIVersion == jobsetapi.SchemeGroupVersion.String()
}

// observedChild is the child of js, created since and no later than until (the
// Workload's finish, give or take kinds.ClockSkewAllowance), when it is the Job observed
// follows or a later restart attempt that js counted (ResolveObserved); none otherwise,
// and none when observed follows nothing (Resolve). The JobSet that ran made every child
// of the batch before it ended, so before Kueue finished the Workload: a child made later
// is one of a JobSet rendered again before that finish (a restart of it, or a Job made
// again under the child's name), which holds no admission.
func observedChild(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef, js *jobsetapi.JobSet, since, until time.Time, observed kinds.Followed) (*batchv1.Job, int32, error) {
	if observed.UID == "" {
		return nil, 0, nil
	}
	job, attempt, err := jobset.ResolveChild(ctx, r, namespace, ref.TrainJob, ref, js, since, until)
	if err != nil || job == nil || job.UID != observed.UID && attempt <= observed.RestartAttempt {
		return nil, 0, err
	}
	if job.UID != observed.UID && attempt > js.Status.Restarts {
		// JobSet labels a child with the restarts its status counted first: a label beyond
		// them is js shown late by its cache, or written by hand (anyone who may update
		// Jobs may) on the child of a JobSet rendered again. Once the caches agree, none.
		return nil, 0, &kinds.CacheLagError{Since: job.CreationTimestamp.Time,
			Reason: fmt.Sprintf("TrainJob %s/%s: its JobSet counts fewer restarts than its child's attempt %d", namespace, ref.TrainJob, attempt)}
	}
	return job, attempt, nil
}

// unendedChild is the child of js, created since, for an account that follows observed,
// while the caches show neither the TrainJob's end nor its Workload's. A child other than
// the one followed, at no later restart attempt that js counted, is one of a JobSet
// rendered again after the JobSet that ran was deleted (a JobSet restart only raises the
// attempt, and labels the child with the restarts its status counted first; a label
// beyond them is the JobSet shown late, or written by hand on such a child): while the
// batch runs (a new run under the same admission, the child to follow), or once it failed
// and Trainer took the failure off, before the cache shows Kueue's finish of the Workload
// (the child of no run). Only that finish tells them apart: a kinds.CacheLagError, since
// the JobSet was made, whose answer as the caches show it is that child.
func unendedChild(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef, js *jobsetapi.JobSet, since time.Time, observed kinds.Followed) (*batchv1.Job, int32, error) {
	job, attempt, err := jobset.ResolveChild(ctx, r, namespace, ref.TrainJob, ref, js, since, time.Time{})
	if err != nil || job == nil || job.UID == observed.UID || attempt > observed.RestartAttempt && attempt <= js.Status.Restarts {
		return job, attempt, err
	}
	return nil, 0, &kinds.CacheLagError{Since: js.CreationTimestamp.Time, Job: job, RestartAttempt: attempt,
		Reason: fmt.Sprintf("TrainJob %s/%s: its JobSet was made again, its Workload shows no finish", namespace, ref.TrainJob)}
}

// endedBatch reports whether js, rendered by a TrainJob without a terminal condition whose
// Workload finished at wlEnd (workloadEnd), is the JobSet whose end that was: it recorded
// its own end (Completed, Failed) by then, give or take kinds.ClockSkewAllowance. Trainer
// never takes Complete off a TrainJob, and takes a failure off only once the JobSet it
// copied it from is gone, so the JobSet that ran is still there only while the cache has
// yet to show the TrainJob's condition, and then shows its own end, which came first. A
// JobSet rendered again has none: Kueue finishes the Workload from the TrainJob it read,
// which may be after Trainer took the failure off and rendered the JobSet again, so its
// creation before the Workload's finish does not make it the JobSet that ran.
func endedBatch(js *jobsetapi.JobSet, wlEnd *metav1.Condition) bool {
	c := kinds.TrueCondition(js.Status.Conditions, string(jobsetapi.JobSetCompleted), string(jobsetapi.JobSetFailed))
	return c != nil && !kinds.AfterBeyondSkew(c.LastTransitionTime.Time, wlEnd.LastTransitionTime.Time)
}

// renders reports whether js is rendered by the TrainJob named name (by uid, when known).
func renders(js *jobsetapi.JobSet, name string, uid types.UID) bool {
	owner, ok := Kind{}.JobSetOwner(js)
	if !ok || owner != name {
		return false
	}
	return uid == "" || metav1.GetControllerOfNoCopy(js).UID == uid
}

// Ended implements kinds.Kind: the TrainJob gone (account.OwnerDeleted), being deleted
// (account.OwnerBeingDeleted), or its batch's end (batchEnd: its terminal condition,
// Complete or Failed, or Kueue's finish of its Workload, whichever came first, as
// ResolveObserved takes it); else its JobSet's own terminal condition (Completed,
// Failed), which Trainer turns into the TrainJob's, or how that JobSet lacks the child
// ref names (jobset.Lacks: a replicatedJob its runtime does not render). A TrainJob
// without its JobSet has not ended: Trainer renders it again. A TrainJob MultiKueue
// dispatches ends by its own condition or its Workload's finish alone: its JobSet is the
// worker's. Kueue finishes that Workload (the manager's) when the worker's finishes, and
// copies the worker's TrainJob status back once more, from which Trainer on the worker
// may have taken the failure off already (workloadEnd).
func (Kind) Ended(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (string, error) {
	var tj trainer.TrainJob
	switch err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.TrainJob}, &tj); {
	case apierrors.IsNotFound(err):
		return account.OwnerDeleted, nil
	case err != nil:
		return "", err
	case tj.DeletionTimestamp != nil:
		return account.OwnerBeingDeleted, nil
	}
	switch end, _, err := batchEnd(ctx, r, &tj); {
	case err != nil:
		return "", err
	case end != nil:
		return end.Type, nil
	}
	if dispatched(&tj) {
		// Its JobSet runs on a worker cluster: a JobSet of its name here is none of its
		// (anyone may make one).
		return "", nil
	}
	var js jobsetapi.JobSet
	switch err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.TrainJob}, &js); {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", err
	case js.DeletionTimestamp != nil || !renders(&js, tj.Name, tj.UID):
		return "", nil
	}
	return cmp.Or(jobset.Terminal(&js), jobset.Lacks(&js, ref)), nil
}

// batchEnd is when tj's batch ended: its terminal condition, or Kueue's finish of its
// Workload (workloadEnd) when that is earlier or the TrainJob has none; recorded reports
// whether the TrainJob shows a terminal condition at all. A failure Trainer took off may
// come back, copied from the JobSet it rendered again, which holds no admission and
// failed in turn (its pods failed before Kueue suspended it, or pods made by hand that
// the Job controller counts): the batch ended before, at the finish.
func batchEnd(ctx context.Context, r client.Reader, tj *trainer.TrainJob) (end *metav1.Condition, recorded bool, err error) {
	own := terminalCondition(tj)
	wlEnd, err := workloadEnd(ctx, r, tj)
	if err != nil || wlEnd == nil || own != nil && !wlEnd.LastTransitionTime.Before(&own.LastTransitionTime) {
		return own, own != nil, err
	}
	return wlEnd, own != nil, nil
}

// workloadEnd is the Finished condition of the TrainJob's Kueue Workload, as the
// TrainJob's own (type Complete when the Workload succeeded, else Failed); nil when
// Kueue manages no Workload of it that finished. Trainer v2.2.0
// keeps a Failed condition only for its own deadline: once the failed JobSet is gone
// (deleted by hand, or by its TTL), it takes the failure off the TrainJob and renders the
// JobSet again, unsuspended, while Kueue keeps the Workload finished, admits nothing more
// for it, and suspends that JobSet's children. The Workload's end is the batch's.
func workloadEnd(ctx context.Context, r client.Reader, tj *trainer.TrainJob) (*metav1.Condition, error) {
	var wls kueue.WorkloadList
	switch err := r.List(ctx, &wls, client.InNamespace(tj.Namespace), client.MatchingLabels{kueueconstants.JobUIDLabel: string(tj.UID)}); {
	case apimeta.IsNoMatchError(err):
		// Kueue's API is optional: without it no Workload ends a TrainJob.
		return nil, nil
	case err != nil:
		return nil, err
	}
	var end *metav1.Condition
	for i := range wls.Items {
		wl := &wls.Items[i]
		// The label is anyone's to set: only a Workload the TrainJob controls counts.
		if c := metav1.GetControllerOfNoCopy(wl); c == nil || c.UID != tj.UID || !jobset.IsTrainJob(c) {
			continue
		}
		c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished)
		if c == nil || c.Status != metav1.ConditionTrue || end != nil && !c.LastTransitionTime.Before(&end.LastTransitionTime) {
			continue
		}
		end = &metav1.Condition{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime}
		if c.Reason == kueue.WorkloadFinishedReasonSucceeded {
			end.Type = trainer.TrainJobComplete
		}
	}
	return end, nil
}

// terminal is the TrainJob's terminal condition type that is True (Complete, Failed), or "".
func terminal(tj *trainer.TrainJob) string {
	if c := terminalCondition(tj); c != nil {
		return c.Type
	}
	return ""
}

// terminalCondition is the TrainJob's terminal condition that is True; nil when none is.
func terminalCondition(tj *trainer.TrainJob) *metav1.Condition {
	return kinds.TrueCondition(tj.Status.Conditions, trainer.TrainJobComplete, trainer.TrainJobFailed)
}

// Terminal implements kinds.Owner.
func (Kind) Terminal(owner client.Object) string {
	if tj, ok := owner.(*trainer.TrainJob); ok {
		return terminal(tj)
	}
	return ""
}

// ChildSelector implements kinds.Owner: the children of the JobSet of the TrainJob's name
// (jobset.Kind.ChildSelector).
func (Kind) ChildSelector(name string) map[string]string { return jobset.Kind{}.ChildSelector(name) }

// FinishedAt implements kinds.Kind: when the TrainJob recorded Complete or Failed.
func (Kind) FinishedAt(obj client.Object) (time.Time, bool) {
	if tj, ok := obj.(*trainer.TrainJob); ok {
		if c := terminalCondition(tj); c != nil {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// WorkloadOwner implements kinds.Kind: Kueue's trainjob integration gives the Workload
// to the TrainJob. A Job the TrainJob controls itself (the stand-in the controller makes
// of a dispatched TrainJob's child recorded on a worker) runs under that TrainJob's; a
// child Job under that of the TrainJob its JobSet descends from (jobset.WorkloadOwner),
// by UID: the TrainJob now of the target's name may be a successor, for which the child
// of a deleted one (held by the record finalizer) ran nothing.
func (Kind) WorkloadOwner(ctx context.Context, r client.Reader, _ v1alpha1.TargetRef, job *batchv1.Job) (types.UID, error) {
	if c := metav1.GetControllerOfNoCopy(job); c != nil && jobset.IsTrainJob(c) {
		return c.UID, nil
	}
	return jobset.WorkloadOwner(ctx, r, job)
}

// StampScope implements kinds.Kind. Trainer renders its JobSet again (server-side apply)
// whenever the TrainJob is suspended or resumed, so a label put on the JobSet would be
// Trainer's to remove; the scope goes into the TrainJob's own runtime patches instead
// (manager ScopePatchManager), which Trainer merges into every JobSet it renders, and
// which may change only while the TrainJob is suspended (Kueue keeps it so until it is
// admitted).
func (Kind) StampScope(ctx context.Context, c client.Client, namespace string, ref v1alpha1.TargetRef, scope string) (int, error) {
	var tj trainer.TrainJob
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.TrainJob}, &tj); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	have := patchedScope(&tj, ref.ReplicatedJob)
	if !ptr.Deref(tj.Spec.Suspend, false) || kinds.StrongerScope(have, scope) == have {
		return 0, nil
	}
	base := tj.DeepCopy()
	setScopePatch(&tj, ref.ReplicatedJob, scope)
	if err := c.Patch(ctx, &tj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return 0, err
	}
	return 1, nil
}

// dispatched reports whether MultiKueue dispatches tj: Trainer renders its JobSet on the
// worker, never on this cluster.
func dispatched(tj *trainer.TrainJob) bool {
	return tj.Spec.ManagedBy != nil && *tj.Spec.ManagedBy == kueue.MultiKueueControllerName
}

// patchedScope is the scope the TrainJob's runtime patches give replicatedJob's pods,
// and, for a dispatched TrainJob, its child Jobs too: the weaker of the two where they
// differ.
func patchedScope(tj *trainer.TrainJob, replicatedJob string) string {
	var job, pod string
	for _, p := range tj.Spec.RuntimePatches {
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil || p.TrainingRuntimeSpec.Template.Spec == nil {
			continue
		}
		for _, rj := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
			if rj.Name != replicatedJob || rj.Template == nil {
				continue
			}
			if m := rj.Template.Metadata; m != nil {
				job = kinds.StrongerScope(job, m.Labels[v1alpha1.LabelScope])
			}
			if rj.Template.Spec != nil && rj.Template.Spec.Template != nil && rj.Template.Spec.Template.Metadata != nil {
				pod = kinds.StrongerScope(pod, rj.Template.Spec.Template.Metadata.Labels[v1alpha1.LabelScope])
			}
		}
	}
	if !dispatched(tj) {
		return pod
	}
	return kinds.WeakerScope(job, pod)
}

// setScopePatch sets the scope label of replicatedJob's pod template in batchledger's
// runtime patch, adding the patch or the replicatedJob to it as needed, and, for a
// dispatched TrainJob, of its Job template: JobSet gives a child Job the Job template's
// labels, which a MultiKueue worker's Job webhook and record of the child select on (on
// this cluster the account's reconcile labels each child Job itself). Only there: Trainer
// applies its JobSet again while it is suspended, and JobSet's webhook lets a suspended
// JobSet change only its pod templates' metadata, so a Job template label patched in after
// the JobSet exists would keep the TrainJob from ever starting; a dispatched TrainJob's
// JobSet is rendered on the worker from the patches it carries when dispatched.
func setScopePatch(tj *trainer.TrainJob, replicatedJob, scope string) {
	i := -1
	for j, p := range tj.Spec.RuntimePatches {
		if p.Manager == ScopePatchManager {
			i = j
		}
	}
	if i < 0 {
		tj.Spec.RuntimePatches = append(tj.Spec.RuntimePatches, trainer.RuntimePatch{Manager: ScopePatchManager})
		i = len(tj.Spec.RuntimePatches) - 1
	}
	p := &tj.Spec.RuntimePatches[i]
	if p.TrainingRuntimeSpec == nil {
		p.TrainingRuntimeSpec = &trainer.TrainingRuntimeSpecPatch{}
	}
	if p.TrainingRuntimeSpec.Template == nil {
		p.TrainingRuntimeSpec.Template = &trainer.JobSetTemplatePatch{}
	}
	if p.TrainingRuntimeSpec.Template.Spec == nil {
		p.TrainingRuntimeSpec.Template.Spec = &trainer.JobSetSpecPatch{}
	}
	spec := p.TrainingRuntimeSpec.Template.Spec
	for j := range spec.ReplicatedJobs {
		if spec.ReplicatedJobs[j].Name == replicatedJob {
			setScopeLabels(&spec.ReplicatedJobs[j], scope, dispatched(tj))
			return
		}
	}
	spec.ReplicatedJobs = append(spec.ReplicatedJobs, trainer.ReplicatedJobPatch{Name: replicatedJob})
	setScopeLabels(&spec.ReplicatedJobs[len(spec.ReplicatedJobs)-1], scope, dispatched(tj))
}

// setScopeLabels sets the scope label on rj's pod template, and on its Job template too
// with job.
func setScopeLabels(rj *trainer.ReplicatedJobPatch, scope string, job bool) {
	if rj.Template == nil {
		rj.Template = &trainer.JobTemplatePatch{}
	}
	if job {
		if rj.Template.Metadata == nil {
			rj.Template.Metadata = &metav1.ObjectMeta{}
		}
		if rj.Template.Metadata.Labels == nil {
			rj.Template.Metadata.Labels = map[string]string{}
		}
		rj.Template.Metadata.Labels[v1alpha1.LabelScope] = scope
	}
	if rj.Template.Spec == nil {
		rj.Template.Spec = &trainer.JobSpecPatch{}
	}
	if rj.Template.Spec.Template == nil {
		rj.Template.Spec.Template = &trainer.PodTemplatePatch{}
	}
	if rj.Template.Spec.Template.Metadata == nil {
		rj.Template.Spec.Template.Metadata = &metav1.ObjectMeta{}
	}
	if rj.Template.Spec.Template.Metadata.Labels == nil {
		rj.Template.Spec.Template.Metadata.Labels = map[string]string{}
	}
	rj.Template.Spec.Template.Metadata.Labels[v1alpha1.LabelScope] = scope
}

// ShortForm implements kinds.Kind: over one replicatedJob (annotation
// batchledger.dev/replicated-job, default DefaultReplicatedJob), child Job 0's indexes
// 0..n-1 onto the n shards in order: a TrainJob's replicatedJob runs one child Job of
// one index per node. A TrainJob that sets numNodes must declare as many shards, or one
// fewer: an MPI runtime that runs its launcher as a node (Trainer's deepspeed and mlx
// runtimes) gives the node replicatedJob numNodes-1 indexes, and the TrainJob does not
// say which runtime it is. One that leaves numNodes to its runtime, or declares the count
// its runtime does not run, is left for the account to report (UnmappedIndexes,
// IndexOutOfRange).
func (Kind) ShortForm(obj client.Object) (v1alpha1.BatchAccountSpec, error) {
	tj, ok := obj.(*trainer.TrainJob)
	if !ok {
		return v1alpha1.BatchAccountSpec{}, fmt.Errorf("a TrainJob short form is declared on a TrainJob, not a %T", obj)
	}
	spec, n, err := shortform.Common(tj.Annotations)
	if err != nil {
		return spec, err
	}
	rj := tj.Annotations[v1alpha1.AnnotationReplicatedJob]
	if rj == "" {
		rj = DefaultReplicatedJob
	}
	if rj == DefaultReplicatedJob && tj.Spec.Trainer != nil && tj.Spec.Trainer.NumNodes != nil {
		if nodes := int(*tj.Spec.Trainer.NumNodes); n != nodes && n != nodes-1 {
			return spec, fmt.Errorf("annotation %s declares %d shards, but the TrainJob runs numNodes %d: declare %d shards (%d for a runtime that runs its MPI launcher as a node) or change numNodes",
				shortform.ShardsAnnotation(tj.Annotations), n, nodes, nodes, nodes-1)
		}
	}
	spec.Assignments = []v1alpha1.Assignment{{
		Target:        v1alpha1.TargetRef{TrainJob: tj.Name, ReplicatedJob: rj, JobIndex: ptr.To(int32(0))},
		Indexes:       indexset.Range(0, n-1).String(),
		ShardOrdinals: indexset.Range(0, n-1).String(),
	}}
	return spec, nil
}

// CacheTransform implements kinds.Cached: of a TrainJob batchledger reads its metadata,
// suspension, runtime patches, number of nodes, conditions and status.jobsStatus (whether
// a JobSet of it ran: Resolve, DispatchedOwnerRan), which stays; one entry per
// replicatedJob, it is small.
func (Kind) CacheTransform(obj any) (any, error) {
	tj, ok := obj.(*trainer.TrainJob)
	if !ok {
		return obj, nil
	}
	tj.ManagedFields = nil
	tj.Spec.Initializer = nil
	if t := tj.Spec.Trainer; t != nil {
		tj.Spec.Trainer = &trainer.Trainer{NumNodes: t.NumNodes}
	}
	return tj, nil
}
