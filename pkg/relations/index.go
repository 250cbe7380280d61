package relations

import (
	"slices"

	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/all"
)

// Field indexes. A change to one Job, pod or Workload wakes only the accounts that name
// it, through these, instead of a resync of every account.
const (
	// IndexAccountTarget indexes BatchAccounts by the IndexKey of each assignment target
	// (TargetIndexKey): its Job, or the owner of its child Job; and of each Workload its
	// targets were observed under (FollowedKeys).
	IndexAccountTarget = "batchledger.dev/target"
	// IndexOwnerUID indexes Workloads by the UID of their controller owner, and pods by
	// that of their Job (IndexPodJob).
	IndexOwnerUID = "batchledger.dev/owner-uid"
	// IndexPodTarget indexes pods by the target keys they are index pods of (PodTargets),
	// under whichever identity of the target: result capture reads a target's pods of
	// every identity through it.
	IndexPodTarget = "batchledger.dev/pod-target"
	// IndexWorkloadOwner indexes Workloads by their WorkloadKeys (their own and each
	// owner's of a target kind): the Workloads an account's targets run under, found from
	// the account alone, also once the account is gone or no longer names them.
	IndexWorkloadOwner = "batchledger.dev/workload-owner"
	// IndexResultPod indexes ShardResults by the UIDs of the pods whose results they hold
	// (recorded or dropped), so that the pod releaser can tell in O(1) whether a held
	// pod's result is recorded.
	IndexResultPod = "batchledger.dev/result-pod"
	// IndexChunkAccount indexes ShardResults by their v1alpha1.LabelAccountUID label
	// (v1alpha1.ChunkLabels): capture reads an account's chunks on each of its reconciles,
	// and a label selector would scan every chunk of the namespace to find them.
	IndexChunkAccount = "batchledger.dev/chunk-account"
	// IndexPodUID indexes pods by their UID: a chunk names the pods whose results it
	// dropped by UID alone, and the pod releaser wakes them by name.
	IndexPodUID = "batchledger.dev/pod-uid"
)

// IndexKey is a key of IndexAccountTarget and IndexWorkloadOwner (kinds.IndexKey).
type IndexKey = kinds.IndexKey

// JobKey is the index key of the Job named name.
func JobKey(name string) IndexKey { return kinds.Key(v1alpha1.TargetKindJob, name) }

// TargetIndexKey is the index key an assignment target answers to: its Job, or its
// child's owner.
func TargetIndexKey(ref v1alpha1.TargetRef) IndexKey { return kinds.TargetKey(ref) }

