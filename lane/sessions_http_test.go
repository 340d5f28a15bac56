package lane

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlstore"
	"github.com/sema-agent/sema/protocol"
)

// sessionExec is an exec instruction body of a root session.
func sessionExec(rootSessionID string) string {
	return `{"kind":"exec","args":{"command":"true"},"timeoutMs":1000,"rootSessionId":"` + rootSessionID + `"}`
}

// submit posts an instruction and reads its whole answer (a device that is
// not connected settles it at once, so the stream ends).
func (l *wsLane) submit(deviceID, apiKey, body string) response {
	l.t.Helper()
	return l.do("POST", "/v1/devices/"+deviceID+"/instructions", apiKey, body)
}

func (l *wsLane) session(apiKey, rootSessionID string) response {
	l.t.Helper()
	return l.do("GET", "/v1/sessions/"+rootSessionID, apiKey, "")
}

// §9: "the first submission that carries it binds the session": GET
// /v1/sessions/{id} answers {"rootSessionId","deviceId","boundAt"}, and is
// 404 before.
func TestTheFirstInstructionBindsTheSession(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	wantError(t, l.session(l.ownerKey, "rs_1"), 404, "session.not_found", "rs_1")
	if r := l.submit(fd.id, l.ownerKey, sessionExec("rs_1")); r.Status != 200 {
		t.Fatalf("first submission: %d %s", r.Status, r.Body)
	}
	r := l.session(l.ownerKey, "rs_1")
	b := decode[api.Session](t, r)
	if b.RootSessionID != "rs_1" || b.DeviceID != fd.id || b.BoundAt == "" || len(r.JSON(t)) != 3 {
		t.Fatalf("session %s", r.Body)
	}
}

// §9: "repeating the same value is idempotent".
func TestTheSameDeviceAgainIsIdempotent(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	l.submit(fd.id, l.ownerKey, sessionExec("rs_1"))
	first := decode[api.Session](t, l.session(l.ownerKey, "rs_1"))
	for range 3 {
		if r := l.submit(fd.id, l.ownerKey, sessionExec("rs_1")); r.Status != 200 {
			t.Fatalf("the same device again: %d %s", r.Status, r.Body)
		}
	}
	if again := decode[api.Session](t, l.session(l.ownerKey, "rs_1")); again != first {
		t.Fatalf("binding after repeats %+v, want %+v unchanged", again, first)
	}
}

// §9: "naming a different device is refused" before anything is queued:
// 409 session.device_mismatch naming the bound device, on the instructions
// endpoint and on the streamed writes endpoint alike; the other device is
// sent nothing.
func TestADifferentDeviceIsRefusedBeforeAnythingIsQueued(t *testing.T) {
	l := newWSLane(t)
	bound, other := l.enroll(), l.enroll()
	other.establish()
	l.submit(bound.id, l.ownerKey, sessionExec("rs_1"))
	wantError(t, l.submit(other.id, l.ownerKey, sessionExec("rs_1")), 409, "session.device_mismatch", bound.id)
	content := []byte("x")
	_, r := l.postWrite(other.id, l.ownerKey, "path=/w/f&timeoutMs=1000&rootSessionId=rs_1&sha256="+hexSum(content), strings.NewReader("x"), 1)
	wantError(t, r, 409, "session.device_mismatch", bound.id)
	none[*protocol.Instruction](t, other.barrier(), "an instruction of a refused session", nil)
	if b := decode[api.Session](t, l.session(l.ownerKey, "rs_1")); b.DeviceID != bound.id {
		t.Fatalf("the refusal moved the session to %s", b.DeviceID)
	}
	eventually(t, "the refused write's reservation is released", func() bool { return l.doors.Metrics().BufferedContent == 0 })
}

