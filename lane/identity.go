package lane

import (
	"context"
	"fmt"

	"github.com/sema-agent/sema/lane/store"
)

// CreateIdentity adds an identity with a fresh API key and returns the key:
// the only time its plaintext exists (the store keeps its digest). This is
// how an operator creates the first user; `sema server` calls it on its
// first start.
func CreateIdentity(ctx context.Context, st store.Store, name string) (store.Identity, string, error) {
	idn, err := st.CreateIdentity(ctx, name)
	if err != nil {
		return idn, "", fmt.Errorf("lane: create identity: %w", err)
	}
	key, err := CreateAPIKey(ctx, st, idn.ID)
	return idn, key, err
}

// CreateAPIKey issues another API key for an identity.
func CreateAPIKey(ctx context.Context, st store.Store, identityID string) (string, error) {
	key := newSecret("sema_")
	if err := st.CreateAPIKey(ctx, identityID, store.DigestOf(key)); err != nil {
		return "", fmt.Errorf("lane: create api key: %w", err)
	}
	return key, nil
}
