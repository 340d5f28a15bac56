package client_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/httpapi"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

// realLane is a real lane (real HTTP, real SQLite) with an admin; it
// returns the lane's URL and the admin's key.
func realLane(t *testing.T) (string, string) {
	t.Helper()
	st := tempStore(t)
	_, key, err := lane.CreateAdminIdentity(t.Context(), st, "admin")
	if err != nil {
		t.Fatal(err)
	}
	return serveLane(t, st), key
}

// tempStore is a fresh SQLite registry, closed at the test's end.
func tempStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// serveLane serves a real lane on st over real HTTP and returns its URL.
func serveLane(t *testing.T, st store.Store) string {
	t.Helper()
	srv, err := lane.New(lane.Config{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	hs := httptest.NewServer(httpapi.New(srv))
	t.Cleanup(hs.Close)
	return hs.URL
}

func clientOf(t *testing.T, base, key string) *client.Client {
	t.Helper()
	c, err := client.New(base, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// enrollDevice enrolls a device for key over the HTTP API.
func enrollDevice(t *testing.T, base, key string) string {
	t.Helper()
	tok, err := lanetest.IssueToken(t.Context(), base, key)
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	body, _ := json.Marshal(map[string]string{"token": tok, "pubkey": base64.StdEncoding.EncodeToString(pub), "platformOs": "linux", "workspaceRoot": "/w"})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/devices/enroll", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out api.EnrollResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.DeviceID == "" {
		t.Fatalf("enroll: %d %v", resp.StatusCode, err)
	}
	return out.DeviceID
}

func TestIdentitiesAndAPIKeysAgainstTheLane(t *testing.T) {
	base, adminKey := realLane(t)
	admin := clientOf(t, base, adminKey)
	bob, err := admin.CreateIdentity(t.Context(), "bob")
	if err != nil || bob.Name != "bob" || !strings.HasPrefix(bob.APIKey, "sema_") {
		t.Fatalf("CreateIdentity = %+v, %v", bob, err)
	}
	all, err := admin.Identities(t.Context())
	if err != nil || len(all) != 2 || !all[0].Admin || all[1].IdentityID != bob.IdentityID {
		t.Fatalf("Identities = %+v, %v", all, err)
	}
	bc := clientOf(t, base, bob.APIKey)
	if _, err := bc.Identities(t.Context()); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("bob listing identities: %v, want ErrForbidden", err)
	}
	second, err := bc.CreateAPIKey(t.Context())
	if err != nil || !strings.HasPrefix(second.KeyID, "key_") {
		t.Fatalf("CreateAPIKey = %+v, %v", second, err)
	}
	keys, err := bc.APIKeys(t.Context())
	if err != nil || len(keys) != 2 || keys[1].KeyID != second.KeyID {
		t.Fatalf("APIKeys = %+v, %v", keys, err)
	}
	if r, err := bc.RevokeAPIKey(t.Context(), second.KeyID); err != nil || r.RevokedAt == "" {
		t.Fatalf("RevokeAPIKey = %+v, %v", r, err)
	}
	if _, err := clientOf(t, base, second.APIKey).Devices(t.Context()); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("the revoked key: %v, want ErrForbidden", err)
	}
	if _, err := bc.RevokeAPIKey(t.Context(), keys[0].KeyID+"X"); !errors.Is(err, client.ErrAPIKeyNotFound) {
		t.Fatalf("an unknown key: %v, want ErrAPIKeyNotFound", err)
	}
	adminKeys, _ := admin.APIKeys(t.Context())
	if _, err := admin.RevokeAPIKey(t.Context(), adminKeys[0].KeyID); !errors.Is(err, client.ErrLastAdminKey) {
		t.Fatalf("the admin's last key: %v, want ErrLastAdminKey", err)
	}
}

func TestSessionsAgainstTheLane(t *testing.T) {
	base, key := realLane(t)
	c := clientOf(t, base, key)
	d1, d2 := enrollDevice(t, base, key), enrollDevice(t, base, key)
	if _, err := c.Session(t.Context(), "rs 1/x"); !errors.Is(err, client.ErrSessionNotFound) {
		t.Fatalf("an unbound session: %v, want ErrSessionNotFound", err)
	}
	in := api.InstructionRequest{Kind: "exec", Args: map[string]string{"command": "true"}, TimeoutMs: 1000, RootSessionID: "rs 1/x"}
	if _, err := c.Instruct(t.Context(), d1, in, client.Sink{}); err != nil {
		t.Fatalf("the first instruction: %v", err)
	}
	s, err := c.Session(t.Context(), "rs 1/x")
	if err != nil || s.DeviceID != d1 || s.RootSessionID != "rs 1/x" {
		t.Fatalf("Session = %+v, %v", s, err)
	}
	_, err = c.Instruct(t.Context(), d2, in, client.Sink{})
	var ce *client.Error
	if !errors.Is(err, client.ErrSessionDeviceMismatch) || !errors.As(err, &ce) || ce.Status != 409 || !strings.Contains(ce.Message, d1) {
		t.Fatalf("another device: %v, want ErrSessionDeviceMismatch naming %s", err, d1)
	}
	if s, err := c.Rebind(t.Context(), "rs 1/x", d2); err != nil || s.DeviceID != d2 {
		t.Fatalf("Rebind = %+v, %v", s, err)
	}
	if _, err := c.Rebind(t.Context(), "rs 1/x", "dev_01J8ZQ4T9X0000000000000000"); !errors.Is(err, client.ErrDeviceNotFound) {
		t.Fatalf("rebind to an unknown device: %v, want ErrDeviceNotFound", err)
	}
}
