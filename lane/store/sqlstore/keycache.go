package sqlstore

import (
	"sync"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// keyCache remembers the identities of the API keys this process has
// authenticated, so that a request does not read the registry: that read
// was a tenth of the lane's CPU on an exec round trip.
//
// Only a Store through which every revocation passes may keep one (the
// SQLite registry, which one process serves): RevokeAPIKey forgets every
// entry before it returns, so a revoked key is refused at once, as
// store.Store promises. Replicas on PostgreSQL revoke through each other,
// so their stores keep none.
//
// An entry lives until its key's use is due to be recorded again
// (store.LastUsedAtGranularity after the last recorded use), so
// APIKey.LastUsedAt is as fresh as without the cache. Unknown keys are
// never remembered: a flood of wrong keys cannot fill it.
type keyCache struct {
	mu      sync.Mutex
	gen     uint64 // moved by forget; an answer read before it is not kept
	entries map[store.Digest]cachedKey
}

type cachedKey struct {
	idn   store.Identity
	until time.Time // the key's use is to be recorded again from then on
}

// keyCacheEntries bounds the cache; when full it starts again empty.
const keyCacheEntries = 4096

func newKeyCache() *keyCache { return &keyCache{entries: map[store.Digest]cachedKey{}} }

// get returns the identity of digest if it is remembered and its use need
// not be recorded yet at now.
func (c *keyCache) get(digest store.Digest, now time.Time) (store.Identity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[digest]
	if !ok || !now.Before(e.until) {
		return store.Identity{}, false
	}
	return e.idn, true
}

// generation is read before the registry is, and handed to put.
func (c *keyCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put remembers what the registry answered, unless forget was called since
// gen was read: that answer may predate a revocation.
func (c *keyCache) put(gen uint64, digest store.Digest, idn store.Identity, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(c.entries) >= keyCacheEntries {
		clear(c.entries)
	}
	c.entries[digest] = cachedKey{idn: idn, until: until}
}

// forget drops every entry and every answer still being read.
func (c *keyCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.entries)
}
