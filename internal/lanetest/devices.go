package lanetest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane/store"
)

// Registered is a device registered straight in a store, with the private
// key its executor would hold.
type Registered struct {
	ID   string
	Priv ed25519.PrivateKey
}

// RegisterDevices registers n devices of an identity in st, one
// enrollment token each, as enrolling them would (no HTTP plane, no
// enrollment rate limit): many devices for a test, quickly.
func RegisterDevices(ctx context.Context, st store.Store, ownerID string, n int) ([]Registered, error) {
	out := make([]Registered, n)
	for i := range out {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		token := store.DigestOf(fmt.Sprintf("set_test_%d_%s", i, ids.ULID()))
		if _, err := st.CreateEnrollToken(ctx, ownerID, token, time.Hour); err != nil {
			return nil, err
		}
		d, _, err := st.RegisterDevice(ctx, store.Registration{TokenDigest: token, IdentityID: ownerID,
			PublicKey: pub, PlatformOS: "linux", WorkspaceRoot: "/w"})
		if err != nil {
			return nil, err
		}
		out[i] = Registered{ID: d.ID, Priv: priv}
	}
	return out, nil
}
