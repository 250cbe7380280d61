package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"

	"batchledger.dev/batchledger/pkg/acceptance"
	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/ledgerkey"
	"batchledger.dev/batchledger/pkg/relations"
)

// Bounds of the result record. A chunk stays far below etcd's default request limit of
// 1.5 MiB whatever the batch does: it spills into a continuation chunk past
// ChunkByteBudget, and retries past MaxResultsPerShard are counted, not stored.
const (
	// ChunkByteBudget is the most JSON bytes of results one ShardResults object holds.
	ChunkByteBudget = 1 << 20
	// MaxResultsPerShard is how many results (attempts) of one shard are kept from each
	// Job identity: a JobSet restart attempt, a repair or a recreated Job brings its own,
	// so that retries of one identity never crowd out the result of the next.
	MaxResultsPerShard = 8
	// MaxResultsPerShardTotal bounds the results of one shard kept from all its
	// identities together: eight identities' worth of retries, or 64 restarts or repairs
	// of one result each. Superseded identities' results never count for a shard
	// (StaleIdentity), so they never crowd out the identity a target follows when its
	// result is captured: past the bound, the oldest result of an identity no target
	// follows makes room (its pod listed as dropped).
	MaxResultsPerShardTotal = 8 * MaxResultsPerShard
	// MaxUnassignedResults is how many results of identities assigned no shard are kept.
	MaxUnassignedResults = 256
)

// The most results and dropped pods one ShardResults may list: the CRD's maxItems, past
// which the API server refuses the chunk on every write.
const (
	maxChunkResults = 4096
	maxChunkDropped = 16384
)

// chunkKey names the span of results a shard ordinal's result goes to: the ordinal's
// block of v1alpha1.ResultsPerChunk, or "u" for identities assigned no shard.
func chunkKey(ordinal int) (string, int32) {
	if ordinal < 0 {
		return "u", -1
	}
	first := ordinal / v1alpha1.ResultsPerChunk * v1alpha1.ResultsPerChunk
	return fmt.Sprint(first / v1alpha1.ResultsPerChunk), int32(first)
}

// chunkName names a chunk after the account's UID (never its name: a recreated account
// must not meet its predecessor's chunks, and a name may be 253 characters), its span
// and its continuation number.
func chunkName(uid types.UID, span string, part int) string {
	if part == 0 {
		return fmt.Sprintf("%s-%s", uid, span)
	}
	return fmt.Sprintf("%s-%s-%d", uid, span, part)
}

// resultChunks are an account's chunks, grouped by span, in continuation order, with
// what capture needs to know of them.
type resultChunks struct {
	ba    *v1alpha1.BatchAccount
	spans map[string][]*v1alpha1.ShardResults
	// sizes are the JSON sizes of chunks capture appends to, computed once.
	sizes    map[*v1alpha1.ShardResults]int
	kept     map[resultSlot]int
	perShard map[int32]int
	recorded map[types.UID]bool
	nextSeq  int64
	dirty    map[*v1alpha1.ShardResults]bool
	// taken are the names of chunks labelled for the account that capture ignores (not
	// the manager's): a new chunk never takes their name, so a forged chunk under the
	// next continuation's name does not block capture.
	taken map[string]bool
	// followed are the identities the account follows (followedIdentities): results of
	// such an identity may stand for their shard, so they never make room for another's.
	followed map[identityKey]bool
}

// identityKey is a target key and the Job UID of one of its identities.
type identityKey struct {
	target string
	job    types.UID
}

// follows reports whether res is a result of an identity the account follows.
func (rc *resultChunks) follows(res *v1alpha1.RecordedResult) bool {
	return rc.followed[identityKey{res.Target, res.JobUID}]
}

// resultSlot is what the bounds on kept results count per: a shard ordinal and the Job
// identity that reported it, or all results of identities assigned no shard (ordinal -1).
type resultSlot struct {
	ordinal int32
	target  string
	job     types.UID
}

func slotOf(res *v1alpha1.RecordedResult) resultSlot {
	if res.Ordinal < 0 {
		return resultSlot{ordinal: -1}
	}
	return resultSlot{ordinal: res.Ordinal, target: res.Target, job: res.JobUID}
}

