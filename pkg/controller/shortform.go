package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	jobsetkind "batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/relations"
)

// EventActionCreateAccount is the action of the events about a short form: creating the
// account it declares.
const EventActionCreateAccount = "CreateAccount"

// maxEventNote bounds an event's note: the API server refuses a longer one.
const maxEventNote = 1024

// ShortFormReconciler creates the BatchAccount a short-form Job, JobSet or TrainJob
// declares (relations.ShortForm), once per object (v1alpha1.AnnotationShortFormCreated).
// Whatever stands in the way of that account is a Warning event on the object, whose
// author is the one to act: annotations that do not parse (InvalidShortForm), an
// account the API server refuses (ShortFormRejected), an account of that name that
// exists with another spec (ShortFormMismatch).
type ShortFormReconciler struct {
	client.Client
	// Recorder emits the Warnings on the Job, JobSet or TrainJob.
	Recorder events.EventRecorder
	// Kind is the kind of target whose objects' short form this reconciler reads.
	Kind kinds.Kind
	// APIs are the optional APIs the cluster serves: no reconciler for a kind not
	// served. nil: all.
	APIs *ServedAPIs
	// TTL is the retention of short-form accounts (Reconciler.ShortFormTTL; 0: kept).
	// No account is created for an object that ended longer ago than it: retention
	// deleted its account (or would at once), and creating it again would only repeat
	// that whenever the manager starts.
	TTL time.Duration
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Mappings keeps the accounts' compiled mappings (Reconciler.Mappings): an existing
	// account compared with the short form is not compiled again (nil: it is, each time).
	Mappings *account.MappingCache
}

