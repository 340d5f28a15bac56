package lane

import (
	"context"
	"fmt"
	"github.com/sema-agent/sema/api"

	"github.com/sema-agent/sema/lane/store"
)

// CreateIdentity adds an identity with a fresh API key and returns the key:
// the only time its plaintext exists (the store keeps its digest). The
// identity is not an admin; POST /v1/identities calls this.
func CreateIdentity(ctx context.Context, st store.Store, name string) (store.Identity, string, error) {
	return createIdentity(ctx, st, name, st.CreateIdentity)
}

// CreateAdminIdentity is CreateIdentity for the lane's admin, the identity
// that may create and list identities and revoke any key. `sema server`
// calls it on its first start; an embedder's lane need have none (then the
// identity endpoints answer 403 to everyone).
func CreateAdminIdentity(ctx context.Context, st store.Store, name string) (store.Identity, string, error) {
	return createIdentity(ctx, st, name, st.CreateAdminIdentity)
}

func createIdentity(ctx context.Context, st store.Store, name string, create func(context.Context, string) (store.Identity, error)) (store.Identity, string, error) {
	idn, err := create(ctx, name)
	if err != nil {
		return idn, "", fmt.Errorf("lane: create identity: %w", err)
	}
	_, key, err := IssueAPIKey(ctx, st, idn.ID)
	return idn, key, err
}

// CreateAPIKey issues another API key for an identity.
func CreateAPIKey(ctx context.Context, st store.Store, identityID string) (string, error) {
	_, key, err := IssueAPIKey(ctx, st, identityID)
	return key, err
}

// IssueAPIKey mints a key, stores its digest and returns both sides.
func IssueAPIKey(ctx context.Context, st store.Store, identityID string) (store.APIKey, string, error) {
	key := NewSecret(api.APIKeyPrefix)
	k, err := st.CreateAPIKey(ctx, identityID, store.DigestOf(key))
	if err != nil {
		return k, "", fmt.Errorf("lane: create api key: %w", err)
	}
	return k, key, nil
}
