package sqlstore

import (
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

var t0 = time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)

func TestKeyCacheAnswersUntilTheKeysUseIsDue(t *testing.T) {
	c := newKeyCache()
	d := store.DigestOf("key")
	idn := store.Identity{ID: "idn_1", Name: "alice"}
	if _, ok := c.get(d, t0); ok {
		t.Fatal("an empty cache answered")
	}
	c.put(c.generation(), d, idn, t0.Add(time.Minute))
	if got, ok := c.get(d, t0.Add(59*time.Second)); !ok || got != idn {
		t.Fatalf("within the minute: %+v, %v; want %+v", got, ok, idn)
	}
	if _, ok := c.get(d, t0.Add(time.Minute)); ok {
		t.Fatal("answered once the key's use was due to be recorded")
	}
	if _, ok := c.get(store.DigestOf("another key"), t0); ok {
		t.Fatal("answered for a key it was never given")
	}
}

// store.Store: "a revoked key is refused at once". forget drops every entry.
func TestKeyCacheForgetsEverythingAtARevocation(t *testing.T) {
	c := newKeyCache()
	d := store.DigestOf("key")
	c.put(c.generation(), d, store.Identity{ID: "idn_1"}, t0.Add(time.Minute))
	c.forget()
	if _, ok := c.get(d, t0); ok {
		t.Fatal("answered after forget")
	}
}

// An answer read from the registry before a revocation committed, and put
// after forget, is never kept.
func TestKeyCacheNeverKeepsAnAnswerReadBeforeARevocation(t *testing.T) {
	c := newKeyCache()
	d := store.DigestOf("key")
	gen := c.generation() // the read begins
	c.forget()            // a revocation commits meanwhile
	c.put(gen, d, store.Identity{ID: "idn_1"}, t0.Add(time.Minute))
	if _, ok := c.get(d, t0); ok {
		t.Fatal("kept an answer that may predate the revocation")
	}
	c.put(c.generation(), d, store.Identity{ID: "idn_1"}, t0.Add(time.Minute))
	if _, ok := c.get(d, t0); !ok {
		t.Fatal("an answer read after the revocation was not kept")
	}
}

func TestKeyCacheIsBounded(t *testing.T) {
	c := newKeyCache()
	for i := range keyCacheEntries + 10 {
		c.put(c.generation(), store.DigestOf(string(rune(i))+"key"), store.Identity{ID: "idn"}, t0.Add(time.Minute))
	}
	if n := len(c.entries); n > keyCacheEntries {
		t.Fatalf("%d entries, want at most %d", n, keyCacheEntries)
	}
}
