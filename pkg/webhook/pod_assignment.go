package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds/all"
	"batchledger.dev/batchledger/pkg/relations"
)

// PodAssignPath is where the pod assignment webhook is served.
const PodAssignPath = "/mutate--v1-pod-assignment"

// +kubebuilder:webhook:path=/mutate--v1-pod-assignment,mutating=true,failurePolicy=ignore,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=mpodassign.batchledger.dev,admissionReviewVersions=v1,timeoutSeconds=5

// PodAssignmentAnnotator tells a new index pod the assignment the accounts make for its
// (Job, completion index): it sets v1alpha1.AnnotationShard, AnnotationInputRev,
// AnnotationModelRev and AnnotationAccount, which the worker reads through the downward
// API. The identity is the pod's target as result capture sees it (relations.PodTargets:
// its Job, and for a JobSet child its {jobSet, replicatedJob, jobIndex}), so repair Jobs,
// which accounts name in repair assignments, are told their shards like the originals.
//
// The webhook configuration's objectSelector sends it only pods labelled with the
// coverage scope; a pod of the results scope is told its assignment by the pod webhook
// (PodResultHolder.Assign), in the call that holds it. It fails open (failurePolicy
// Ignore), and so does the handler: a pod it cannot annotate (the manager down, no
// account yet, accounts that disagree, a failed lookup) is created without the
// annotations, and the worker falls back to what its pod template says or fails clearly.
//
// When several accounts assign the pod's identity, the pod is annotated only if they
// agree on the shard and both revisions (AnnotationAccount then lists them): one pod
// writes one result, which cannot report two shards, and choosing one account would
// silently fail the other's claim check, so the annotations are left off and a warning
// says why. So they are when one account assigns the identity through two targets that
// name its Job (by its name and as a JobSet child): the account lets that identity stand
// for no shard (DuplicateIndex), and telling the pod one of them would have it do the
// work of a shard its result cannot cover. When no account names the identity, the
// short form of the pod's Job (or of its JobSet) is read instead, unless an account of
// its name stands already (it is not the short form's, or does not follow this run): the
// controller creates that account, and a pod may be created before it is.
type PodAssignmentAnnotator struct {
	// Reader reads BatchAccounts (indexed by relations.IndexAccountTarget), Jobs and
	// JobSets; the manager's cache.
	Reader client.Reader
	// Mappings keeps the accounts' compiled mappings (nil: each pod compiles them).
	Mappings *account.MappingCache
}

var _ admission.Handler = PodAssignmentAnnotator{}

// SetupWithManager registers the handler on the manager's webhook server.
func (h PodAssignmentAnnotator) SetupWithManager(mgr ctrl.Manager) error {
	mgr.GetWebhookServer().Register(PodAssignPath, &admission.Webhook{Handler: h})
	return nil
}

// Assignment is what one pod is told: the shard its identity is assigned, the revisions
// its result must report, and the accounts that say so.
type Assignment struct {
	Shard, InputRevision, ModelRevision string
	Accounts                            []string
}

// Handle annotates an index pod with its assignment and marks it when the Job controller
// creates it (indexPodMark); any other pod is allowed unchanged.
func (h PodAssignmentAnnotator) Handle(ctx context.Context, req admission.Request) admission.Response {
	meta, err := ObjectMeta(req.Object.Raw)
	if err != nil {
		return unclassified(PodAssignPath, fmt.Errorf("decoding the pod's metadata: %w", err))
	}
	resp := h.annotate(ctx, meta, req.Namespace)
	resp.Patches = append(resp.Patches, indexPodMark(meta, req.UserInfo.Username)...)
	return resp
}

// annotate is Handle past decoding: the pod's metadata, and the namespace of the request
// for a pod that does not name its own yet.
func (h PodAssignmentAnnotator) annotate(ctx context.Context, meta metav1.ObjectMeta, namespace string) admission.Response {
	pod := &corev1.Pod{ObjectMeta: meta}
	if pod.Namespace == "" {
		pod.Namespace = namespace
	}
	a, found, err := PodAssignment(ctx, h.Reader, h.Mappings, pod)
	switch {
	case err != nil:
		return unclassified(PodAssignPath, err)
	case !found:
		return admission.Allowed("")
	case a.Shard == "" && len(a.Accounts) == 1:
		return admission.Allowed("").WithWarnings(fmt.Sprintf("batchledger did not annotate this pod with its shard: account %s assigns its Job index through two targets that name its Job, "+
			"so its result stands for no shard (AssignmentValid %s): name each Job by one target", a.Accounts[0], v1alpha1.ReasonDuplicateIndex))
	case a.Shard == "":
		return admission.Allowed("").WithWarnings(fmt.Sprintf("batchledger did not annotate this pod with its shard: accounts %s assign its Job index differently",
			strings.Join(a.Accounts, ", ")))
	}
	return admission.Patched("", assignmentPatch(pod.Annotations, a)...)
}

