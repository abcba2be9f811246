package pebble

import (
	"sync"

	"github.com/verifyd/verifyd/storage"
)

// cacheMemo keeps recent cache entries (cacheKey → the result it names)
// in memory, so that a validation with cache: true reads no Pebble key
// when the address was validated recently. It is only a shortcut: Pebble
// stays the truth, and the memo never holds an entry older than the one
// stored.
//
// Writes of cache entries update it once applied, in the account's write
// order (see charge); batch writes remove their keys. A lookup that misses
// reads Pebble and adds what it read unless a write of a cache entry was
// applied meanwhile (gen moved), since what it read may then be older
// than what the memo was told. When the memo holds more than max bytes,
// arbitrary entries are dropped.
type cacheMemo struct {
	mu    sync.Mutex
	m     map[string]*memoEntry
	gen   uint64
	bytes int
	max   int
}

type memoEntry struct {
	r    storage.Result // with its receipt; never modified once in the memo
	size int
}

func newCacheMemo(maxBytes int) *cacheMemo {
	return &cacheMemo{m: make(map[string]*memoEntry), max: maxBytes}
}

// entrySize is the memory an entry takes, roughly.
func entrySize(key string, r *storage.Result) int {
	return 160 + len(key) + len(r.ID) + len(r.Account) + len(r.Email) + len(r.Status) + len(r.CachedFrom) + len(r.Receipt)
}

// get returns the memo's result for key and the generation to pass to
// add after a miss.
func (c *cacheMemo) get(key []byte) (storage.Result, bool, uint64) {
	if c == nil {
		return storage.Result{}, false, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[string(key)]; ok {
		return e.r, true, c.gen
	}
	return storage.Result{}, false, c.gen
}

// add records what a lookup read from Pebble, unless a write came between.
func (c *cacheMemo) add(key []byte, r storage.Result, gen uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.gen == gen {
		c.put(string(key), r)
	}
	c.mu.Unlock()
}

// written records a cache entry just applied to Pebble.
func (c *cacheMemo) written(key []byte, r storage.Result) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.gen++
	c.put(string(key), r)
	c.mu.Unlock()
}

// forget drops keys a write just applied to Pebble replaced or deleted.
func (c *cacheMemo) forget(keys [][]byte) {
	if c == nil || len(keys) == 0 {
		return
	}
	c.mu.Lock()
	c.gen++
	for _, k := range keys {
		c.drop(string(k))
	}
	c.mu.Unlock()
}

func (c *cacheMemo) put(key string, r storage.Result) {
	c.drop(key)
	size := entrySize(key, &r)
	if size > c.max {
		return
	}
	for k := range c.m {
		if c.bytes+size <= c.max {
			break
		}
		c.drop(k)
	}
	c.m[key] = &memoEntry{r: r, size: size}
	c.bytes += size
	memoBytes.Set(float64(c.bytes))
}

func (c *cacheMemo) drop(key string) {
	if e, ok := c.m[key]; ok {
		delete(c.m, key)
		c.bytes -= e.size
		memoBytes.Set(float64(c.bytes))
	}
}
