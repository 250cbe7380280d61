package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/result"
)

// IndexResultPod indexes ShardResults by the UIDs of the pods whose results they hold, so
// that the pod releaser can tell in O(1) whether a held pod's result is recorded.
const IndexResultPod = "batchledger.dev/result-pod"

func resultPods(obj client.Object) []string {
	sr := obj.(*v1alpha1.ShardResults)
	out := make([]string, len(sr.Results))
	for i, r := range sr.Results {
		out[i] = string(r.PodUID)
	}
	return out
}

// requiresResults is whether an account captures results at all; accounts that do not
// never hold pods nor record messages.
func requiresResults(ba *v1alpha1.BatchAccount) bool {
	return ba.Spec.Acceptance != nil && ba.Spec.Acceptance.RequireResults
}

// chunkName names the ShardResults object holding results of a shard ordinal.
func chunkName(account string, ordinal int) (string, int32) {
	if ordinal < 0 {
		return account + "-unassigned", -1
	}
	first := ordinal / v1alpha1.ResultsPerChunk * v1alpha1.ResultsPerChunk
	return fmt.Sprintf("%s-%d", account, first/v1alpha1.ResultsPerChunk), int32(first)
}

// captureResults records the result of every succeeded pod of the account's targets that
// is not recorded yet, writing only the chunks that changed, and returns every recorded
// result in capture order. A result is recorded before the pod that reported it is
// released (see PodReleaser), so none is lost.
func (r *Reconciler) captureResults(ctx context.Context, ba *v1alpha1.BatchAccount, m *account.Mapping, obs map[string]observed) ([]account.Result, error) {
	if !requiresResults(ba) {
		return nil, nil
	}
	var list v1alpha1.ShardResultsList
	if err := r.List(ctx, &list, client.InNamespace(ba.Namespace), client.MatchingLabels{v1alpha1.LabelAccount: ba.Name}); err != nil {
		return nil, err
	}
	chunks := map[string]*v1alpha1.ShardResults{}
	recorded := map[types.UID]bool{}
	for i := range list.Items {
		c := &list.Items[i]
		chunks[c.Name] = c
		for _, res := range c.Results {
			recorded[res.PodUID] = true
		}
	}
	crit, critErr := r.criteria().Get(ba.Spec.Acceptance.Rule)
	dirty := map[string]bool{}
	now := metav1.NewTime(r.now())
	for _, t := range m.Targets {
		o, ok := obs[t.Key]
		if !ok {
			continue
		}
		for i := range o.pods {
			pod := &o.pods[i]
			idx, capturable := capturableIndex(pod, o.obs.Job)
			if !capturable || pod.Status.Phase != corev1.PodSucceeded || recorded[pod.UID] {
				continue
			}
			res := result.FromPod(t.Key, o.obs.Job.UID, idx, pod, ba.Spec.Acceptance.ResultContainer, crit)
			if critErr != nil && res.RejectReason == "" {
				res.RejectReason, res.RejectMessage = result.ReasonCriterionError, critErr.Error()
			}
			ordinal, assigned := m.ShardOf(t.Key, idx)
			if !assigned {
				ordinal = -1
			}
			name, first := chunkName(ba.Name, ordinal)
			c := chunks[name]
			if c == nil {
				c = newChunk(ba, name, first)
				chunks[name] = c
			}
			c.Results = append(c.Results, res.Recorded(ordinal, now))
			recorded[pod.UID] = true
			dirty[name] = true
		}
	}
	for name := range dirty {
		c := chunks[name]
		var err error
		if c.ResourceVersion == "" {
			err = r.Create(ctx, c)
		} else {
			err = r.Update(ctx, c)
		}
		if err != nil {
			return nil, fmt.Errorf("recording results in ShardResults %s: %w", name, err)
		}
		r.Metrics.resultsWritten()
	}
	all := make([]v1alpha1.ShardResults, 0, len(chunks))
	for _, c := range chunks {
		all = append(all, *c)
	}
	return account.RecordedInOrder(all), nil
}

func newChunk(ba *v1alpha1.BatchAccount, name string, first int32) *v1alpha1.ShardResults {
	return &v1alpha1.ShardResults{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ba.Namespace,
			Labels:          map[string]string{v1alpha1.LabelAccount: ba.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ba, v1alpha1.GroupVersion.WithKind("BatchAccount"))},
		},
		Account:      ba.Name,
		FirstOrdinal: first,
	}
}

// criteria returns the rule cache, creating it once: reconcile workers run side by side.
func (r *Reconciler) criteria() *result.Cache {
	r.criteriaOnce.Do(func() {
		if r.Criteria == nil {
			r.Criteria = result.NewCache(result.DefaultCacheSize)
		}
	})
	return r.Criteria
}
