package controller

import (
	"time"

	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/ledgerkey"
)

// The manager reads the key Secret by name, and fills it when the install created it
// empty; nothing else of its namespace's Secrets. The name is unprefixed, as config/
// creates it (kustomize's namePrefix rewrites it, the chart maps it to its release's).
//
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;update,resourceNames=ledger-key

// MetricChunksIgnored counts the ShardResults chunks the controller ignored, once per
// chunk and resourceVersion, by why (a ledgerkey.Verdict, or NotOwned).
const MetricChunksIgnored = "batchledger_result_chunks_ignored_total"

// IgnoredNotOwned: the chunk's label, accountUID and controller owner do not all name
// the account (or one another).
const IgnoredNotOwned = "NotOwned"

// EventActionVerifyResults is the action of the events about chunks not counted.
const EventActionVerifyResults = "VerifyResults"

var chunksIgnored = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: MetricChunksIgnored,
	Help: "ShardResults chunks not counted because the manager did not record them (unsigned, signed with another key, tampered, or not owned by their account), once per chunk version.",
}, []string{"why"})

func init() { metrics.Registry.MustRegister(chunksIgnored) }

// KeySource loads the signing key; ledgerkey.Source reads it from its Secret.
type KeySource interface {
	Load(ctx context.Context) (*ledgerkey.Key, error)
}

// Ledger decides which ShardResults chunks count: only those the manager recorded
// itself, signed with its key (ledgerkey), or written by an earlier version that did
// not sign before the key existed. The account reconciler counts and appends to those
// only; the pod releaser releases a pod only on a chunk the ledger trusts
// (ChunkTrusted). One Ledger serves both.
//
// A chunk is verified once per resourceVersion: the verdict is cached by (UID,
// resourceVersion), so a reconcile that reads an unchanged chunk does not hash it again.
type Ledger struct {
	// Source loads the key on first use (the manager's: its Secret). Nil generates a key
	// that lives as long as the Ledger (tests): chunks of an earlier process do not verify.
	Source KeySource

	mu  sync.Mutex
	key *ledgerkey.Key
	// verdicts are the cached verdicts by chunk (chunkID), each for one resourceVersion.
	verdicts map[string]chunkVerdict
	// ignored is the number of chunks each account's last capture ignored (accounts with
	// none are not kept).
	ignored map[types.UID]int32
}

type chunkVerdict struct {
	resourceVersion string
	verdict         ledgerkey.Verdict
	// reported is whether the chunk's ignoring was reported (event, metric).
	reported bool
}

// maxCachedVerdicts bounds the cache; past it the cache starts over (each chunk is
// verified once more). 100,000-shard batches have 400 chunks each.
const maxCachedVerdicts = 1 << 16

// Key returns the signing key, loading it on first use. An error is retried at the next
// call: without the key nothing is counted or written.
func (l *Ledger) Key(ctx context.Context) (*ledgerkey.Key, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.keyLocked(ctx)
}

func (l *Ledger) keyLocked(ctx context.Context) (*ledgerkey.Key, error) {
	if l.key != nil {
		return l.key, nil
	}
	var k *ledgerkey.Key
	var err error
	if l.Source == nil {
		k, _, err = ledgerkey.Generate(metav1.Time{}.Time)
	} else {
		k, err = l.Source.Load(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("loading the result signing key: %w", err)
	}
	l.key = k
	return k, nil
}

// ChunkTrusted reports whether c is a chunk the manager recorded: its label, accountUID
// and controller owner name one account, and its signature verifies (or it is a legacy
// chunk, see ledgerkey.Key.Verify). The pod releaser must release a pod on the strength
// of a chunk only when this is true: a forged chunk naming a held pod must not let it go.
func (l *Ledger) ChunkTrusted(ctx context.Context, c *v1alpha1.ShardResults) (bool, error) {
	why, err := l.judge(ctx, nil, c)
	return why == "", err
}

// judge returns why c is not counted for ba (nil: for the account c names), or "" when
// it is.
func (l *Ledger) judge(ctx context.Context, ba *v1alpha1.BatchAccount, c *v1alpha1.ShardResults) (string, error) {
	if !c.OwnedBy(ba) { // the rule the plugin reads chunks by too
		return IgnoredNotOwned, nil
	}
	v, err := l.verdict(ctx, c)
	if err != nil || v.Trusted() {
		return "", err
	}
	return string(v), nil
}

// verdict verifies c's signature, once per (UID, resourceVersion).
func (l *Ledger) verdict(ctx context.Context, c *v1alpha1.ShardResults) (ledgerkey.Verdict, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cacheable := c.ResourceVersion != ""
	if cv, ok := l.verdicts[chunkID(c)]; ok && cacheable && cv.resourceVersion == c.ResourceVersion {
		return cv.verdict, nil
	}
	k, err := l.keyLocked(ctx)
	if err != nil {
		return "", err
	}
	v := k.Verify(c)
	if cacheable {
		if l.verdicts == nil || len(l.verdicts) >= maxCachedVerdicts {
			l.verdicts = map[string]chunkVerdict{}
		}
		l.verdicts[chunkID(c)] = chunkVerdict{resourceVersion: c.ResourceVersion, verdict: v}
	}
	return v, nil
}

// firstReport reports whether c's ignoring is to be reported now: once per (UID,
// resourceVersion) of a chunk this Ledger verified.
func (l *Ledger) firstReport(c *v1alpha1.ShardResults) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.ResourceVersion == "" {
		return true
	}
	cv, ok := l.verdicts[chunkID(c)]
	if !ok || cv.resourceVersion != c.ResourceVersion {
		// Ignored without a verification (not owned): remember the version reported.
		if l.verdicts == nil || len(l.verdicts) >= maxCachedVerdicts {
			l.verdicts = map[string]chunkVerdict{}
		}
		cv = chunkVerdict{resourceVersion: c.ResourceVersion, verdict: ledgerkey.Unsigned}
	}
	if cv.reported {
		return false
	}
	cv.reported = true
	l.verdicts[chunkID(c)] = cv
	return true
}