// §9: "concurrent submissions produce a single winner": 16 concurrent first
// submissions to 16 devices give exactly one binding and 15 refusals, each
// naming the winner.
func TestSixteenConcurrentFirstSubmissionsOneBinding(t *testing.T) {
	l := newWSLane(t)
	devices := make([]*fakeDevice, 16)
	for i := range devices {
		devices[i] = l.enroll()
	}
	type answer struct {
		status int
		body   string
		err    error
	}
	answers := make([]answer, len(devices))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, fd := range devices {
		wg.Go(func() {
			<-start
			req, _ := http.NewRequestWithContext(t.Context(), "POST", l.url+"/v1/devices/"+fd.id+"/instructions", strings.NewReader(sessionExec("rs_race")))
			req.Header.Set("Authorization", "Bearer "+l.ownerKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers[i].err = err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			answers[i] = answer{resp.StatusCode, string(b), err}
		})
	}
	close(start)
	wg.Wait()
	winner := decode[api.Session](t, l.session(l.ownerKey, "rs_race")).DeviceID
	won, refused := 0, 0
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Fatalf("submission %d: %v", i, a.err)
		case a.status == 200 && devices[i].id == winner:
			won++
		case a.status == 409 && strings.Contains(a.body, api.CodeSessionDeviceMismatch) && strings.Contains(a.body, winner):
			refused++
		default:
			t.Fatalf("submission %d to %s: %d %s (winner %s)", i, devices[i].id, a.status, a.body, winner)
		}
	}
	if won != 1 || refused != 15 {
		t.Fatalf("%d won, %d refused; want 1 and 15", won, refused)
	}
}

// §9: "changing devices is an explicit rebind action": POST
// /v1/sessions/{id}/rebind {"deviceId"} moves the binding; the old device
// is then the one refused.
func TestRebindMovesTheSession(t *testing.T) {
	l := newWSLane(t)
	d1, d2 := l.enroll(), l.enroll()
	l.submit(d1.id, l.ownerKey, sessionExec("rs_1"))
	r := l.do("POST", "/v1/sessions/rs_1/rebind", l.ownerKey, `{"deviceId":"`+d2.id+`"}`)
	moved := decode[api.Session](t, r)
	if moved.RootSessionID != "rs_1" || moved.DeviceID != d2.id || moved.BoundAt == "" {
		t.Fatalf("rebind answered %s", r.Body)
	}
	if got := decode[api.Session](t, l.session(l.ownerKey, "rs_1")); got != moved {
		t.Fatalf("session after the rebind %+v, want %+v", got, moved)
	}
	if r := l.submit(d2.id, l.ownerKey, sessionExec("rs_1")); r.Status != 200 {
		t.Fatalf("the new device: %d %s", r.Status, r.Body)
	}
	wantError(t, l.submit(d1.id, l.ownerKey, sessionExec("rs_1")), 409, "session.device_mismatch", d2.id)
	if rows := l.auditRows(store.AuditFilter{Event: string(EventSessionRebound)}); len(rows) != 1 || rows[0].DeviceID != d2.id {
		t.Fatalf("rebind audit rows %+v", rows)
	}
}

// "rebind of an unbound session creates the binding".
func TestRebindOfAnUnboundSessionBindsIt(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	b := decode[api.Session](t, l.do("POST", "/v1/sessions/rs_new/rebind", l.ownerKey, `{"deviceId":"`+fd.id+`"}`))
	if b.DeviceID != fd.id {
		t.Fatalf("rebind answered %+v", b)
	}
	if got := decode[api.Session](t, l.session(l.ownerKey, "rs_new")); got != b {
		t.Fatalf("session %+v, want %+v", got, b)
	}
}

// Rebinding to a device the caller does not own is 404 like an
// unknown device; to a revoked device 409 device.revoked; the body is
// closed.
func TestRebindRefusals(t *testing.T) {
	l := newWSLane(t)
	mine := l.enroll()
	_, bobKey := l.user("bob")
	revoked := l.enroll()
	if r := l.do("POST", "/v1/devices/"+revoked.id+"/revoke", l.ownerKey, ""); r.Status != 200 {
		t.Fatal(r.Status)
	}
	rebind := func(key, body string) response { return l.do("POST", "/v1/sessions/rs_1/rebind", key, body) }
	wantError(t, rebind(bobKey, `{"deviceId":"`+mine.id+`"}`), 404, "device.not_found", mine.id)
	wantError(t, rebind(l.ownerKey, `{"deviceId":"dev_01J8ZQ4T9X0000000000000000"}`), 404, "device.not_found", "dev_01J8ZQ4T9X0000000000000000")
	wantError(t, rebind(l.ownerKey, `{"deviceId":"`+revoked.id+`"}`), 409, "device.revoked", revoked.id)
	wantError(t, rebind(l.ownerKey, `{}`), 400, "request.body_shape", `"deviceId"`)
	wantError(t, rebind(l.ownerKey, `{"deviceId":"`+mine.id+`","force":"yes"}`), 400, "request.body_shape", `"force"`)
	wantError(t, rebind(l.ownerKey, `{"deviceId":7}`), 400, "request.field_invalid", "deviceId")
	wantError(t, l.session(l.ownerKey, "rs_1"), 404, "session.not_found", "rs_1")
	wantError(t, l.do("POST", "/v1/sessions/"+strings.Repeat("s", 257)+"/rebind", l.ownerKey, `{"deviceId":"`+mine.id+`"}`),
		400, "request.field_invalid", "rootSessionId")
}

