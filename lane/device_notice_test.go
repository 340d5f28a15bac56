package lane

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/protocol"
)

// nextEvent reads c's next event other than a chunk, failing the test
// when none comes.
func nextEvent(t *testing.T, c *Call) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	for {
		e, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("call %s: no event: %v", c.ID, err)
		}
		if e.Chunk == nil {
			return e
		}
	}
}

// R4: a caller that follows the device hears at once that its connection
// dropped and how long the lane waits for it (the reconnect grace), then
// that it came back; a caller that did not ask hears neither, only its
// chunks and settlement.
func TestACallFollowingTheDeviceHearsItDropAndComeBack(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	following := l.dispatch(fd, execInstr("make test"))
	following.FollowDevice()
	quiet := l.dispatch(fd, execInstr("make lint"))
	fd.instructionFor(following.ID)
	fd.instructionFor(quiet.ID)

	fd.drop()
	if e := nextEvent(t, following); e.Device == nil || e.Device.Connected || e.Device.Grace != l.srv.cfg.ReconnectGrace {
		t.Fatalf("after the drop: %+v, want a disconnected notice with the %v grace", e, l.srv.cfg.ReconnectGrace)
	}
	fd.connect()
	fd.send(&protocol.GenerationAck{Gen: fd.gen})
	if e := nextEvent(t, following); e.Device == nil || !e.Device.Connected {
		t.Fatalf("after the reconnect: %+v, want a connected notice", e)
	}

	fd.answerExec(following.ID, 0)
	fd.answerExec(quiet.ID, 0)
	if e := nextEvent(t, following); e.Settled == nil || !e.Settled.Outcome.OK() {
		t.Fatalf("following's last event %+v, want its settlement", e)
	}
	if e := nextEvent(t, quiet); e.Settled == nil || e.Device != nil {
		t.Fatalf("quiet's first event %+v, want its settlement and no notice", e)
	}
}

// R3: a new epoch settles what was in flight outcome_unknown; the caller
// hears of the drop, then the settlement, never that the device is back
// for this instruction.
func TestANewEpochSettlesWithoutAConnectedNotice(t *testing.T) {
	l := newWSLane(t)
	fd := l.enroll()
	fd.establish()
	call := l.dispatch(fd, execInstr("sleep 60"))
	call.FollowDevice()
	fd.instructionFor(call.ID)
	fd.drop()
	if e := nextEvent(t, call); e.Device == nil || e.Device.Connected {
		t.Fatalf("after the drop: %+v, want a disconnected notice", e)
	}
	fd.restart()
	fd.establish()
	e := nextEvent(t, call)
	if e.Settled == nil {
		t.Fatalf("after a new epoch: %+v, want the settlement", e)
	}
	if f, ok := e.Settled.Outcome.(protocol.Failure); !ok || f.ErrorCode != protocol.ErrOutcomeUnknown {
		t.Fatalf("settlement %+v, want outcome_unknown", e.Settled.Outcome)
	}
}

// docs/api.md: a caller that sends Sema-Notices: device gets a "device"
// line when the connection drops, with the grace in ms, and one when it is
// back; one that does not gets the stream as it always was.
func TestTheStreamCarriesDeviceLinesOnlyWhenAskedFor(t *testing.T) {
	for _, asked := range []bool{true, false} {
		l := newWSLane(t)
		fd := l.enroll()
		fd.establish()
		var headers []string
		if asked {
			headers = []string{api.HeaderNotices, api.NoticesDevice}
		}
		lines := rawLines(t, l, fd.id, `{"kind":"execStream","args":{"command":"x"},"timeoutMs":5000}`, headers...)
		in := fd.instruction()
		nextLine(t, lines) // accepted
		fd.drop()
		if asked {
			want := fmt.Sprintf(`{"event":"device","graceMs":%d,"presence":"disconnected"}`+"\n", l.srv.cfg.ReconnectGrace.Milliseconds())
			if got := nextLine(t, lines); string(got) != want {
				t.Fatalf("after the drop: %s, want %s", got, want)
			}
		}
		fd.connect()
		fd.send(&protocol.GenerationAck{Gen: fd.gen})
		if asked {
			if got, want := string(nextLine(t, lines)), `{"event":"device","presence":"connected"}`+"\n"; got != want {
				t.Fatalf("after the reconnect: %s, want %s", got, want)
			}
		}
		fd.answerExec(in.InstructionID, 0)
		for {
			line := nextLine(t, lines)
			if bytes.Contains(line, []byte(`"event":"device"`)) {
				t.Fatalf("asked %v: a device line %s", asked, line)
			}
			if bytes.HasPrefix(line, []byte(`{"event":"outcome"`)) {
				break
			}
		}
	}
}