// loadChunks reads the chunks the manager recorded for ba (Reconciler.trustedChunks
// keeps only those); ignored are the names of the others, which capture neither counts
// nor appends to nor reuses. A trusted chunk without a signature was written by an
// earlier version: it is rewritten, signed, with the next write.
func loadChunks(ba *v1alpha1.BatchAccount, items []v1alpha1.ShardResults, ignored ...string) *resultChunks {
	rc := &resultChunks{ba: ba, spans: map[string][]*v1alpha1.ShardResults{}, sizes: map[*v1alpha1.ShardResults]int{},
		kept: map[resultSlot]int{}, perShard: map[int32]int{}, recorded: map[types.UID]bool{}, nextSeq: 1, dirty: map[*v1alpha1.ShardResults]bool{},
		taken: map[string]bool{}}
	for _, name := range ignored {
		rc.taken[name] = true
	}
	judging := ba.Spec.Judging()
	for i := range items {
		c := &items[i]
		if !metav1.IsControlledBy(c, ba) {
			rc.taken[c.Name] = true
			continue // the label matched, the owner did not: never adopt another's chunk
		}
		if c.Annotations[ledgerkey.AnnotationSignature] == "" {
			rc.dirty[c] = true // a legacy chunk: sign it
		}
		span, _ := chunkKey(int(c.FirstOrdinal))
		rc.spans[span] = append(rc.spans[span], c)
		for _, res := range c.Results {
			if judging.Judged(res.RuleDigest) {
				rc.recorded[res.PodUID] = true
			}
			rc.kept[slotOf(&res)]++
			rc.perShard[res.Ordinal]++
			rc.nextSeq = max(rc.nextSeq, res.Sequence+1)
		}
		for _, uid := range c.DroppedPods {
			rc.recorded[uid] = true
		}
	}
	for _, cs := range rc.spans {
		// Continuations of a span differ only in their suffix: "<uid>-3" < "<uid>-3-1" <
		// ... < "<uid>-3-10", shorter names first.
		slices.SortFunc(cs, func(a, b *v1alpha1.ShardResults) int {
			return cmp.Or(cmp.Compare(len(a.Name), len(b.Name)), strings.Compare(a.Name, b.Name))
		})
	}
	return rc
}

// add records one result (or, past the bound of its shard and identity, or of its shard
// when no other identity's result makes room for the identity its target follows
// (current), only its pod as dropped) in the last chunk of its span, spilling into a new
// chunk past ChunkByteBudget.
func (rc *resultChunks) add(res v1alpha1.RecordedResult, current bool) {
	span, first := chunkKey(int(res.Ordinal))
	limit := MaxResultsPerShard
	if res.Ordinal < 0 {
		limit = MaxUnassignedResults
	}
	slot := slotOf(&res)
	// evicted is the pod of a result evictOther took out of a chunk with no room left for
	// it as a dropped pod: it is listed with this result instead.
	var evicted types.UID
	keep := rc.kept[slot] < limit &&
		(res.Ordinal < 0 || rc.perShard[res.Ordinal] < MaxResultsPerShardTotal || current && rc.evictOther(span, slot, &evicted))
	var size int
	if keep {
		res.Sequence = rc.nextSeq
		rc.nextSeq++
		b, _ := json.Marshal(res)
		size = len(b) + 1
	} else {
		size = len(res.PodUID) + 3
	}
	if evicted != "" {
		size += len(evicted) + 3
	}
	cs := rc.spans[span]
	var c *v1alpha1.ShardResults
	if len(cs) > 0 {
		c = cs[len(cs)-1]
		if _, ok := rc.sizes[c]; !ok {
			b, _ := json.Marshal(c)
			rc.sizes[c] = len(b)
		}
		if rc.sizes[c]+size > ChunkByteBudget || len(c.Results) >= maxChunkResults || len(c.DroppedPods) >= maxChunkDropped {
			c = nil
		}
	}
	if c == nil {
		part := len(cs)
		for rc.taken[chunkName(rc.ba.UID, span, part)] || slices.ContainsFunc(cs, func(o *v1alpha1.ShardResults) bool {
			return o.Name == chunkName(rc.ba.UID, span, part)
		}) {
			part++
		}
		c = newChunk(rc.ba, chunkName(rc.ba.UID, span, part), first)
		rc.spans[span] = append(cs, c)
		b, _ := json.Marshal(c)
		rc.sizes[c] = len(b)
	}
	if keep {
		c.Results = append(c.Results, res)
		rc.kept[slot]++
		rc.perShard[res.Ordinal]++
	} else {
		c.DroppedPods = append(c.DroppedPods, res.PodUID)
	}
	if evicted != "" {
		// c has room for one more dropped pod: a chunk at maxChunkDropped is replaced above.
		c.DroppedPods = append(c.DroppedPods, evicted)
	}
	rc.sizes[c] += size
	rc.recorded[res.PodUID] = true
	rc.dirty[c] = true
}

