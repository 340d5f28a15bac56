package api_test

import (
	"strings"
	"testing"

	"github.com/sema-agent/sema/api"
)

// The canonical form and digest are fixed: this vector was computed with
// printf and sha256sum from the rule docs/audit.md states, so a change to
// either breaks every chain already written and must fail here.
func TestTheCanonicalFormAndDigestAreFixed(t *testing.T) {
	canon := api.AuditCanonical(1, 1733500000000, "idn_alice", "", "device.connected", "", "127.0.0.1", 1)
	const wantCanon = "5:audit,1:1,13:1733500000000,9:idn_alice,0:,16:device.connected,0:,9:127.0.0.1,1:1,"
	if string(canon) != wantCanon {
		t.Fatalf("canonical bytes %q, want %q", canon, wantCanon)
	}
	if got := api.ChainDigest(api.ChainGenesis, canon); got != "e1e0343f6563b64e915dfc2fb642b52e08d9efbee798ec8aee141e08ebc39b32" {
		t.Fatalf("digest %s", got)
	}
}

// A field holding the separators cannot be confused with two fields.
func TestCanonicalFieldsCannotBeShifted(t *testing.T) {
	a := api.ChainCanonical("audit", 1, 2, "a,1:b", "")
	b := api.ChainCanonical("audit", 1, 2, "a", "b")
	if string(a) == string(b) {
		t.Fatal("two different rows have the same canonical bytes")
	}
}

// An exported entry recomputes to the digest the lane wrote.
func TestAnExportedEntryRecomputes(t *testing.T) {
	e := api.AuditEntry{Seq: 1, At: "2024-12-06T15:46:40.000Z", Event: "device.connected", IdentityID: "idn_alice", RemoteAddr: "127.0.0.1", Count: 1}
	c, err := e.Canonical()
	if err != nil || api.ChainDigest(api.ChainGenesis, c) != "e1e0343f6563b64e915dfc2fb642b52e08d9efbee798ec8aee141e08ebc39b32" {
		t.Fatalf("Canonical = %q, %v", c, err)
	}
	if _, err := (api.AuditEntry{At: "yesterday"}).Canonical(); err == nil {
		t.Fatal("a bad time was read")
	}
}

func TestCheckpointsRoundTrip(t *testing.T) {
	h := api.ChainHead{Chain: "audit", Seq: 42, Digest: strings.Repeat("ab", 32)}
	got, err := api.ParseCheckpoint(h.String())
	if err != nil || got != h {
		t.Fatalf("ParseCheckpoint(%s) = %+v, %v", h, got, err)
	}
	for _, bad := range []string{"", "audit", "audit:1", ":1:" + h.Digest, "audit:-1:" + h.Digest, "audit:x:" + h.Digest, "audit:1:" + strings.Repeat("AB", 32), "audit:1:abc", "audit:1:2:" + h.Digest} {
		if _, err := api.ParseCheckpoint(bad); err == nil {
			t.Errorf("ParseCheckpoint(%q) accepted", bad)
		}
	}
}

func FuzzParseCheckpoint(f *testing.F) {
	f.Add("audit:42:" + strings.Repeat("ab", 32))
	f.Add("audit::")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := api.ParseCheckpoint(s)
		if err != nil {
			return
		}
		if again, err := api.ParseCheckpoint(h.String()); err != nil || again != h {
			t.Fatalf("%q parsed to %+v, which does not round-trip: %+v, %v", s, h, again, err)
		}
	})
}
