package account

import (
	"cmp"
	clist "container/list"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// mappingCacheRuns bounds the runs (Run) and declared shard names the cached mappings
// hold together: a few hundred bytes each with their indexes (a name with its entry in
// the ordinal map), so ~100 MiB at most, room for the largest spec the API server
// stores.
const mappingCacheRuns = 1 << 19

// mappingKey is a spec: an account's UID and the generation of its spec.
type mappingKey struct {
	uid        types.UID
	generation int64
}

// mappingEntry is the mapping of one spec, compiled once by the first to ask for it
// while the others wait for it.
type mappingEntry struct {
	key  mappingKey
	once sync.Once
	m    *Mapping
	// runs is the size the cache counts for the entry, once compiled (0 before):
	// mappingSize.
	runs int
}

// MappingCache keeps compiled mappings by spec, the least recently used dropped past
// mappingCacheRuns (runs and shard names), for the pod webhooks, the account
// reconciler and the short-form reconcilers alike. A mapping that spreads its indexes over many runs takes a fraction
// of a second to compile for a spec of a megabyte: compiled per pod, a batch of 100,000 such pods cost the webhook
// server hours of CPU and queued pods past the webhook's timeout, and compiled per
// reconcile, every Job status change of the batch cost a reconcile worker as much. A
// spec never changes under its UID and generation, so an entry needs no invalidation.
// The zero value is ready to use; it is safe for concurrent use, and the mappings it
// returns are shared between its callers: they are only read.
//
// The LRU is ours rather than k8s.io/utils/lru's: that one bounds the number of
// entries, while a mapping's cost is its runs and names (one account may hold as many as
// thousands of others together), and its lock cannot cover the weight kept beside it.
type MappingCache struct {
	// limit bounds the runs and shard names held (0: mappingCacheRuns).
	limit    int
	compiles atomic.Int64
	mu       sync.Mutex
	runs     int         // the sizes of the entries held (mappingSize)
	order    *clist.List // of *mappingEntry, most recently used first
	entries  map[mappingKey]*clist.Element
}

// Compiles is how many mappings the cache has compiled: a spec asked for again while
// kept is not compiled again.
func (c *MappingCache) Compiles() int64 { return c.compiles.Load() }

// Get returns the mapping of ba's spec, compiling it on first use. A nil cache, or an
// account without a UID or generation (one not read from the API server), compiles it
// every time. The mapping is shared: the caller must not change it.
func (c *MappingCache) Get(ba *v1alpha1.BatchAccount) *Mapping {
	if c == nil {
		return Compile(ba.Namespace, &ba.Spec)
	}
	if ba.UID == "" || ba.Generation == 0 {
		return c.compile(ba)
	}
	key := mappingKey{ba.UID, ba.Generation}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[mappingKey]*clist.Element{}
		c.order = clist.New()
	}
	el, ok := c.entries[key]
	if ok {
		c.order.MoveToFront(el)
	} else {
		el = c.order.PushFront(&mappingEntry{key: key})
		c.entries[key] = el
	}
	e := el.Value.(*mappingEntry)
	c.mu.Unlock()

	e.once.Do(func() { e.m = c.compile(ba) })
	if e.m == nil {
		// The compilation that ran panicked: nothing was cached.
		return c.compile(ba)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if e.runs == 0 && c.entries[key] == el {
		e.runs = mappingSize(e.m)
		c.runs += e.runs
		for c.runs > cmp.Or(c.limit, mappingCacheRuns) {
			c.remove(c.order.Back())
		}
	}
	return e.m
}

// mappingSize is what the cache counts for m: its runs and its declared shard names.
// A spec may declare 100,000 names and map them in one run; counted by its runs alone,
// thousands of such mappings were kept, gigabytes past mappingCacheRuns.
func mappingSize(m *Mapping) int {
	return max(1, len(m.Runs)+len(m.Shards.names))
}

// compile compiles ba's spec, counted.
func (c *MappingCache) compile(ba *v1alpha1.BatchAccount) *Mapping {
	c.compiles.Add(1)
	return Compile(ba.Namespace, &ba.Spec)
}

// remove drops the entry at el; the caller holds c.mu.
func (c *MappingCache) remove(el *clist.Element) {
	e := el.Value.(*mappingEntry)
	c.order.Remove(el)
	delete(c.entries, e.key)
	c.runs -= e.runs
}
