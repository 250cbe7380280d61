package webhook

import (
	"cmp"
	"container/list"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// mappingCacheRuns bounds the runs (account.Run) the cached mappings hold together: a
// few hundred bytes each with their indexes, so ~100 MiB at most, room for the largest
// spec the API server stores.
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
	m    *account.Mapping
	// runs is the size the cache counts for the entry, once compiled (0 before).
	runs int
}

// MappingCache keeps the compiled mappings of the accounts the pod webhooks read, by spec,
// the least recently used dropped past mappingCacheRuns. A mapping that spreads its
// indexes over many runs takes a fraction of a second to compile for a spec of a
// megabyte, and every pod of its Jobs asks for it: compiled per pod, a batch of 100,000
// such pods cost the webhook server hours of CPU, and pods created together queued
// behind each other's compilations past the webhook's timeout. A spec never changes
// under its UID and generation, so an entry needs no invalidation. The zero value is
// ready to use; it is safe for concurrent use, and the mappings it returns are only read.
type MappingCache struct {
	// limit bounds the runs held (0: mappingCacheRuns).
	limit   int
	mu      sync.Mutex
	runs    int
	order   *list.List // of *mappingEntry, most recently used first
	entries map[mappingKey]*list.Element
}

// get returns the mapping of ba's spec, compiling it on first use. A nil cache, or an
// account without a UID or generation (one not read from the API server), compiles it
// every time.
func (c *MappingCache) get(ba *v1alpha1.BatchAccount) *account.Mapping {
	if c == nil || ba.UID == "" || ba.Generation == 0 {
		return account.Compile(ba.Namespace, &ba.Spec)
	}
	key := mappingKey{ba.UID, ba.Generation}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[mappingKey]*list.Element{}
		c.order = list.New()
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

	e.once.Do(func() { e.m = account.Compile(ba.Namespace, &ba.Spec) })
	if e.m == nil {
		// The compilation that ran panicked: nothing was cached.
		return account.Compile(ba.Namespace, &ba.Spec)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if e.runs == 0 && c.entries[key] == el {
		e.runs = max(1, len(e.m.Runs))
		c.runs += e.runs
		for c.runs > cmp.Or(c.limit, mappingCacheRuns) {
			c.remove(c.order.Back())
		}
	}
	return e.m
}

// remove drops the entry at el; the caller holds c.mu.
func (c *MappingCache) remove(el *list.Element) {
	e := el.Value.(*mappingEntry)
	c.order.Remove(el)
	delete(c.entries, e.key)
	c.runs -= e.runs
}