// assignmentPatch sets the assignment annotations, replacing any the template carried:
// the account is what judges the pod's result.
func assignmentPatch(have map[string]string, a Assignment) []jsonpatch.JsonPatchOperation {
	set := map[string]string{
		v1alpha1.AnnotationShard:    a.Shard,
		v1alpha1.AnnotationInputRev: a.InputRevision,
		v1alpha1.AnnotationModelRev: a.ModelRevision,
		v1alpha1.AnnotationAccount:  strings.Join(a.Accounts, ","),
	}
	if have == nil {
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/metadata/annotations", set)}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	ops := make([]jsonpatch.JsonPatchOperation, 0, len(keys))
	for _, k := range keys {
		// "add" replaces a member that exists.
		ops = append(ops, jsonpatch.NewOperation("add", AnnotationPath(k), set[k]))
	}
	return ops
}

// PodAssignment is the assignment the live accounts naming pod's Job make for the pod's
// (target, completion index), or its Job's or JobSet's short form when no account
// assigns it. found is false for a pod no account or short form assigns (or no index
// pod); a found assignment with an empty Shard means the pod is told none: the accounts
// disagree, or one assigns the identity through two targets (assignmentOf). The
// accounts' mappings are taken from mappings (nil: compiled here).
func PodAssignment(ctx context.Context, r client.Reader, mappings *account.MappingCache, pod *corev1.Pod) (Assignment, bool, error) {
	keys := relations.PodTargets(pod)
	if len(keys) == 0 {
		return Assignment{}, false, nil
	}
	index, _ := relations.CompletionIndex(pod)
	accounts, err := relations.LiveAccountsNaming(ctx, r, pod.Namespace, relations.PodKeys(pod)...)
	if err != nil {
		return Assignment{}, false, err
	}
	// PodTargets found the pod's Job (its controller, or for a pod orphaned from it the
	// Job its index-pod mark names).
	jobUID := relations.IndexPodJob(pod).UID
	var found []Assignment
	for _, ba := range accounts {
		if !account.Follows(ba, account.RunRef{Job: jobUID}) {
			// An Accepted account follows none but the Jobs on its record: a Job re-run
			// under a target's name is another batch's, and its pods are no more told that
			// account's shards than the account counts them; they would otherwise be told
			// none whenever the two batches assign the index differently.
			continue
		}
		if a, ok := assignmentOf(ba.Name, &ba.Spec, mappings.Get(ba), keys, index); ok {
			found = append(found, a)
		}
	}
	if len(found) == 0 {
		a, ok, err := shortFormAssignment(ctx, r, pod, keys, index)
		if err != nil || !ok {
			return Assignment{}, false, err
		}
		found = append(found, a)
	}
	return agree(found), true, nil
}

// assignmentOf maps the identity (any of keys, index) through an account's spec, compiled
// into m: the one mapping rule, account.Compile, so repair assignments count as the
// originals do. When
// two of keys map the index (the account names the pod's Job twice, by its name and as
// a JobSet child), the account lets the identity stand for no shard (DuplicateIndex,
// found once it observes the Job): the assignment found then has an empty Shard, as
// for accounts that disagree, and the pod is told none of them.
func assignmentOf(name string, spec *v1alpha1.BatchAccountSpec, m *account.Mapping, keys []v1alpha1.TargetKey, index int) (Assignment, bool) {
	var a Assignment
	found := false
	for _, k := range keys {
		o, ok := m.ShardOf(string(k), index)
		if !ok || o >= m.Shards.Count() {
			continue
		}
		if found {
			return Assignment{Accounts: []string{name}}, true
		}
		a, found = Assignment{Shard: m.Shards.Name(o), InputRevision: spec.InputRevision, ModelRevision: spec.ModelRevision, Accounts: []string{name}}, true
	}
	return a, found
}

// shortFormAssignment is the assignment the short form of the pod's Job, or of the owner
// of the child target it belongs to (its JobSet, TrainJob), declares; the account the
// controller creates from it has that object's name. A short form whose name a live
// account has already declares nothing: that account stands, and is asked first.
func shortFormAssignment(ctx context.Context, r client.Reader, pod *corev1.Pod, keys []v1alpha1.TargetKey, index int) (Assignment, bool, error) {
	// PodTargets found the pod's Job: its controller, or for a pod with none the Job its
	// index-pod mark names, which has no controller reference to read.
	jobName := relations.IndexPodJob(pod).Name
	var declarers []client.Object
	var names []string
	for _, ref := range all.Kinds.PodTargets(jobName, pod.Labels) {
		declarers, names = append(declarers, relations.KindOf(ref).NewObject()), append(names, ref.Owner())
	}
	for i, obj := range declarers {
		if err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: names[i]}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return Assignment{}, false, err
		}
		if !relations.HasShortForm(obj.GetAnnotations()) {
			continue
		}
		spec, err := relations.ShortForm(obj)
		if err != nil {
			continue // a short form that does not parse declares no account
		}
		// An account of the name that stands already is the one the controller keeps
		// (it never changes or replaces it), and it did not assign this identity: another
		// kind's short form of the name, an account written for other Jobs, or one
		// Accepted on an earlier run. Telling the pod the short form's shard would have
		// it work for an account that never counts it.
		var ba v1alpha1.BatchAccount
		switch err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: obj.GetName()}, &ba); {
		case err == nil && ba.DeletionTimestamp == nil:
			continue
		case err != nil && !apierrors.IsNotFound(err):
			return Assignment{}, false, err
		}
		if a, ok := assignmentOf(obj.GetName(), &spec, account.Compile(pod.Namespace, &spec), keys, index); ok {
			return a, true, nil
		}
	}
	return Assignment{}, false, nil
}

// agree merges the assignments several accounts make for one identity: the one they all
// make, naming every account, or one with an empty Shard when they differ.
func agree(as []Assignment) Assignment {
	out := as[0]
	out.Accounts = nil
	for _, a := range as {
		if a.Shard != out.Shard || a.InputRevision != out.InputRevision || a.ModelRevision != out.ModelRevision {
			out.Shard, out.InputRevision, out.ModelRevision = "", "", ""
		}
		out.Accounts = append(out.Accounts, a.Accounts...)
	}
	slices.Sort(out.Accounts)
	out.Accounts = slices.Compact(out.Accounts)
	return out
}
