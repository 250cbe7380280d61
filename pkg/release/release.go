// Package release lets go of the pods and Jobs batchledger holds, for a clean uninstall.
//
// The pod webhook adds the finalizer v1alpha1.ResultFinalizer to index pods of Jobs whose
// account requires results, and the controller removes it once the pod's result is
// recorded. The Job webhook and the controller add v1alpha1.RecordFinalizer to the Jobs
// accounts name, and the controller removes it once their end is recorded; on a
// MultiKueue worker cluster the worker role holds child Jobs with
// v1alpha1.WorkerJobFinalizer the same way. Once batchledger is uninstalled nothing
// removes them any more: the pods and Jobs stay Terminating and block the deletion of
// their namespace (and a JobSet's restart). Release finds every pod that carries the
// result finalizer, ReleaseJobs every Job that carries either Job finalizer, and each
// removes those finalizers only (Kinds lists the two).
//
// They find them by their finalizer, not by a label: objects held by older versions may
// carry no label of ours. They list metadata only (PartialObjectMetadata), page by page,
// so a cluster-wide pass over every pod costs neither the pods' specs nor unbounded
// memory. They need list and patch of pods (and of Jobs), nothing else: an object is
// re-read with a list by name, not a get, so that the uninstall hook's ClusterRole stays
// at those two verbs.
package release

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

const (
	// DefaultPageSize is how many pods one List page holds (the API server's usual chunk
	// size for kubectl is the same).
	DefaultPageSize = 500
	// DefaultAttempts is how many times one pod's patch is tried before it is reported as
	// an error: each failed attempt means another writer changed its finalizers in between.
	DefaultAttempts = 5
	// NameField is the field selector a pod is re-read with. The API server supports it
	// for every resource; a fake client needs an index of that name.
	NameField = "metadata.name"
)

// FinalizerRemovalPatch is the JSON patch that removes ResultFinalizer from obj, or false
// when obj does not carry it. The patch first tests that the finalizer is still at the
// index obj shows, then removes that index: if another controller changed the list in
// between (the Job controller adds and removes batch.kubernetes.io/job-tracking), the test
// fails with 422 Invalid instead of removing someone else's finalizer. The caller re-reads
// the object and builds the patch again.
func FinalizerRemovalPatch(obj metav1.Object) (client.Patch, bool) {
	return RemovalPatch(obj, v1alpha1.ResultFinalizer)
}

// RemovalPatch is FinalizerRemovalPatch for any of batchledger's finalizers (the Job
// record's, v1alpha1.RecordFinalizer): it tests and removes that finalizer only.
func RemovalPatch(obj metav1.Object, finalizer string) (client.Patch, bool) {
	i := slices.Index(obj.GetFinalizers(), finalizer)
	if i < 0 {
		return nil, false
	}
	path := "/metadata/finalizers/" + strconv.Itoa(i)
	ops := []jsonPatchOp{
		{Op: "test", Path: path, Value: finalizer},
		{Op: "remove", Path: path},
	}
	data, err := json.Marshal(ops)
	if err != nil {
		// Marshalling two structs of strings cannot fail.
		panic(err)
	}
	return client.RawPatch(types.JSONPatchType, data), true
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value string `json:"value,omitempty"`
}

// Options say where to release pods and how.
type Options struct {
	// Namespace is the namespace whose pods are released; "" means all namespaces.
	Namespace string
	// DryRun changes nothing: the report lists the held pods that would be released.
	DryRun bool
	// ServerDryRun sends every patch with dryRun=All: the API server admits and validates
	// each removal and stores none. The report reads as a real run's.
	ServerDryRun bool
	// PageSize is the List page size; 0 means DefaultPageSize.
	PageSize int64
	// Attempts bounds the patches of one pod; 0 means DefaultAttempts.
	Attempts int
}

// PodError is a pod (for ReleaseJobs, a Job) that could not be released, and why.
type PodError struct {
	Pod types.NamespacedName
	Err error
}

func (e PodError) Error() string { return e.Pod.String() + ": " + e.Err.Error() }

func (e PodError) Unwrap() error { return e.Err }

// Report is what a Release (or a ReleaseJobs, of Jobs) did. Every pod in Held ends in exactly one of Released,
// AlreadyGone, AlreadyReleased or Errors (with DryRun, in none of them). Each list is
// sorted by namespace and name.
type Report struct {
	// Namespace is the namespace released ("" for all namespaces).
	Namespace string
	// DryRun is set when nothing was changed.
	DryRun bool
	// ServerDryRun is set when every patch was sent with dryRun=All: what is reported
	// released was accepted by the API server but not stored.
	ServerDryRun bool
	// Examined counts the pods listed.
	Examined int
	// Held are the pods that carried ResultFinalizer when listed.
	Held []types.NamespacedName
	// Released are the pods this run removed the finalizer from.
	Released []types.NamespacedName
	// AlreadyGone are held pods deleted before they were patched (NotFound).
	AlreadyGone []types.NamespacedName
	// AlreadyReleased are held pods that lost the finalizer before they were patched:
	// the controller released them in between.
	AlreadyReleased []types.NamespacedName
	// Errors are the held pods still held, with the error that kept them.
	Errors []PodError
}