// AccountKeys are the distinct index keys of an account's assignment targets, in
// assignment order.
func AccountKeys(ba *v1alpha1.BatchAccount) []IndexKey {
	seen := map[IndexKey]bool{}
	var out []IndexKey
	for _, a := range ba.Spec.AllAssignments() {
		if k := TargetIndexKey(a.Target); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// WorkloadKey is the index key of the Workload named name. An account answers to it once
// one of its targets was observed running under that Workload (FollowedKeys), whichever
// way the target names its Job (a JobSet's child named by its Job name runs under the
// JobSet's Workload, whose owner keys name only the JobSet).
func WorkloadKey(name string) IndexKey { return kinds.Key("workload", name) }

// FollowedKeys are the index keys an account answers to: its AccountKeys, and the
// WorkloadKey of each Workload its status observed a target running under.
func FollowedKeys(ba *v1alpha1.BatchAccount) []IndexKey {
	keys := AccountKeys(ba)
	for _, ts := range ba.Status.Targets {
		if ts.Workload != nil && ts.Workload.Name != "" {
			if k := WorkloadKey(ts.Workload.Name); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// JobKeys are the index keys a Job answers to, of every kind (Kind.JobKeys): its own
// name, and the owner that controls it (a JobSet, the TrainJob above it). A Job that only
// carries a JobSet's labels wakes no account of the JobSet.
func JobKeys(job metav1.Object) []IndexKey { return all.Kinds.JobKeys(job) }

// PodKeys are the index keys a Job's pod answers to: its Job (IndexPodJob, as PodTargets
// reads it: the job-name label is on a pod only when the API server generated its Job's
// selector, not with manualSelector), and the owner of the child target it belongs to
// (Kind.PodTarget); none for a pod of no Job.
func PodKeys(pod client.Object) []IndexKey {
	job := IndexPodJob(pod)
	if job == nil {
		return nil
	}
	refs := all.Kinds.PodTargets(job.Name, pod.GetLabels())
	keys := make([]IndexKey, len(refs))
	for i, ref := range refs {
		keys[i] = kinds.TargetKey(ref)
	}
	return keys
}

// WorkloadKeys are the index keys a Workload answers to: its own WorkloadKey, and that of
// every owner of a kind of target (kinds.Registry.Owning).
func WorkloadKeys(wl client.Object) []IndexKey {
	keys := []IndexKey{WorkloadKey(wl.GetName())}
	for _, ref := range wl.GetOwnerReferences() {
		if k := all.Kinds.Owning(ref); k != nil {
			keys = append(keys, kinds.Key(k.Name(), ref.Name))
		}
	}
	return keys
}

func accountIndex(obj client.Object) []string {
	return keyStrings(FollowedKeys(obj.(*v1alpha1.BatchAccount)))
}

// keyStrings are keys as the strings a field index stores.
func keyStrings[K ~string](keys []K) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	return out
}

func workloadOwnerIndex(obj client.Object) []string {
	return keyStrings(WorkloadKeys(obj))
}

func ownerUIDIndex(obj client.Object) []string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

func podTargetIndex(obj client.Object) []string {
	return keyStrings(PodTargets(obj.(*corev1.Pod)))
}

func resultPodsIndex(obj client.Object) []string {
	sr := obj.(*v1alpha1.ShardResults)
	out := make([]string, 0, len(sr.Results)+len(sr.DroppedPods))
	for _, r := range sr.Results {
		out = append(out, string(r.PodUID))
	}
	for _, uid := range sr.DroppedPods {
		out = append(out, string(uid))
	}
	return out
}

func chunkAccountIndex(obj client.Object) []string {
	// As the label selector of v1alpha1.ChunkLabels: a chunk is found by the label's
	// value whatever it is, and never without the label.
	if uid, ok := obj.GetLabels()[v1alpha1.LabelAccountUID]; ok {
		return []string{uid}
	}
	return nil
}

// ChunksOfAccount lists the ShardResults of ba's namespace labelled as ba's
// (v1alpha1.ChunkLabels), through IndexChunkAccount: the chunks that may hold its
// results, whoever wrote them (the label is anyone's to write; which of them count is
// the ledger's to judge). They are copies the caller may change.
func ChunksOfAccount(ctx context.Context, c client.Reader, ba *v1alpha1.BatchAccount) ([]v1alpha1.ShardResults, error) {
	var list v1alpha1.ShardResultsList
	err := c.List(ctx, &list, client.InNamespace(ba.Namespace), client.MatchingFields{IndexChunkAccount: string(ba.UID)})
	return list.Items, err
}

// RegisterIndexes registers the field indexes the lookups of this package, the
// reconcilers and their watches rely on, with fi: the manager's cache
// (mgr.GetFieldIndexer()), or a fake client's builder in unit tests.
func RegisterIndexes(ctx context.Context, fi client.FieldIndexer) error {
	for _, ix := range []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{&v1alpha1.BatchAccount{}, IndexAccountTarget, accountIndex},
		{&kueue.Workload{}, IndexOwnerUID, ownerUIDIndex},
		{&kueue.Workload{}, IndexWorkloadOwner, workloadOwnerIndex},
		{&v1alpha1.ShardResults{}, IndexResultPod, resultPodsIndex},
		{&v1alpha1.ShardResults{}, IndexChunkAccount, chunkAccountIndex},
		{&corev1.Pod{}, IndexPodTarget, podTargetIndex},
		{&corev1.Pod{}, IndexPodUID, func(o client.Object) []string { return []string{string(o.GetUID())} }},
	} {
		if err := fi.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return err
		}
	}
	return RegisterPodIndexes(ctx, fi, &corev1.Pod{})
}

// RegisterPodIndexes registers the pod indexes alone, on pods of the given form: the
// manager's cache holds whole pods (*corev1.Pod, through RegisterIndexes), the cache of
// succeeded coverage pods holds their metadata (PodMetadata) and is indexed through this
// alone, since indexing another type there would start an informer of it.
func RegisterPodIndexes(ctx context.Context, fi client.FieldIndexer, pod client.Object) error {
	return fi.IndexField(ctx, pod, IndexOwnerUID, podJobUIDIndex)
}

// podJobUIDIndex indexes a pod under the UID of its Job (IndexPodJob), which a pod the
// garbage collector orphaned keeps.
func podJobUIDIndex(obj client.Object) []string {
	if ref := IndexPodJob(obj); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// AccountsNaming lists the accounts of namespace that name one of keys, each once, in
// the order of keys, through IndexAccountTarget. Accounts being deleted are included.
//
// The accounts are read-only: from the cache they are its own objects, not copies
// (UnsafeDisableDeepCopy). Every event mapper, the pod webhook and each publish ask this,
// often for accounts with long statuses, and none of them writes what it reads.
func AccountsNaming(ctx context.Context, c client.Reader, namespace string, keys ...IndexKey) ([]*v1alpha1.BatchAccount, error) {
	var out []*v1alpha1.BatchAccount
	seen := map[string]bool{}
	for _, k := range keys {
		var list v1alpha1.BatchAccountList
		if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{IndexAccountTarget: string(k)},
			client.UnsafeDisableDeepCopy); err != nil {
			return out, err
		}
		for i := range list.Items {
			ba := &list.Items[i]
			if !seen[ba.Name] {
				seen[ba.Name] = true
				out = append(out, ba)
			}
		}
	}
	return out, nil
}

// WorkloadsOf lists the Workloads of namespace whose owner answers to one of
// keys, each once, through IndexWorkloadOwner. They are read-only, as in AccountsNaming.
func WorkloadsOf(ctx context.Context, c client.Reader, namespace string, keys ...IndexKey) ([]*kueue.Workload, error) {
	var out []*kueue.Workload
	seen := map[string]bool{}
	for _, k := range keys {
		var list kueue.WorkloadList
		if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{IndexWorkloadOwner: string(k)},
			client.UnsafeDisableDeepCopy); err != nil {
			return out, err
		}
		for i := range list.Items {
			if wl := &list.Items[i]; !seen[wl.Name] {
				seen[wl.Name] = true
				out = append(out, wl)
			}
		}
	}
	return out, nil
}

// LiveAccountsNaming is AccountsNaming without the accounts being deleted (read-only as
// well). Holding and releasing pods, stamping scopes and publishing Workload conditions
// all ask it.
func LiveAccountsNaming(ctx context.Context, c client.Reader, namespace string, keys ...IndexKey) ([]*v1alpha1.BatchAccount, error) {
	all, err := AccountsNaming(ctx, c, namespace, keys...)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, ba := range all {
		if ba.DeletionTimestamp == nil {
			out = append(out, ba)
		}
	}
	return out, nil
}
