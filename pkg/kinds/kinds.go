// Package kinds is the seam between batchledger and the kinds of object an account's
// targets name. A completion identity is always (Job UID, completion index) of a
// batch/v1 Indexed Job; a kind says how its targets name such Jobs: a Job by name
// (pkg/kinds/job), a child Job of a JobSet replicatedJob (pkg/kinds/jobset), a child Job
// of the JobSet a Kubeflow Trainer TrainJob renders (pkg/kinds/trainjob). Each kind is one
// directory implementing Kind and the optional interfaces that fit, and one entry in
// pkg/kinds/all; the core asks the registry, not the kinds by name. What else a kind
// registers (its API field, webhooks, admission policy, worker role) and what still
// names JobSet, the runtime JobSet and TrainJob targets share, is listed in
// docs/architecture.md, "Adding a new target kind".
//
// The target key grammar and the TargetRef field of each kind are API
// (pkg/apis/batchledger/v1alpha1, TargetRef and targetkey.go); everything a kind means
// beyond its name is here.
package kinds

import (
	"context"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// IndexKey is a key of the controller's field indexes of accounts by the objects their
// targets name, and of Workloads by their owners: "<kind>/<name>" ("job/j", "jobset/train",
// "trainjob/llm"), for a Job or for an owner as a whole. It is not a target key
// (v1alpha1.TargetKey), which names one child of an owner.
type IndexKey string

// Key is the index key of the object of kind (a v1alpha1.TargetKind*) named name.
func Key(kind, name string) IndexKey { return IndexKey(kind + "/" + name) }

// TargetKey is the index key a target answers to: its Job, or its child's owner.
func TargetKey(ref v1alpha1.TargetRef) IndexKey { return Key(ref.Kind(), ref.Owner()) }

// Kind is one kind of target. Every method of a kind is asked only of targets of that
// kind (ref.Kind() == Name()), except JobKeys and PodTarget, which say whether a Job or a
// pod belongs to a target of the kind at all.
type Kind interface {
	// Name is the kind's name in target keys and index keys (v1alpha1.TargetKind*).
	Name() string
	// Object is the kind of object a target of this kind names: the Job itself, or the
	// owner of its child Jobs. Its API may be optional (OptionalAPI).
	Object() schema.GroupVersionKind
	// OptionalAPI reports whether the cluster may not serve Object's API: the manager
	// then runs without this kind, and reports its targets as APINotServed.
	OptionalAPI() bool
	// NewObject is an empty object of Object's kind (for its watch, its short form).
	NewObject() client.Object

	// JobKeys are the index keys of this kind a Job answers to, from its metadata alone:
	// a Job target's name; the owner of whose children the Job is one. A key may name
	// an owner the Job turns out not to belong to (a read decides); never the reverse.
	JobKeys(job metav1.Object) []IndexKey
	// PodTarget is the target of this kind whose index pod a pod of the Job named job,
	// with labels, is, whichever identity (Job UID) of the target controls it.
	PodTarget(job string, labels map[string]string) (v1alpha1.TargetRef, bool)
	// NamesJob reports whether ref names job under any of its identities.
	NamesJob(ref v1alpha1.TargetRef, job metav1.Object) bool
	// CandidateLabels select every Job ref may name, of every identity (restart
	// attempt); nil for a Job by name.
	CandidateLabels(ref v1alpha1.TargetRef) map[string]string
	// RestartAttempt is the attempt of its owner a child Job was created for (0 for a
	// Job by name).
	RestartAttempt(job metav1.Object) int32

	// Resolve finds the Job ref names now in namespace, and its restart attempt; nil
	// when there is none.
	Resolve(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (*batchv1.Job, int32, error)
	// Ended says why ref's owner will create no more Jobs for it
	// (account.OwnerDeleted, account.OwnerBeingDeleted, or its terminal condition);
	// "" while it may, and always "" for a Job by name.
	Ended(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (string, error)
	// WorkloadOwner is the UID of the object whose Kueue Workload job (a Job ref
	// resolved to) runs under: the Job, its JobSet, the TrainJob above that.
	WorkloadOwner(ctx context.Context, r client.Reader, ref v1alpha1.TargetRef, job *batchv1.Job) (types.UID, error)
	// StampScope raises the opt-in scope label to scope on the templates ref's future
	// Jobs are made from (a suspended JobSet's replicatedJob), beyond the Job itself,
	// which the controller stamps for every kind. It returns how many it patched.
	StampScope(ctx context.Context, c client.Client, namespace string, ref v1alpha1.TargetRef, scope string) (int, error)
	// ShortForm is the account the short-form annotations on obj (of NewObject's type)
	// declare, or an error naming the annotation to fix (pkg/kinds/shortform reads the
	// annotations every kind shares; the caller checks the mapping it makes).
	ShortForm(obj client.Object) (v1alpha1.BatchAccountSpec, error)
	// FinishedAt is when obj (of NewObject's type) recorded its terminal condition;
	// false while it has none. Short-form accounts are retained from then.
	FinishedAt(obj client.Object) (time.Time, bool)
}

// Registry is the kinds batchledger knows, in the order keys are derived.
type Registry []Kind

// For is the kind of ref; nil for a target naming none (an invalid target).
func (g Registry) For(ref v1alpha1.TargetRef) Kind { return g.Named(ref.Kind()) }

// Named is the kind named name; nil when none is.
func (g Registry) Named(name string) Kind {
	for _, k := range g {
		if k.Name() == name {
			return k
		}
	}
	return nil
}

// Owning is the kind whose objects are of the owner reference's kind (by group and
// kind, any version); nil when none is.
func (g Registry) Owning(ref metav1.OwnerReference) Kind {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil
	}
	for _, k := range g {
		if o := k.Object(); o.Kind == ref.Kind && o.Group == gv.Group {
			return k
		}
	}
	return nil
}

// JobKeys are the index keys of every kind a Job answers to (Kind.JobKeys).
func (g Registry) JobKeys(job metav1.Object) []IndexKey {
	var keys []IndexKey
	for _, k := range g {
		keys = append(keys, k.JobKeys(job)...)
	}
	return keys
}

// PodTargets are the targets of every kind a pod of the Job named job, with labels, is an
// index pod of (Kind.PodTarget).
func (g Registry) PodTargets(job string, labels map[string]string) []v1alpha1.TargetRef {
	var refs []v1alpha1.TargetRef
	for _, k := range g {
		if ref, ok := k.PodTarget(job, labels); ok {
			refs = append(refs, ref)
		}
	}
	return refs
}

// NamesJob reports whether ref names job (its kind's NamesJob); false for a ref of no
// kind.
func (g Registry) NamesJob(ref v1alpha1.TargetRef, job metav1.Object) bool {
	k := g.For(ref)
	return k != nil && k.NamesJob(ref, job)
}

// JobSetRenderer is implemented by the kinds whose child Jobs are a JobSet's: JobSet
// itself, and the kinds that render a JobSet (TrainJob). The JobSet webhook stamps a new
// JobSet's replicatedJobs for the targets of all of them.
type JobSetRenderer interface {
	Kind
	// JobSetOwner is the name of the object of this kind whose targets' child Jobs are
	// js's children: js itself for a JobSet, the TrainJob that controls js; false when
	// js is none of this kind's.
	JobSetOwner(js metav1.Object) (string, bool)
}

// scopeRank orders scopes: a Job named by an account requiring results needs its pods
// held (ScopeResults), one only counted needs them seen (ScopeCoverage).
var scopeRank = map[string]int{"": 0, v1alpha1.ScopeCoverage: 1, v1alpha1.ScopeResults: 2}

// StrongerScope returns the stronger of two scopes. Scopes are only ever raised: two
// accounts naming one Job, one requiring results, never flip its label back and forth.
func StrongerScope(a, b string) string {
	if scopeRank[b] > scopeRank[a] {
		return b
	}
	return a
}

// WeakerScope is the weaker of two scopes: what an object stamped in two places holds
// for sure ("" when either lacks the label).
func WeakerScope(a, b string) string {
	if scopeRank[b] < scopeRank[a] {
		return b
	}
	return a
}

// Owner is implemented by the kinds whose targets name a child Job of an owner object
// (JobSet, TrainJob): the owner deletes and recreates its children, and its ending
// (Kind.Ended) tells a restart in progress from a child gone for good. The account
// controller watches the owners for it.
type Owner interface {
	Kind
	// Terminal is owner's terminal condition type that is True, or "" (owner is of
	// NewObject's type).
	Terminal(owner client.Object) string
	// ChildSelector are the labels of every child Job of the object of this kind named
	// name, of every target and restart attempt. They select candidates only: JobKeys
	// decides which of them are its children.
	ChildSelector(name string) map[string]string
}

// Controller is implemented by the kinds whose objects control child Jobs themselves
// (JobSet). Kueue gives such a child no Workload of its own, only its controller's, so a
// target naming the child by its Job name runs under that Workload too.
type Controller interface {
	Kind
	// ChildWorkloadOwner is the UID of the object whose Workload job runs under when job
	// is a child Job of an object of this kind (as WorkloadOwner gives it for a target of
	// this kind); false when job is no child of one.
	ChildWorkloadOwner(ctx context.Context, r client.Reader, job *batchv1.Job) (types.UID, bool, error)
	// OwnerReplaced reports whether job is a child Job of an object of this kind that an
	// object of the same name created after job has replaced: no target follows job any
	// more (its successor's children are the target's), whatever an account followed.
	OwnerReplaced(ctx context.Context, r client.Reader, job *batchv1.Job) (bool, error)
}

// OwnerReplaced reports whether an object of a kind that controls child Jobs
// (Controller) controlled job and was replaced by another of its name since: the
// answer of the first kind that says so.
func (g Registry) OwnerReplaced(ctx context.Context, r client.Reader, job *batchv1.Job) (bool, error) {
	for _, k := range g {
		if c, ok := k.(Controller); ok {
			if replaced, err := c.OwnerReplaced(ctx, r, job); replaced || err != nil {
				return replaced, err
			}
		}
	}
	return false, nil
}

// ChildWorkloadOwner is the UID of the object whose Workload job runs under when an
// object of a kind that controls child Jobs (Controller) controls it: the answer of the
// first kind that takes job for its child; false when none does.
func (g Registry) ChildWorkloadOwner(ctx context.Context, r client.Reader, job *batchv1.Job) (types.UID, bool, error) {
	for _, k := range g {
		if c, ok := k.(Controller); ok {
			if uid, ok, err := c.ChildWorkloadOwner(ctx, r, job); ok || err != nil {
				return uid, ok, err
			}
		}
	}
	return "", false, nil
}

// Needing is implemented by the kinds whose targets need more APIs than their Object's:
// a TrainJob's child Jobs are those of the JobSet it renders, which the kind reads. A
// target of such a kind cannot exist where one of them is not served.
type Needing interface {
	Kind
	// Needs are the kinds of object, beyond Object, whose API a target of this kind reads.
	Needs() []schema.GroupVersionKind
}

// Cached is implemented by the kinds whose objects the manager's cache cuts down to what
// batchledger reads of them (CacheTransform is a cache.TransformFunc).
type Cached interface {
	Kind
	CacheTransform(obj any) (any, error)
}

// Followed is the identity an account's status follows for a target: its Job's UID and
// its owner's restart attempt (the zero value: none).
type Followed struct {
	UID            types.UID
	RestartAttempt int32
}

// CacheLagError is a kind's answer that the objects its reader shows disagree in a way
// only caches that have yet to catch up explain (each informer sees the writes of its own
// kind in order, but not in order with another's), and that it cannot answer until they
// agree. Since is when the later write was made, by its writer's clock. The caller looks
// again, for a bounded time after Since, and then takes what the reader shows as it is:
// Job (nil for none) at RestartAttempt.
type CacheLagError struct {
	Since          time.Time
	Reason         string
	Job            *batchv1.Job
	RestartAttempt int32
}

func (e *CacheLagError) Error() string { return "the caches may not have caught up: " + e.Reason }

// ClockSkewAllowance is how far a child Job's creation time (the API server's clock) may
// be after its owner's terminal condition (its controller's clock) and the child still be
// taken for one the owner created before it ended; and how far before its owner's
// creation a child may be created by another clock's account. It is also how far a
// MultiKueue worker's record (the worker's clocks) may be before the manager's object was
// created, or after its admission on that worker ended (the manager's clocks), and still
// be taken for that object's, that admission's.
const ClockSkewAllowance = time.Minute

// BeforeBeyondSkew reports whether t is before u by more than ClockSkewAllowance: read on
// two clocks, t is before u however far apart the clocks are allowed to be.
func BeforeBeyondSkew(t, u time.Time) bool { return t.Add(ClockSkewAllowance).Before(u) }

// AfterBeyondSkew reports whether t is after u by more than ClockSkewAllowance.
func AfterBeyondSkew(t, u time.Time) bool { return t.After(u.Add(ClockSkewAllowance)) }

// TrueCondition is the first of conds whose type is one of types and whose status is
// True: an owner's terminal condition (JobSet Completed or Failed, TrainJob Complete or
// Failed), its type for Owner.Terminal and its transition time for FinishedAt. nil when
// there is none.
func TrueCondition(conds []metav1.Condition, types ...string) *metav1.Condition {
	for i := range conds {
		if c := &conds[i]; c.Status == metav1.ConditionTrue && slices.Contains(types, c.Type) {
			return c
		}
	}
	return nil
}

// Dispatcher is implemented by the kinds whose child Jobs MultiKueue runs on a worker
// cluster with none on the manager (JobSet, and TrainJob, which renders one): Kueue
// copies only the owner's status back, so a dispatched target's identities are read
// from what the worker role recorded of the worker's child Jobs (v1alpha1.WorkerJob),
// which the controller reads from the workers the target's Workload was admitted to
// and gives the kind (Recorded).
type Dispatcher interface {
	Kind
	// DispatchedOwner is ref's owner (of NewObject's kind) when MultiKueue dispatches it
	// (spec.managedBy kueue.x-k8s.io/multikueue): the object its Workload belongs to.
	// It is read without a deep copy, so callers must not modify it. nil when the owner
	// is not dispatched, or not there.
	DispatchedOwner(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (client.Object, error)
	// DispatchedOwnerRan reports whether ref's owner is dispatched by MultiKueue and runs,
	// or ran, on a worker cluster: Kueue unsuspended it for an admission, or the status
	// MultiKueue copies back from the worker shows children that ran, or its end. Its
	// children are on the worker, so this is all the manager can tell of them before
	// their records are read. false when the owner is not dispatched, or not there.
	DispatchedOwnerRan(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.TargetRef) (bool, error)
	// RecordNames reports whether rec records a child Job ref names, of any restart
	// attempt.
	RecordNames(ref v1alpha1.TargetRef, rec *v1alpha1.WorkerJob) bool
	// RecordKey is the index key of the object of this kind whose child rec records, the
	// accounts naming which it wakes; false when rec records a child of none.
	RecordKey(rec *v1alpha1.WorkerJob) (IndexKey, bool)
}

// RecordKeys are the index keys of every kind a WorkerJob wakes the accounts of
// (Dispatcher.RecordKey).
func (g Registry) RecordKeys(rec *v1alpha1.WorkerJob) []IndexKey {
	var keys []IndexKey
	for _, k := range g {
		if d, ok := k.(Dispatcher); ok {
			if key, ok := d.RecordKey(rec); ok {
				keys = append(keys, key)
			}
		}
	}
	return keys
}

// RecordedJob is a WorkerJob and the worker cluster it was read from.
type RecordedJob struct {
	Record  *v1alpha1.WorkerJob
	Cluster string
}

// Recorded is the record of the child Job a dispatched target follows, among recs
// (the records of its Workload's admissions, the worker it was admitted to last, last):
// of those k says ref names, the newest admission's, and within it the newest child
// (newerChild). nil when none names ref.
func Recorded(k Dispatcher, ref v1alpha1.TargetRef, recs []RecordedJob) *RecordedJob {
	var best *RecordedJob
	for i := range recs {
		rec := &recs[i]
		if !k.RecordNames(ref, rec.Record) {
			continue
		}
		if best == nil || rec.Cluster != best.Cluster || newerChild(rec.Record, best.Record) {
			best = rec
		}
	}
	return best
}

// newerChild reports whether a records a later child Job than b, both of one worker: one
// created later (a restart, or a new copy of the JobSet after an eviction, creates its
// children after the old ones are gone; a new copy counts its restarts from 0 again), or
// created in the same second and of a restart attempt as high.
func newerChild(a, b *v1alpha1.WorkerJob) bool {
	ta, tb := childCreated(a), childCreated(b)
	if !ta.Equal(&tb) {
		return tb.Before(&ta)
	}
	return a.RestartAttempt >= b.RestartAttempt
}

// childCreated is when rec's Job was created, or, for a record without it, the record.
func childCreated(rec *v1alpha1.WorkerJob) metav1.Time {
	if rec.JobCreated != nil {
		return *rec.JobCreated
	}
	return rec.CreationTimestamp
}