// +kubebuilder:rbac:groups=batchledger.dev,resources=batchaccounts,verbs=list;watch;create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile creates the declared account once per object: the object is marked
// (v1alpha1.AnnotationShortFormCreated) once the cache holds its account, one made no
// earlier than the object (madeFor), and an account created for it and deleted since is
// not created again. A mistake in the annotations, or an account the API server
// refuses, is terminal until the object changes: it is a Warning, not a retry. An existing account of that name is never modified (its
// revisions, shards and assignments are immutable); when it is not what the annotations
// declare, a Warning says how it differs and what to do.
func (r *ShortFormReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.Kind.NewObject()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !relations.HasShortForm(obj.GetAnnotations()) {
		return ctrl.Result{}, nil
	}
	spec, parseErr := relations.ShortForm(obj)
	var existing v1alpha1.BatchAccount
	err := r.Get(ctx, req.NamespacedName, &existing)
	switch {
	case parseErr != nil && err == nil:
		// Annotations an earlier version accepted (an upgrade), or changed since: the
		// account made from them stands.
		r.warn(ctx, obj, &existing, v1alpha1.EventReasonInvalidShortForm,
			"the short-form annotations no longer parse: %s. BatchAccount %s, of the same name, stands unchanged", parseErr, existing.Name)
		return ctrl.Result{}, nil
	case parseErr != nil && apierrors.IsNotFound(err):
		r.warn(ctx, obj, nil, v1alpha1.EventReasonInvalidShortForm,
			// Of the short form only: an account naming the object gives its pods their scope.
			"%s", invalidShortFormNote(parseErr, "as soon as the annotations parse"))
		return ctrl.Result{}, nil
	}
	if err == nil {
		judged := r.judgedAnotherRun(&existing, obj)
		if fixed, acceptance := shortFormDiffs(r.Mappings, &existing, &spec); len(fixed)+len(acceptance) > 0 {
			r.warn(ctx, obj, &existing, v1alpha1.EventReasonShortFormMismatch, "%s",
				r.mismatchNote(&existing, fixed, acceptance, !judged && namesDeclaredTargets(&existing.Spec, &spec)))
			return ctrl.Result{}, nil
		}
		if judged {
			kind := r.kindName()
			r.warn(ctx, obj, &existing, v1alpha1.EventReasonShortFormAlreadyAccepted,
				"BatchAccount %s, of this %s's name, Accepted an earlier run of the name and follows no other: this %s is not accounted. "+
					"To account it, re-create this %s under another name, or delete the BatchAccount (its verdict and results go with it): an account is then created for this %s",
				existing.Name, kind, kind, kind, kind)
			return ctrl.Result{}, nil
		}
		if existing.Labels[v1alpha1.LabelShortFormOf] == r.kindName() && madeFor(&existing, obj) {
			// Made from this short form (by an earlier version, or the mark after
			// its create failed): marked as created, its deletion sticks too.
			return ctrl.Result{}, r.markCreated(ctx, obj)
		}
		return ctrl.Result{}, nil
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if relations.ShortFormCreated(obj) {
		// Created for this very object and deleted since: by its user (or retention),
		// who asked for it gone, not for an empty account of a run whose results went
		// with the old one. The annotation says how to have it back.
		ctrl.LoggerFrom(ctx).V(1).Info("no account created: the account created for this short form was deleted",
			"annotation", v1alpha1.AnnotationShortFormCreated)
		return ctrl.Result{}, nil
	}
	if relations.ShortFormExpired(r.Kind, obj, r.TTL, r.now()) {
		ctrl.LoggerFrom(ctx).V(1).Info("no account created: the short form's batch ended longer ago than the short-form TTL")
		return ctrl.Result{}, nil
	}
	ba := &v1alpha1.BatchAccount{
		ObjectMeta: metav1.ObjectMeta{
			Name: obj.GetName(), Namespace: obj.GetNamespace(),
			Labels: map[string]string{v1alpha1.LabelShortFormOf: r.kindName()},
		},
		Spec: spec,
	}
	switch err := r.Create(ctx, ba); {
	case err == nil, apierrors.IsAlreadyExists(err):
		// Marked once the cache holds the account (AlreadyExists: the cache lags a create;
		// compared then too), not now: the pod releaser and the Job recorder read that
		// cache, and take a marked object's account that is not there as deleted for
		// good, so a pod ending meanwhile would go unrecorded.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
		r.warn(ctx, obj, nil, v1alpha1.EventReasonShortFormRejected,
			"the API server refused BatchAccount %s, which the short-form annotations declare: %s. It is tried again when the %s's annotations or spec change",
			ba.Name, err, r.kindName())
		return ctrl.Result{}, nil
	default:
		return ctrl.Result{}, err
	}
}

// judgedAnotherRun reports whether the account ba, of obj's name, reached its final
// verdict (account.Final) on an earlier object of the name, so that it follows nothing of
// obj (account.Follows): for a Job, obj's UID is on no record of it; for a JobSet or
// TrainJob, whose own UID no record holds, ba was made from its kind's short form before
// obj was created (madeFor), and so for an earlier object.
func (r *ShortFormReconciler) judgedAnotherRun(ba *v1alpha1.BatchAccount, obj client.Object) bool {
	if !account.Final(&ba.Status, &ba.Spec, ba.Generation) {
		return false
	}
	if _, ok := obj.(*batchv1.Job); ok {
		return !account.OnRecord(&ba.Status, obj.GetUID())
	}
	return ba.Labels[v1alpha1.LabelShortFormOf] == r.kindName() && !madeFor(ba, obj)
}

// madeFor reports whether an account made from a short form of obj's kind and name may
// have been made for obj itself: not before obj was created. One older is the account of
// an earlier object of the name (a Job applied again while it stands); marking obj for it
// would keep obj from ever getting its own once that account is deleted.
func madeFor(ba *v1alpha1.BatchAccount, obj client.Object) bool {
	created := obj.GetCreationTimestamp()
	return !ba.CreationTimestamp.Before(&created)
}

// markCreated sets v1alpha1.AnnotationShortFormCreated on obj, unless it carries it: a
// merge patch of that annotation alone, which no one else writes.
func (r *ShortFormReconciler) markCreated(ctx context.Context, obj client.Object) error {
	if relations.ShortFormCreated(obj) || obj.GetUID() == "" {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{v1alpha1.AnnotationShortFormCreated: string(obj.GetUID())}}})
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(r.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)))
}

func (r *ShortFormReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// kindName is the Kubernetes kind the reconciler reads ("Job", "JobSet", "TrainJob"), as
// messages and the label LabelShortFormOf name it.
func (r *ShortFormReconciler) kindName() string { return r.Kind.Object().Kind }

// warn emits a Warning about obj's short form, and logs it.
func (r *ShortFormReconciler) warn(ctx context.Context, obj client.Object, related runtime.Object, reason, note string, args ...any) {
	msg := clip(fmt.Sprintf(note, args...), maxEventNote)
	ctrl.LoggerFrom(ctx).Info("short form: no account as declared", "reason", reason, "message", msg)
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, related, corev1.EventTypeWarning, reason, EventActionCreateAccount, "%s", msg)
	}
}

