package bot

import (
	"slices"
	"sync"
	"sync/atomic"
)

// maxAuthCache bounds the keys cached; past it the cache starts afresh.
const maxAuthCache = 4096

// authCache holds principals by key hash, each with the generation of the
// bot's principal changes it was read under. An entry read before a change
// committed is never served after it: the change bumps the generation
// after its commit, and the reader took the generation before its read.
type authCache struct {
	gen *atomic.Uint64
	mu  sync.RWMutex
	m   map[string]authEntry
}

type authEntry struct {
	p   Principal
	gen uint64
}

func newAuthCache(gen *atomic.Uint64) *authCache {
	return &authCache{gen: gen, m: map[string]authEntry{}}
}

// get returns the principal cached for hash, if it is current.
func (c *authCache) get(hash string) (Principal, bool) {
	c.mu.RLock()
	e, ok := c.m[hash]
	c.mu.RUnlock()
	if !ok || e.gen != c.gen.Load() {
		return Principal{}, false
	}
	p := e.p
	p.Scopes = slices.Clone(p.Scopes) // the caller's copy, never the cache's
	return p, true
}

// put caches p, read under generation gen, unless a change came since.
func (c *authCache) put(hash string, p Principal, gen uint64) {
	if gen != c.gen.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxAuthCache {
		clear(c.m)
	}
	p.Scopes = slices.Clone(p.Scopes) // the cache's own copy
	c.m[hash] = authEntry{p: p, gen: gen}
}