// Done is whether no pod found held is held any more: each was released by this run,
// gone, or released by someone else in between. A dry run changes nothing, so it is done
// only when it found no held pod.
func (r *Report) Done() bool {
	if r.DryRun {
		return len(r.Held) == 0
	}
	return len(r.Errors) == 0
}

// Err joins the pod errors, nil when there is none.
func (r *Report) Err() error {
	errs := make([]error, len(r.Errors))
	for i, e := range r.Errors {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// held is what one kind of release lists and which finalizers it removes.
type held struct {
	// kind is the listed objects' kind; its list kind is kind+"List".
	kind schema.GroupVersionKind
	// resource names the objects in errors ("pods"), noun one of them ("pod").
	resource, noun string
	finalizers     []string
}

var (
	heldPods = held{kind: corev1.SchemeGroupVersion.WithKind("Pod"), resource: "pods", noun: "pod", finalizers: []string{v1alpha1.ResultFinalizer}}
	// A Job is held for its accounts' records, and on a MultiKueue worker cluster the
	// worker role holds a child Job until its WorkerJob record holds the Job's end.
	heldJobs = held{kind: batchv1.SchemeGroupVersion.WithKind("Job"), resource: "jobs", noun: "Job",
		finalizers: []string{v1alpha1.RecordFinalizer, v1alpha1.WorkerJobFinalizer}}
)

// Kind is one kind of hold a release lets go of: Noun names one object held so.
type Kind struct {
	Noun    string
	Release func(context.Context, client.Client, Options) (*Report, error)
}

// Kinds are what a release lets go of, in order: pods held for their results, then Jobs
// held for their records.
var Kinds = []Kind{{"pod", Release}, {"Job", ReleaseJobs}}

// listOf is an empty metadata list of kind's objects; its list kind is kind+"List".
func listOf(kind schema.GroupVersionKind) *metav1.PartialObjectMetadataList {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(kind.GroupVersion().WithKind(kind.Kind + "List"))
	return list
}

// Release removes ResultFinalizer from every pod of opts.Namespace (or of all namespaces)
// that carries it, and reports what it did. Per-pod failures are in the report's Errors;
// the error returned is a failed List, with the report of the pods handled until then.
func Release(ctx context.Context, c client.Client, opts Options) (*Report, error) {
	return release(ctx, c, opts, heldPods)
}

// ReleaseJobs is Release for the Jobs that carry RecordFinalizer or, on a MultiKueue
// worker cluster, WorkerJobFinalizer: it removes those, and only those, from each. A Job
// being deleted then goes; its accounts keep what they recorded of it. It needs jobs
// list and patch.
func ReleaseJobs(ctx context.Context, c client.Client, opts Options) (*Report, error) {
	return release(ctx, c, opts, heldJobs)
}

func release(ctx context.Context, c client.Client, opts Options, h held) (*Report, error) {
	pageSize := cmp.Or(opts.PageSize, DefaultPageSize)
	attempts := cmp.Or(opts.Attempts, DefaultAttempts)
	rep := &Report{Namespace: opts.Namespace, DryRun: opts.DryRun, ServerDryRun: opts.ServerDryRun}
	defer rep.sort()
	var err error
	rep.Examined, err = EachHeld(ctx, c, h.kind, h.finalizers, func(pod *metav1.PartialObjectMetadata, carried []string) {
		key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
		rep.Held = append(rep.Held, key)
		if opts.DryRun {
			return
		}
		switch outcome, err := releaseCarried(ctx, c, pod, attempts, h, carried, opts.ServerDryRun); outcome {
		case released:
			rep.Released = append(rep.Released, key)
		case gone:
			rep.AlreadyGone = append(rep.AlreadyGone, key)
		case releasedElsewhere:
			rep.AlreadyReleased = append(rep.AlreadyReleased, key)
		default:
			rep.Errors = append(rep.Errors, PodError{Pod: key, Err: err})
		}
	}, client.InNamespace(opts.Namespace), client.Limit(pageSize))
	if err != nil {
		return rep, fmt.Errorf("listing %s %s: %w", h.resource, where(opts.Namespace), err)
	}
	return rep, nil
}

// EachHeld lists the objects of kind that opts select (a namespace, a label selector, a
// page size; DefaultPageSize without one) and calls each with every one that carries any
// of finalizers, and those it carries in the order finalizers names them. It lists their
// metadata only, page by page, and calls each on a page before it lists the next, so a
// pass over every pod of a cluster holds neither their specs nor all of them at once.
// It returns how many objects it listed, also when a List fails.
func EachHeld(ctx context.Context, r client.Reader, kind schema.GroupVersionKind, finalizers []string,
	each func(obj *metav1.PartialObjectMetadata, carried []string), opts ...client.ListOption) (int, error) {
	opts = append([]client.ListOption{client.Limit(DefaultPageSize)}, opts...)
	listed := 0
	for cont := ""; ; {
		page := listOf(kind)
		if err := r.List(ctx, page, append(opts, client.Continue(cont))...); err != nil {
			return listed, err
		}
		listed += len(page.Items)
		for i := range page.Items {
			obj := &page.Items[i]
			carried := slices.DeleteFunc(slices.Clone(finalizers), func(f string) bool { return !slices.Contains(obj.Finalizers, f) })
			if len(carried) > 0 {
				each(obj, carried)
			}
		}
		if cont = page.Continue; cont == "" {
			return listed, nil
		}
	}
}

type outcome int

const (
	failed outcome = iota
	released
	gone
	releasedElsewhere
)

// releaseCarried removes each of finalizers (those of h that pod carries) from pod in
// turn (releaseOne): a failure, or the object gone, ends it; it was released when this
// run removed any.
func releaseCarried(ctx context.Context, c client.Client, pod *metav1.PartialObjectMetadata, attempts int, h held, finalizers []string, serverDryRun bool) (outcome, error) {
	result := releasedElsewhere
	for _, f := range finalizers {
		switch o, err := releaseOne(ctx, c, pod, attempts, h, f, serverDryRun); o {
		case failed, gone:
			return o, err
		case released:
			result = released
		}
	}
	return result, nil
}

// releaseOne patches finalizer off pod (a pod, or a Job), re-reading it after each
// failed test or conflict, at most attempts times.
// Under serverDryRun each patch is sent with dryRun=All and the first accepted one ends it:
// nothing was stored, so there is nothing to re-read.
func releaseOne(ctx context.Context, c client.Client, pod *metav1.PartialObjectMetadata, attempts int, h held, finalizer string, serverDryRun bool) (outcome, error) {
	var patchOpts []client.PatchOption
	if serverDryRun {
		patchOpts = append(patchOpts, client.DryRunAll)
	}
	patchedOnce := false
	for attempt := 1; ; attempt++ {
		// The client finds the resource by the kind; list items and patch responses of
		// the metadata API do not say Pod.
		pod.SetGroupVersionKind(h.kind)
		patch, held := RemovalPatch(pod, finalizer)
		if !held {
			if patchedOnce {
				return released, nil
			}
			return releasedElsewhere, nil
		}
		// Patch writes the pod as the server returns it into pod, so a finalizer listed
		// twice is seen and removed by the next turn. A dry run's answer is not what is
		// stored: the next finalizer's patch (releaseCarried) is built on pod, so it
		// must keep the stored finalizers' indexes.
		into := pod
		if serverDryRun {
			into = pod.DeepCopy()
		}
		err := c.Patch(ctx, into, patch, patchOpts...)
		switch {
		case err == nil && serverDryRun:
			return released, nil
		case err == nil:
			patchedOnce = true
			continue
		case apierrors.IsNotFound(err):
			return gone, nil
		case !apierrors.IsInvalid(err) && !apierrors.IsConflict(err):
			return failed, fmt.Errorf("removing finalizer %s: %w", finalizer, err)
		case attempt >= attempts:
			return failed, fmt.Errorf("removing finalizer %s: the finalizers kept changing, %d attempts: %w", finalizer, attempts, err)
		}
		// The finalizers changed since we read them: read them again.
		fresh, err := reread(ctx, c, pod, h)
		if err != nil {
			return failed, fmt.Errorf("re-reading the %s: %w", h.noun, err)
		}
		if fresh == nil {
			return gone, nil
		}
		pod = fresh
	}
}

// reread lists the one object of h's kind named like pod, nil when it is gone. A list
// rather than a get, so that the release needs no get permission.
func reread(ctx context.Context, c client.Client, pod *metav1.PartialObjectMetadata, h held) (*metav1.PartialObjectMetadata, error) {
	list := listOf(h.kind)
	sel := client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(NameField, pod.Name)}
	if err := c.List(ctx, list, client.InNamespace(pod.Namespace), sel); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if p := &list.Items[i]; p.Name == pod.Name {
			return p, nil
		}
	}
	return nil, nil
}

func (r *Report) sort() {
	for _, l := range [][]types.NamespacedName{r.Held, r.Released, r.AlreadyGone, r.AlreadyReleased} {
		slices.SortFunc(l, compareKeys)
	}
	slices.SortFunc(r.Errors, func(a, b PodError) int { return compareKeys(a.Pod, b.Pod) })
}

func compareKeys(a, b types.NamespacedName) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

func where(namespace string) string {
	if namespace == "" {
		return "in all namespaces"
	}
	return fmt.Sprintf("in namespace %q", namespace)
}
