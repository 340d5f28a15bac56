package lane

import (
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"testing"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// Refusal rows name the address the refusal came from, and a flood
// of identical refusals from one address is one row with a count (one row
// per refused upgrade, with no address, would be 3,000 rows in 0.65 s).
func TestRefusalRowsCarryTheRemoteAddressAndAreCounted(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.MaxPreAuthPerAddr = 1 })
	holder := l.enroll()
	holder.dial() // takes this address's one pre-auth slot
	const refused = 50
	for range refused {
		if _, resp, err := l.dialRaw(); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("an upgrade over the per-address cap: %v, %v; want 503", resp, err)
		}
	}
	rows := l.auditRows(store.AuditFilter{Event: string(EventUpgradeRefused)})
	if len(rows) != 1 || rows[0].Count != refused || rows[0].RemoteAddr != "127.0.0.1" || rows[0].Reason != "preauth_cap_per_addr" {
		t.Fatalf("upgrade_refused rows %+v; want one from 127.0.0.1 counting %d", rows, refused)
	}

	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	// A hello naming the device, signed with another key.
	stranger := &fakeDevice{t: t, l: l, id: holder.id, priv: priv, nonce: holder.nonce, epoch: ids.ULID(), supports: defaultSupports}
	holder.send(stranger.helloFrame())
	holder.expectReject(protocol.RejectAuthFailed)
	hello := l.auditRows(store.AuditFilter{Event: string(EventHelloRejected)})
	if len(hello) != 1 || hello[0].RemoteAddr != "127.0.0.1" || hello[0].Reason != string(protocol.RejectAuthFailed) {
		t.Fatalf("hello_rejected rows %+v; want one auth_failed from 127.0.0.1", hello)
	}

	r := l.do("POST", "/v1/devices/enroll", l.ownerKey, enrollBody("set_unknown", newPubkey(t)))
	if r.Status != http.StatusForbidden {
		t.Fatalf("enrolling with an unknown token: %d", r.Status)
	}
	enroll := l.auditRows(store.AuditFilter{Event: string(EventEnrollRefused)})
	if len(enroll) != 1 || enroll[0].RemoteAddr != "127.0.0.1" {
		t.Fatalf("enroll_refused rows %+v; want one from 127.0.0.1", enroll)
	}
}