// §9: "sessions belong to an identity like devices do": another
// identity neither sees a session nor is refused by it; its own session of
// the same id binds its own device.
func TestSessionsBelongToAnIdentity(t *testing.T) {
	l := newWSLane(t)
	alices := l.enroll()
	l.submit(alices.id, l.ownerKey, sessionExec("shared"))
	bob, bobKey := l.user("bob")
	wantError(t, l.session(bobKey, "shared"), 404, "session.not_found", "shared")
	tok := l.issueToken(bobKey)
	bobs := decode[api.EnrollResponse](t, l.do("POST", "/v1/devices/enroll", bobKey, enrollBody(tok, newPubkey(t))))
	if r := l.submit(bobs.DeviceID, bobKey, sessionExec("shared")); r.Status != 200 {
		t.Fatalf("bob's own session of the same id: %d %s", r.Status, r.Body)
	}
	if b := decode[api.Session](t, l.session(bobKey, "shared")); b.DeviceID != bobs.DeviceID {
		t.Fatalf("bob's session %+v", b)
	}
	if b := decode[api.Session](t, l.session(l.ownerKey, "shared")); b.DeviceID != alices.id {
		t.Fatalf("alice's session %+v moved (bob %s)", b, bob.ID)
	}
}

// "instructions without rootSessionId behave as today": no
// binding, any device.
func TestInstructionsWithoutARootSessionAreNotBound(t *testing.T) {
	l := newWSLane(t)
	d1, d2 := l.enroll(), l.enroll()
	body := `{"kind":"exec","args":{"command":"true"},"timeoutMs":1000}`
	for _, fd := range []*fakeDevice{d1, d2, d1} {
		if r := l.submit(fd.id, l.ownerKey, body); r.Status != 200 {
			t.Fatalf("%s: %d %s", fd.id, r.Status, r.Body)
		}
	}
	var n int
	if err := l.store.(*sqlstore.Store).DB().QueryRowContext(t.Context(), "SELECT count(*) FROM sessions").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d session rows (%v), want none", n, err)
	}
}

// A rootSessionId is a registry key: bounded, no control characters.
func TestARootSessionIDIsBounded(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	wantError(t, l.submit(fd.id, l.ownerKey, sessionExec(strings.Repeat("s", 257))), 400, "request.field_invalid", "rootSessionId")
	wantError(t, l.submit(fd.id, l.ownerKey, sessionExec(`a\u0007b`)), 400, "request.field_invalid", "rootSessionId")
}

// §9 for an embedder: Dispatch (no owner) binds for the device's owner,
// and a mismatch is a *SessionMismatchError with nothing queued.
func TestDispatchBindsForTheDevicesOwner(t *testing.T) {
	l := newWSLane(t)
	d1, d2 := l.enroll(), l.enroll()
	in := execInstr("true")
	in.RootSessionID = "rs_embed"
	l.dispatch(d1, in)
	b, err := l.store.Session(t.Context(), l.owner.ID, "rs_embed")
	if err != nil || b.DeviceID != d1.id {
		t.Fatalf("the owner's session = %+v, %v; want bound to %s", b, err, d1.id)
	}
	call, err := l.srv.Dispatch(t.Context(), d2.id, in)
	var mismatch *SessionMismatchError
	if call != nil || !errors.As(err, &mismatch) || mismatch.BoundDeviceID != d1.id || mismatch.DeviceID != d2.id || !strings.Contains(err.Error(), d1.id) {
		t.Fatalf("Dispatch to another device = %v, %v; want a SessionMismatchError naming %s", call, err, d1.id)
	}
}