// evictOther makes room in span for a result of slot's identity, the one its target
// follows: the oldest kept result of slot's shard from an identity no target follows
// (never counted for the shard: StaleIdentity) becomes a dropped pod, so that the
// shard's results stay within MaxResultsPerShardTotal. Another target's followed
// identity (a repair's, the original's) is kept: its result may stand for the shard.
// False when there is none. The pod is listed as dropped in the result's chunk, or, when
// that chunk lists maxChunkDropped already, set in evicted for add to list: any chunk of
// the account records it, and one past the CRD's maxItems would never be written again.
func (rc *resultChunks) evictOther(span string, slot resultSlot, evicted *types.UID) bool {
	var oldest *v1alpha1.ShardResults
	at := -1
	for _, c := range rc.spans[span] {
		for i := range c.Results {
			r := &c.Results[i]
			if r.Ordinal != slot.ordinal || slotOf(r) == slot || rc.follows(r) || (at >= 0 && r.Sequence >= oldest.Results[at].Sequence) {
				continue
			}
			oldest, at = c, i
		}
	}
	if at < 0 {
		return false
	}
	r := oldest.Results[at]
	oldest.Results = slices.Delete(oldest.Results, at, at+1)
	if len(oldest.DroppedPods) < maxChunkDropped {
		oldest.DroppedPods = append(oldest.DroppedPods, r.PodUID)
	} else {
		*evicted = r.PodUID
	}
	rc.kept[slotOf(&r)]--
	rc.perShard[r.Ordinal]--
	delete(rc.sizes, oldest) // measured again before the next append
	rc.dirty[oldest] = true
	return true
}

func (rc *resultChunks) all() []v1alpha1.ShardResults {
	var out []v1alpha1.ShardResults
	for _, cs := range rc.spans {
		for _, c := range cs {
			out = append(out, *c)
		}
	}
	return out
}

// captureResults records the result of every succeeded pod of the account's targets that
// is not recorded yet, writing only the chunks that changed, and returns every recorded
// result in capture order. A result is recorded before the pod that reported it is
// released (see PodReleaser), so none is lost. When the acceptance rule does not compile
// in this controller, nothing new is recorded (the pods stay held, their messages
// unjudged) and the error is returned for the account to say so. Without the signing key
// nothing is recorded or read either, and the account is told why (ResultsUnreadable),
// so that the rest of its status (a Job's end, which the record finalizer waits for) is
// still written.
func (r *Reconciler) captureResults(ctx context.Context, ba *v1alpha1.BatchAccount, m *account.Mapping, obs map[string]observed) ([]account.Result, string, error) {
	if !ba.Spec.RequiresResults() {
		return nil, "", nil
	}
	chunks, err := relations.ChunksOfAccount(ctx, r, ba)
	if err != nil {
		return nil, "", err
	}
	key, err := r.ledger().Key(ctx)
	if err != nil {
		return nil, "", &resultsUnreadable{err}
	}
	trusted, ignored, err := r.trustedChunks(ctx, ba, chunks)
	if err != nil {
		return nil, "", err
	}
	taken := make([]string, len(ignored))
	for i := range ignored {
		taken[i] = ignored[i].Name
	}
	rc := loadChunks(ba, trusted, taken...)
	rc.followed = followedIdentities(ba, obs)
	crit, critErr := r.criteria().Get(ba.Spec.Acceptance.Rule)
	if critErr != nil {
		return account.RecordedInOrder(rc.all()), critErr.Error(), nil
	}
	now := metav1.NewTime(r.now())
	legacyBefore := legacyPodsBefore(key, now.Time)
	// ended are the end times of the pods whose results this capture records.
	var ended []time.Time
	// The sources of every target, recorded together in the order they finished: the
	// first accepted result of a shard stands, so two successes of one shard captured
	// together (two pods of one index, or the identities an original assignment and a
	// repair give the shard) must be ordered neither by the cache, whose index lists pods
	// in no particular order, nor by the order the spec names the targets.
	type targetSource struct {
		target account.Target
		resultSource
	}
	var sources []targetSource
	for _, t := range m.Targets {
		o, ok := obs[t.Key]
		if !ok {
			continue
		}
		for i := range o.pods {
			pod := &o.pods[i]
			if rc.recorded[pod.UID] {
				continue // most of a large account's pods, on each of its reconciles
			}
			if idx, jobUID, succeeded := relations.SucceededTargetPodIndex(t.Ref, ba.Namespace, pod, legacyBefore); succeeded {
				sources = append(sources, targetSource{t, resultSource{pod: pod, jobUID: jobUID, index: idx}})
			}
		}
		// A dispatched Job's pods ran on a MultiKueue worker, which recorded their results.
		fromWorkers, err := r.workerSources(ctx, ba, t, o)
		if err != nil {
			return nil, "", err
		}
		for _, src := range fromWorkers {
			sources = append(sources, targetSource{t, src})
		}
	}
	// Stable: a pod two targets reach is recorded under the first of them in the mapping.
	slices.SortStableFunc(sources, func(a, b targetSource) int {
		return cmp.Or(FinishedAt(a.pod).Compare(FinishedAt(b.pod)), strings.Compare(a.pod.Name, b.pod.Name),
			strings.Compare(string(a.pod.UID), string(b.pod.UID)))
	})
	for _, src := range sources {
		if rc.recorded[src.pod.UID] || !account.Follows(ba, account.RunRef{Job: src.jobUID}) {
			// An Accepted account records nothing of a Job re-run under a target's name
			// since (another batch's), as the pod releaser holds none of its pods for it
			// (relations.CapturedBy).
			continue
		}
		t := src.target
		res := acceptance.FromPod(t.Key, src.jobUID, src.index, src.pod, ba.Spec.Acceptance.ResultContainer, crit)
		res.Cluster = src.cluster
		ordinal, assigned := m.ShardOf(t.Key, src.index)
		if !assigned {
			ordinal = -1
		}
		rc.add(res.Recorded(ordinal, now), rc.followed[identityKey{t.Key, src.jobUID}])
		ended = append(ended, FinishedAt(src.pod))
	}
	var refused []*v1alpha1.ShardResults
	for c := range rc.dirty {
		key.Sign(c)
		err := r.writer().WriteChunk(ctx, c)
		if c.ResourceVersion == "" && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// No new object may be created in a namespace being deleted: a retry would
			// wait for nothing. The existing chunks are still updated; the results of this
			// one stay unrecorded, and the pod releaser lets their pods go.
			refused = append(refused, c)
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("recording results in ShardResults %s: %w", c.Name, err)
		}
		r.Metrics.resultsWritten()
	}
	if len(refused) > 0 {
		ctrl.LoggerFrom(ctx).Info("namespace is being deleted: results that need a new ShardResults are not recorded", "chunks", len(refused))
		rc.drop(refused)
	} else {
		// With a chunk refused, which pods' results were recorded is not worth working
		// out for a namespace being deleted: none is observed.
		r.Metrics.resultsCaptured(r.now(), ended)
	}
	return account.RecordedInOrder(rc.all()), "", nil
}