// mismatchNote is the note of a ShortFormMismatch: which account, whence it came, how it
// differs (fixed: in fields that may not change; acceptance: in its acceptance, which may),
// whether it accounts for the object at all (names: it names one of the targets the short
// form declares), and the way forward.
func (r *ShortFormReconciler) mismatchNote(existing *v1alpha1.BatchAccount, fixed, acceptance []string, names bool) string {
	origin := "created by hand, not from a short form"
	if of := existing.Labels[v1alpha1.LabelShortFormOf]; of != "" {
		origin = "created from the short form of a " + of + " of this name"
	}
	kind := r.kindName()
	way := fmt.Sprintf("delete the BatchAccount (its results go with it) and re-create the %s, or re-create the %s under another name", kind, kind)
	switch {
	case !names:
		// Another kind's short form of the name, or an account written for other Jobs:
		// removing the annotations would leave the batch accounted by no one.
		way = fmt.Sprintf("give the %s another name", kind)
	case existing.Labels[v1alpha1.LabelShortFormOf] != kind:
		way = fmt.Sprintf("give the %s another name, or remove its short-form annotations to be accounted by the existing BatchAccount", kind)
	}
	if len(fixed) == 0 {
		way = "edit the BatchAccount's spec.acceptance (once work was done under it, requireResults may only be turned on), or " + way
	}
	standing := fmt.Sprintf("It was left unchanged and accounts for this %s", kind)
	if !names {
		standing = fmt.Sprintf("It was left unchanged and does not account for this %s: nothing of its batch is accounted", kind)
	}
	return fmt.Sprintf("BatchAccount %s (%s) is not what the short-form annotations declare: %s. %s; to fix it, %s",
		existing.Name, origin, strings.Join(append(fixed, acceptance...), "; "), standing, way)
}

// namesDeclaredTargets reports whether an account (have) names any target a short form
// declares (want): by the same reference, or a child target by its Job's name. One that
// names none (another kind's short form of the name, an account written for other Jobs)
// accounts for nothing of the object's batch.
func namesDeclaredTargets(have, want *v1alpha1.BatchAccountSpec) bool {
	named := map[v1alpha1.TargetKey]bool{}
	for _, a := range have.AllAssignments() {
		named[a.Target.Key()] = true
	}
	for _, a := range want.Assignments {
		if named[a.Target.Key()] {
			return true
		}
		if a.Target.IsChild() && named[v1alpha1.JobTargetKey(jobsetkind.ChildJobName(a.Target.Owner(), a.Target.ReplicatedJob, int(a.Target.Index())))] {
			return true
		}
	}
	return false
}

// shortFormDiffs are the fields in which an existing account differs from the spec a
// short form declares, each with both values where they are short: fixed are those that
// may not change once work was done under the account (revisions, shards, assignments),
// acceptance those of its acceptance, which mostly may. Shards and assignments are compared by what they
// mean (the names of the shards; which index of which target maps onto which shard), not
// by how they are written: an account written by hand may say by name or by range what
// the short form says by ordinal or by list. Repair assignments appended since (kubectl
// batchledger repair) and the result container, which a short form cannot declare, are
// no difference. The existing account's mapping is taken from mappings (nil: compiled).
func shortFormDiffs(mappings *account.MappingCache, existing *v1alpha1.BatchAccount, want *v1alpha1.BatchAccountSpec) (fixed, acceptance []string) {
	have := &existing.Spec
	if have.InputRevision != want.InputRevision {
		fixed = append(fixed, fmt.Sprintf("spec.inputRevision is %q, the annotations declare %q", have.InputRevision, want.InputRevision))
	}
	if have.ModelRevision != want.ModelRevision {
		fixed = append(fixed, fmt.Sprintf("spec.modelRevision is %q, the annotations declare %q", have.ModelRevision, want.ModelRevision))
	}
	hm, wm := mappings.Get(existing), account.Compile(existing.Namespace, want)
	if !sameShards(have, want, hm, wm) {
		fixed = append(fixed, fmt.Sprintf("spec.shards is %s, the annotations declare %s", describeShards(have.Shards), describeShards(want.Shards)))
	}
	if !slices.Equal(originalRuns(hm), originalRuns(wm)) {
		fixed = append(fixed, "spec.assignments map other indexes onto other shards")
	}
	if h, w := have.RequiresResults(), want.RequiresResults(); h != w {
		acceptance = append(acceptance, fmt.Sprintf("spec.acceptance.requireResults is %t, the annotations declare %t", h, w))
	}
	if h, w := have.AcceptanceRule(), want.AcceptanceRule(); h != w {
		acceptance = append(acceptance, fmt.Sprintf("spec.acceptance.rule is %q, the annotations declare %q", h, w))
	}
	return fixed, acceptance
}

