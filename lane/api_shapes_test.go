package lane

import (
	"github.com/sema-agent/sema/internal/lanetest"
	"testing"

	"github.com/sema-agent/sema/api"
)

// pinShape pins an answer's shape to T (lanetest.Pin).
func pinShape[T any](t *testing.T, what string, body []byte) T {
	t.Helper()
	return lanetest.Pin[T](t, what, body)
}

func TestAnswersAreTheAPITypes(t *testing.T) {
	l := newWSLane(t)
	tok := l.do("POST", "/v1/devices/enroll-tokens", l.ownerKey, "")
	if pinShape[api.EnrollTokenResponse](t, "enroll token", tok.Body).Token == "" {
		t.Fatal("no token")
	}
	fd := l.enroll()
	fd.establish()
	s, r := l.postInstruction(fd.id, l.ownerKey, `{"kind":"exec","args":{"command":"sleep 1"},"timeoutMs":60000}`)
	if r.Status != 200 {
		t.Fatalf("instruction: %d %s", r.Status, r.Body)
	}
	id := s.next()["instructionId"].(string)
	fd.instructionFor(id)

	list := pinShape[api.DeviceList](t, "devices", l.do("GET", "/v1/devices", l.ownerKey, "").Body)
	if len(list.Devices) != 1 || !list.Devices[0].Online || list.Devices[0].Gen == "" || list.Devices[0].Inflight != 1 {
		t.Fatalf("devices %+v", list)
	}
	cancel := l.do("POST", "/v1/instructions/"+id+"/cancel", l.ownerKey, "{}")
	if pinShape[api.CancelResponse](t, "cancel", cancel.Body).InstructionID != id || cancel.Status != 202 {
		t.Errorf("cancel: %d %s", cancel.Status, cancel.Body)
	}
	notFound := l.do("POST", "/v1/instructions/ins_nope/cancel", l.ownerKey, "{}")
	if e := pinShape[api.Error](t, "error", notFound.Body); notFound.Status != 404 || e.Code != api.CodeInstructionNotFound {
		t.Errorf("cancel of an unknown id: %d %s", notFound.Status, notFound.Body)
	}
	revoked := l.do("POST", "/v1/devices/"+fd.id+"/revoke", l.ownerKey, "")
	if d := pinShape[api.Device](t, "revoke", revoked.Body); !d.Revoked || d.RevokedAt == "" {
		t.Errorf("revoke: %s", revoked.Body)
	}
	pinShape[api.DeviceList](t, "devices after revoke", l.do("GET", "/v1/devices", l.ownerKey, "").Body)
	forbidden := l.do("GET", "/v1/devices", "sema_wrong", "")
	if e := pinShape[api.Error](t, "forbidden", forbidden.Body); e.Code != api.CodeForbidden {
		t.Errorf("forbidden: %s", forbidden.Body)
	}
}