// chunkID names a chunk in the cache: its UID (a chunk deleted and created again under
// its name is another chunk), or its namespace and name for an object without one.
func chunkID(c *v1alpha1.ShardResults) string {
	if c.UID != "" {
		return string(c.UID)
	}
	return c.Namespace + "/" + c.Name
}

// setIgnored records how many chunks of an account its last capture ignored.
func (l *Ledger) setIgnored(account types.UID, n int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n == 0 {
		delete(l.ignored, account)
		return
	}
	if l.ignored == nil {
		l.ignored = map[types.UID]int32{}
	}
	l.ignored[account] = n
}

// IgnoredChunks is how many chunks labelled for the account its last capture ignored.
func (l *Ledger) IgnoredChunks(account types.UID) int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ignored[account]
}

// ledger returns the reconciler's Ledger, creating one with a key of its own once
// when none was given (tests).
func (r *Reconciler) ledger() *Ledger {
	r.ledgerOnce.Do(func() {
		if r.Ledger == nil {
			r.Ledger = &Ledger{}
		}
	})
	return r.Ledger
}

// trustedChunks splits the chunks labelled for ba into those the manager recorded and
// those it did not, reporting each of the latter once per resourceVersion: a Warning
// event on the account and the ignored-chunks metric.
func (r *Reconciler) trustedChunks(ctx context.Context, ba *v1alpha1.BatchAccount, items []v1alpha1.ShardResults) (trusted, ignored []v1alpha1.ShardResults, err error) {
	l := r.ledger()
	for i := range items {
		c := &items[i]
		why, err := l.judge(ctx, ba, c)
		if err != nil {
			return nil, nil, err
		}
		if why == "" {
			trusted = append(trusted, *c)
			continue
		}
		ignored = append(ignored, *c)
		if !l.firstReport(c) {
			continue
		}
		chunksIgnored.WithLabelValues(why).Inc()
		ctrl.LoggerFrom(ctx).Info("ignoring a ShardResults chunk the manager did not record", "chunk", c.Name, "why", why, "resourceVersion", c.ResourceVersion)
		if r.Recorder != nil {
			r.Recorder.Eventf(ba, c, corev1.EventTypeWarning, v1alpha1.EventReasonUnrecordedResultsIgnored, EventActionVerifyResults,
				"ShardResults %s is not counted: %s (%d results, %d dropped pods); the manager counts only the results it recorded itself",
				c.Name, ignoredNote(why), len(c.Results), len(c.DroppedPods))
		}
	}
	l.setIgnored(ba.UID, int32(len(ignored)))
	return trusted, ignored, nil
}

// ignoredNote says why in words.
func ignoredNote(why string) string {
	switch why {
	case IgnoredNotOwned:
		return "its label, accountUID and controller owner do not all name this account"
	case string(ledgerkey.Unsigned):
		return "it carries no signature of the manager and was created after signing began"
	case string(ledgerkey.OtherKey):
		return "it is signed with another key than the manager's"
	case string(ledgerkey.Tampered):
		return "its content was changed after the manager signed it"
	}
	return why
}

// legacyPodsBefore is the creation time before which a pod without the index-pod mark
// still reports its result (relations.ReportsResult): when the manager began marking
// (the key's IndexPodsSince), for as long as an earlier version may have held such a pod
// (DefaultMaxResultHold); the zero time after that, so that a pod made by hand before the
// upgrade is not a result forever.
func legacyPodsBefore(key *ledgerkey.Key, now time.Time) time.Time {
	if now.Before(key.IndexPodsSince.Add(DefaultMaxResultHold)) {
		return key.IndexPodsSince
	}
	return time.Time{}
}

// LegacyPodsBefore is legacyPodsBefore of the ledger's key at now; the zero time for a
// nil Ledger (some tests), which trusts no unmarked pod.
func (l *Ledger) LegacyPodsBefore(ctx context.Context, now time.Time) (time.Time, error) {
	if l == nil {
		return time.Time{}, nil
	}
	key, err := l.Key(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return legacyPodsBefore(key, now), nil
}