// sameShards reports whether two specs (and their mappings) declare the same shards, in
// the same order, in either form.
func sameShards(have, want *v1alpha1.BatchAccountSpec, hm, wm *account.Mapping) bool {
	if equality.Semantic.DeepEqual(have.Shards, want.Shards) {
		return true
	}
	if (len(have.Shards.Names) > 0) == (len(want.Shards.Names) > 0) || hm.Shards.Count() != wm.Shards.Count() {
		return false
	}
	for o := range hm.Shards.Count() {
		if hm.Shards.Name(o) != wm.Shards.Name(o) {
			return false
		}
	}
	return true
}

// originalRuns are the runs of a mapping's original (non-repair) assignments, ordered by
// target and index and merged where one continues another, so that two ways of writing
// the same mapping give the same runs.
func originalRuns(m *account.Mapping) []account.Run {
	var runs []account.Run
	for _, r := range m.Runs {
		if !r.Repair {
			r.Entry = 0
			runs = append(runs, r)
		}
	}
	slices.SortFunc(runs, func(a, b account.Run) int {
		return cmp.Or(strings.Compare(a.Target, b.Target), cmp.Compare(a.FirstIndex, b.FirstIndex))
	})
	var out []account.Run
	for _, r := range runs {
		if n := len(out); n > 0 && out[n-1].Target == r.Target &&
			out[n-1].FirstIndex+out[n-1].Length == r.FirstIndex && out[n-1].FirstShard+out[n-1].Length == r.FirstShard {
			out[n-1].Length += r.Length
			continue
		}
		out = append(out, r)
	}
	return out
}

// describeShards is a shard population in a few words: its names (the first and last of
// a long list), or its count and prefix.
func describeShards(p v1alpha1.ShardPopulation) string {
	switch n := len(p.Names); {
	case n > 0 && n <= 8:
		return fmt.Sprintf("names %s", strings.Join(p.Names, ","))
	case n > 8:
		return fmt.Sprintf("%d names %s…%s", n, p.Names[0], p.Names[n-1])
	case p.Count != nil:
		return fmt.Sprintf("count %d with prefix %q", *p.Count, p.Prefix)
	default:
		return "no shards"
	}
}

// SetupWithManager watches Jobs or JobSets carrying a short form (shortFormChanges),
// when the cluster serves the kind; otherwise it sets up nothing.
func (r *ShortFormReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if !r.APIs.ServedObject(r.Kind.NewObject(), mgr.GetScheme()) {
		mgr.GetLogger().Info("no short-form reconciler: the cluster does not serve the kind", "kind", r.kindName())
		return nil
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(r.Kind.NewObject(), builder.WithPredicates(shortFormChanges())).
		// An account's deletion wakes the object of its name: one that got
		// ShortFormAlreadyAccepted or ShortFormMismatch while it stood gets its own now,
		// not at its next change or the manager's next start.
		Watches(&v1alpha1.BatchAccount{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(accountDeletions())).
		Named("shortform-" + r.Kind.Name()).
		Complete(r)
}

// accountDeletions passes only the deletion of a BatchAccount.
func accountDeletions() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// shortFormChanges passes a Job or JobSet carrying a short form when it is created and
// when its spec or annotations change: fixing an annotation is the way forward from an
// InvalidShortForm or a ShortFormRejected.
func shortFormChanges() predicate.Predicate {
	hasShortForm := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return relations.HasShortForm(o.GetAnnotations())
	})
	return predicate.And(hasShortForm, predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
}

// invalidShortFormNote is the note of InvalidShortForm on an object whose short form does
// not parse (invalid says why) and of whose name no account stands; when says when the
// account is created once the annotations are fixed.
func invalidShortFormNote(invalid error, when string) string {
	return fmt.Sprintf("the short-form annotations do not parse, so no BatchAccount was created from them and they give the pods no batchledger scope: %s. "+
		"Fix the annotation; the account is created %s", invalid, when)
}