// A revoked device gets no binding (nothing can ever run there): the
// instruction settles target_unavailable as today, and the session stays
// free for a device that can serve it.
func TestARevokedDeviceIsNotBound(t *testing.T) {
	l := newWSLane(t)
	revoked, live := l.enroll(), l.enroll()
	if r := l.do("POST", "/v1/devices/"+revoked.id+"/revoke", l.ownerKey, ""); r.Status != 200 {
		t.Fatal(r.Status)
	}
	r := l.submit(revoked.id, l.ownerKey, sessionExec("rs_1"))
	if r.Status != 200 || !strings.Contains(string(r.Body), "target_unavailable") {
		t.Fatalf("a revoked device: %d %s", r.Status, r.Body)
	}
	wantError(t, l.session(l.ownerKey, "rs_1"), 404, "session.not_found", "rs_1")
	l.submit(live.id, l.ownerKey, sessionExec("rs_1"))
	wantError(t, l.submit(revoked.id, l.ownerKey, sessionExec("rs_1")), 409, "session.device_mismatch", live.id)
}

// The bound on root session bindings per identity: one binding past it is
// refused 409 session.limit_reached naming the bound and the flag, by an
// instruction (nothing queued) and by a rebind; the sessions bound still
// work; DELETE /v1/sessions/{id} frees a place (204, then 404).
func TestOneSessionPastTheLimitIsRefusedNamingIt(t *testing.T) {
	l := newWSLane(t, func(c *Config) { c.MaxSessionsPerIdentity = 2 })
	fd := l.enroll()
	for _, id := range []string{"rs_1", "rs_2"} {
		if r := l.submit(fd.id, l.ownerKey, sessionExec(id)); r.Status != 200 {
			t.Fatalf("%s under the limit: %d %s", id, r.Status, r.Body)
		}
	}
	wantError(t, l.submit(fd.id, l.ownerKey, sessionExec("rs_3")), 409, "session.limit_reached", "holds 2 root session bindings, this lane's most (sema server --max-sessions-per-identity)")
	wantError(t, l.do("POST", "/v1/sessions/rs_3/rebind", l.ownerKey, `{"deviceId":"`+fd.id+`"}`), 409, "session.limit_reached", "holds 2")
	if r := l.submit(fd.id, l.ownerKey, sessionExec("rs_1")); r.Status != 200 {
		t.Fatalf("a bound session at the limit: %d %s", r.Status, r.Body)
	}
	if r := l.do("DELETE", "/v1/sessions/rs_1", l.ownerKey, ""); r.Status != 204 {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	wantError(t, l.do("DELETE", "/v1/sessions/rs_1", l.ownerKey, ""), 404, "session.not_found", "rs_1")
	wantError(t, l.session(l.ownerKey, "rs_1"), 404, "session.not_found", "rs_1")
	if r := l.submit(fd.id, l.ownerKey, sessionExec("rs_3")); r.Status != 200 {
		t.Fatalf("rs_3 after rs_1 was unbound: %d %s", r.Status, r.Body)
	}
}

// Bindings unused for the idle expiry are pruned at start and every hour
// of the lane's clock.
func TestIdleSessionBindingsArePruned(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	l.submit(fd.id, l.ownerKey, sessionExec("rs_idle"))
	db := l.store.(interface{ DB() *sql.DB }).DB()
	if _, err := db.ExecContext(t.Context(), `UPDATE sessions SET used_ms = used_ms - ?`, (l.srv.cfg.SessionIdleExpiry + time.Hour).Milliseconds()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitBound)
	defer cancel()
	if _, ok := l.clk.WaitTimer(ctx, func(d time.Duration) bool { return d == janitorEvery }); !ok {
		t.Fatal("the janitor armed no timer")
	}
	l.clk.Advance(janitorEvery)
	eventually(t, "the idle binding is pruned", func() bool { return l.session(l.ownerKey, "rs_idle").Status == 404 })
}