// followedIdentities are the identities of ba's targets whose results may stand for a
// shard: the Job each target observes now (obs), and the identity its status records (a
// deleted Job whose record stands for its target, or one a Job of the target's name
// that the account does not follow stands beside).
func followedIdentities(ba *v1alpha1.BatchAccount, obs map[string]observed) map[identityKey]bool {
	out := make(map[identityKey]bool, len(ba.Status.Targets)+len(obs))
	for i := range ba.Status.Targets {
		if t := &ba.Status.Targets[i]; t.UID != "" {
			out[identityKey{t.Name, t.UID}] = true
		}
	}
	for key, o := range obs {
		if o.job != nil {
			out[identityKey{key, o.job.UID}] = true
		}
	}
	return out
}

// resultsUnreadable is captureResults' error when the results can be neither recorded
// nor read (the signing key does not load): the account still observes its targets.
type resultsUnreadable struct{ err error }

func (e *resultsUnreadable) Error() string { return e.err.Error() }
func (e *resultsUnreadable) Unwrap() error { return e.err }

// drop forgets chunks that could not be created, and so the results they held.
func (rc *resultChunks) drop(chunks []*v1alpha1.ShardResults) {
	for _, c := range chunks {
		span, _ := chunkKey(int(c.FirstOrdinal))
		rc.spans[span] = slices.DeleteFunc(rc.spans[span], func(x *v1alpha1.ShardResults) bool { return x == c })
		delete(rc.dirty, c)
	}
}

func newChunk(ba *v1alpha1.BatchAccount, name string, first int32) *v1alpha1.ShardResults {
	labels := v1alpha1.ChunkLabels(ba)
	if len(validation.IsValidLabelValue(ba.Name)) == 0 {
		labels[v1alpha1.LabelAccount] = ba.Name // for people; the UID label is what counts
	}
	return &v1alpha1.ShardResults{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ba.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ba, v1alpha1.GroupVersion.WithKind("BatchAccount"))},
		},
		Account:      ba.Name,
		AccountUID:   ba.UID,
		FirstOrdinal: first,
	}
}

// criteria returns the rule cache, creating it once: reconcile workers run side by side.
func (r *Reconciler) criteria() *acceptance.Cache {
	r.criteriaOnce.Do(func() {
		if r.Criteria == nil {
			r.Criteria = acceptance.NewCache(acceptance.DefaultCacheSize)
		}
	})
	return r.Criteria
}
