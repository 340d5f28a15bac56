package cluster

import (
	"context"
	"sync"

	"github.com/sema-agent/sema/lane/store"
)

// Directory is a replica's view of the replicas on the registry: their
// URLs and whether their heartbeat is live. It is read again by Refresh
// (each heartbeat round of the replica) and, for an id it does not know, at
// once by Lookup: a replica that started a moment ago is found.
type Directory struct {
	list func(context.Context) ([]store.Replica, error)

	mu   sync.Mutex
	byID map[string]store.Replica
	all  []store.Replica
}

// NewDirectory makes a Directory that reads the replicas with list
// (store.ListReplicas with the registry's live bound).
func NewDirectory(list func(context.Context) ([]store.Replica, error)) *Directory {
	return &Directory{list: list, byID: map[string]store.Replica{}}
}

// Refresh reads the replicas again.
func (d *Directory) Refresh(ctx context.Context) error {
	all, err := d.list(ctx)
	if err != nil {
		return err
	}
	byID := make(map[string]store.Replica, len(all))
	for _, r := range all {
		byID[r.ID] = r
	}
	d.mu.Lock()
	d.byID, d.all = byID, all
	d.mu.Unlock()
	return nil
}

// Lookup returns replica id as last read, reading again when it is not
// known; false when the registry has no such replica.
func (d *Directory) Lookup(ctx context.Context, id string) (store.Replica, bool, error) {
	d.mu.Lock()
	r, ok := d.byID[id]
	d.mu.Unlock()
	if ok {
		return r, true, nil
	}
	if err := d.Refresh(ctx); err != nil {
		return store.Replica{}, false, err
	}
	d.mu.Lock()
	r, ok = d.byID[id]
	d.mu.Unlock()
	return r, ok, nil
}

// Live returns the replicas other than self whose heartbeat is live, as
// last read.
func (d *Directory) Live(self string) []store.Replica {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []store.Replica
	for _, r := range d.all {
		if r.ID != self && r.Live {
			out = append(out, r)
		}
	}
	return out
}
