package nexting

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

// show renders actions compactly: "send present r1 30000",
// "send resolved r1 replaced", "send error r1 unknown_request",
// "deliver r1 allow", "done r1 answered allow".
func show(acts []HostAction) []string {
	var out []string
	for _, a := range acts {
		switch a := a.(type) {
		case HostSend:
			out = append(out, "send "+showMsg(a.Msg))
		case HostDeliver:
			out = append(out, fmt.Sprintf("deliver %s %s", a.ID, a.Choice))
		case HostResolved:
			out = append(out, strings.TrimSuffix(fmt.Sprintf("done %s %s %s", a.ID, a.Reason, a.Choice), " "))
		default:
			out = append(out, fmt.Sprintf("?%T", a))
		}
	}
	return out
}

func showMsg(m Message) string {
	switch m := m.(type) {
	case Present:
		return fmt.Sprintf("present %s %d", m.ID, m.TTLMillis)
	case Answer:
		return fmt.Sprintf("answer %s %s", m.ID, m.Choice)
	case Resolved:
		return fmt.Sprintf("resolved %s %s", m.ID, m.Reason)
	case ErrorMessage:
		return strings.Join(slices.DeleteFunc([]string{"error", m.ID, string(m.Code)}, func(s string) bool { return s == "" }), " ")
	}
	return fmt.Sprintf("%T", m)
}

func expect(t *testing.T, step string, got []HostAction, want ...string) {
	t.Helper()
	if g := show(got); !slices.Equal(g, want) {
		t.Fatalf("%s:\n got %q\nwant %q", step, g, want)
	}
}

func mustPresent(t *testing.T, h *Host, now time.Time, id string, ttl time.Duration) []HostAction {
	t.Helper()
	acts, err := h.Present(now, id, "Allow git push?", ttl)
	if err != nil {
		t.Fatalf("present %s: %v", id, err)
	}
	return acts
}

func answer(id string, c Choice) Answer { return Answer{ID: id, Choice: c} }

// big is a frame size large enough for any error reply.
const big = 200

func TestHostAllowAndDeny(t *testing.T) {
	for _, c := range []Choice{ChoiceAllow, ChoiceDeny} {
		h := NewHost()
		expect(t, "present", mustPresent(t, h, t0, "r1", 30*time.Second), "send present r1 30000")
		expect(t, "answer", h.Answer(at(time.Second), answer("r1", c), big), "deliver r1 "+string(c))
		acts, err := h.Delivered(at(time.Second), "r1", nil)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, "accepted", acts, "send resolved r1 answered", "done r1 answered "+string(c))
		if _, ok := h.Current(); ok {
			t.Fatal("request still current after resolution")
		}
		if _, ok := h.Deadline(); ok {
			t.Fatal("deadline while idle")
		}
	}
}

func TestHostTTLRoundsDownAndExpires(t *testing.T) {
	h := NewHost()
	expect(t, "present", mustPresent(t, h, t0, "r1", 1500*time.Microsecond), "send present r1 1")
	if d, ok := h.Deadline(); !ok || !d.Equal(at(1500*time.Microsecond)) {
		t.Fatalf("deadline %v %v", d, ok)
	}
	expect(t, "before", h.Tick(at(1499*time.Microsecond)))
	expect(t, "at deadline", h.Tick(at(1500*time.Microsecond)), "send resolved r1 expired", "done r1 expired")
	expect(t, "again", h.Tick(at(time.Hour)))
	for _, ttl := range []time.Duration{0, time.Millisecond - 1, -time.Second, 300*time.Second + time.Millisecond} {
		if _, err := h.Present(t0, "x", "", ttl); err == nil {
			t.Errorf("ttl %v accepted", ttl)
		}
	}
	if _, err := h.Present(t0, "bad id!", "", time.Second); CodeOf(err) != CodeBadMessage {
		t.Errorf("bad id: %v", err)
	}
	if _, err := h.Present(t0, "x", strings.Repeat("a", 241), time.Second); CodeOf(err) != CodeBadMessage {
		t.Errorf("long summary: %v", err)
	}
}

// A new present resolves the old request replaced before presenting; a late
// answer to the old one gets its resolved again and leaves the new one
// alone.
func TestHostReplaceThenLateAnswer(t *testing.T) {
	h := NewHost()
	mustPresent(t, h, t0, "r1", 30*time.Second)
	expect(t, "replace", mustPresent(t, h, at(time.Second), "r2", 30*time.Second),
		"send resolved r1 replaced", "done r1 replaced", "send present r2 30000")
	expect(t, "answer after replace", h.Answer(at(2*time.Second), answer("r1", ChoiceAllow), big),
		"send resolved r1 replaced")
	cur, ok := h.Current()
	if !ok || cur.ID != "r2" || cur.Locked != "" || cur.Delivering {
		t.Fatalf("current %+v %v", cur, ok)
	}
	expect(t, "r2 still answerable", h.Answer(at(3*time.Second), answer("r2", ChoiceDeny), big), "deliver r2 deny")
}

func TestHostAnswerAfterExpiry(t *testing.T) {
	h := NewHost()
	mustPresent(t, h, t0, "r1", 10*time.Second)
	// Lazily: an answer at the deadline, before any Tick, is too late.
	expect(t, "answer at deadline", h.Answer(at(10*time.Second), answer("r1", ChoiceAllow), big),
		"send resolved r1 expired", "done r1 expired")
	expect(t, "resend", h.Answer(at(11*time.Second), answer("r1", ChoiceAllow), big), "send resolved r1 expired")

	h = NewHost()
	mustPresent(t, h, t0, "r1", 10*time.Second)
	expect(t, "tick", h.Tick(at(10*time.Second)), "send resolved r1 expired", "done r1 expired")
	expect(t, "late answer", h.Answer(at(10*time.Second+time.Millisecond), answer("r1", ChoiceAllow), big),
		"send resolved r1 expired")
}

func TestHostDuplicateAnswers(t *testing.T) {
	h := NewHost()
	mustPresent(t, h, t0, "r1", 30*time.Second)
	expect(t, "first", h.Answer(at(time.Second), answer("r1", ChoiceAllow), big), "deliver r1 allow")
	expect(t, "resend during delivery", h.Answer(at(2*time.Second), answer("r1", ChoiceAllow), big))
	expect(t, "other choice during delivery", h.Answer(at(2*time.Second), answer("r1", ChoiceDeny), big))
	if _, ok := h.Deadline(); ok {
		t.Fatal("a deadline while delivering")
	}
	acts, _ := h.Delivered(at(3*time.Second), "r1", nil)
	expect(t, "accepted", acts, "send resolved r1 answered", "done r1 answered allow")
	expect(t, "resend after resolution", h.Answer(at(4*time.Second), answer("r1", ChoiceAllow), big),
		"send resolved r1 answered")
	expect(t, "other choice after resolution", h.Answer(at(4*time.Second), answer("r1", ChoiceDeny), big),
		"send resolved r1 answered")
}

// A failed delivery releases the gate but keeps the first hardware choice:
// a different choice is ignored, the same one is delivered again.
func TestHostFirstChoiceLockedAcrossSinkFailure(t *testing.T) {
	h := NewHost()
	mustPresent(t, h, t0, "r1", 30*time.Second)
	expect(t, "first", h.Answer(at(time.Second), answer("r1", ChoiceAllow), big), "deliver r1 allow")
	acts, err := h.Delivered(at(2*time.Second), "r1", errors.New("sink down"))
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "failure releases the gate, nothing re-presented", acts)
	cur, _ := h.Current()
	if cur.Locked != ChoiceAllow || cur.Delivering {
		t.Fatalf("after failure %+v", cur)
	}
	if d, ok := h.Deadline(); !ok || !d.Equal(at(30*time.Second)) {
		t.Fatalf("deadline %v %v", d, ok)
	}
	expect(t, "different choice", h.Answer(at(3*time.Second), answer("r1", ChoiceDeny), big))
	expect(t, "same choice again", h.Answer(at(3*time.Second), answer("r1", ChoiceAllow), big), "deliver r1 allow")
	acts, _ = h.Delivered(at(4*time.Second), "r1", nil)
	expect(t, "retry accepted", acts, "send resolved r1 answered", "done r1 answered allow")
}

func TestHostDeadlineDuringDelivery(t *testing.T) {
	// Success after the deadline still completes.
	h := NewHost()
	mustPresent(t, h, t0, "r1", 10*time.Second)
	h.Answer(at(9*time.Second), answer("r1", ChoiceDeny), big)
	expect(t, "tick during delivery", h.Tick(at(20*time.Second)))
	acts, _ := h.Delivered(at(20*time.Second), "r1", nil)
	expect(t, "late success", acts, "send resolved r1 answered", "done r1 answered deny")

	// Failure after the deadline resolves expired.
	h = NewHost()
	mustPresent(t, h, t0, "r1", 10*time.Second)
	h.Answer(at(9*time.Second), answer("r1", ChoiceAllow), big)
	acts, _ = h.Delivered(at(10*time.Second), "r1", errors.New("sink down"))
	expect(t, "late failure", acts, "send resolved r1 expired", "done r1 expired")
}

func TestHostCancel(t *testing.T) {
	h := NewHost()
	mustPresent(t, h, t0, "r1", 30*time.Second)
	acts, err := h.Cancel(at(time.Second), "r1")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "cancel", acts, "send resolved r1 cancelled", "done r1 cancelled")
	if _, err := h.Cancel(at(time.Second), "r1"); !errors.Is(err, ErrNotCurrent) {
		t.Fatalf("second cancel: %v", err)
	}
	expect(t, "answer after cancel", h.Answer(at(2*time.Second), answer("r1", ChoiceAllow), big),
		"send resolved r1 cancelled")

	// Cancel during delivery: success wins, failure cancels.
	for _, fail := range []bool{false, true} {
		h := NewHost()
		mustPresent(t, h, t0, "r2", 30*time.Second)
		h.Answer(at(time.Second), answer("r2", ChoiceAllow), big)
		acts, err := h.Cancel(at(2*time.Second), "r2")
		if err != nil || len(acts) != 0 {
			t.Fatalf("cancel during delivery: %v %q", err, show(acts))
		}
		var sinkErr error
		want := []string{"send resolved r2 answered", "done r2 answered allow"}
		if fail {
			sinkErr = errors.New("no")
			want = []string{"send resolved r2 cancelled", "done r2 cancelled"}
		}
		acts, _ = h.Delivered(at(3*time.Second), "r2", sinkErr)
		expect(t, fmt.Sprintf("outcome fail=%v", fail), acts, want...)
	}

	// Cancel past the deadline is an expiry.
	h = NewHost()
	mustPresent(t, h, t0, "r3", time.Second)
	acts, err = h.Cancel(at(time.Second), "r3")
	if !errors.Is(err, ErrNotCurrent) {
		t.Fatalf("cancel after deadline: %v", err)
	}
	expect(t, "cancel after deadline", acts, "send resolved r3 expired", "done r3 expired")
}

// Unknown ids get unknown_request, within Reply's amplification rule: the
// reply is never larger than the answer, so it can never carry the id (an
// error frame with an id is 11 bytes longer than an answer with the same
// id); it is sent without the id when the answer is at least as long as
// the bare error frame, and not at all otherwise.
func TestHostUnknownRequest(t *testing.T) {
	h := NewHost()
	mustPresent(t, h, t0, "r1", 30*time.Second)
	for _, c := range []struct {
		id   string
		ch   Choice
		want []string
	}{
		{"zz", ChoiceAllow, nil},                                     // 44 bytes < 45
		{"zzz", ChoiceAllow, []string{"send error unknown_request"}}, // 45
		{"zzz", ChoiceDeny, nil},                                     // 44
		{"zzzz", ChoiceDeny, []string{"send error unknown_request"}},
		{strings.Repeat("z", 64), ChoiceAllow, []string{"send error unknown_request"}},
	} {
		a := answer(c.id, c.ch)
		frame, _ := Encode(a)
		expect(t, fmt.Sprintf("%s %s (%d bytes)", c.id, c.ch, len(frame)), h.Answer(at(time.Second), a, len(frame)), c.want...)
	}
	// The current request is untouched.
	if cur, _ := h.Current(); cur.ID != "r1" || cur.Locked != "" {
		t.Fatalf("current %+v", cur)
	}
	// With no current request at all.
	h = NewHost()
	a := answer("unknown-1", ChoiceAllow)
	frame, _ := Encode(a)
	expect(t, "idle", h.Answer(t0, a, len(frame)), "send error unknown_request")
	// Never answered when the reply could not fit.
	expect(t, "tiny input", h.Answer(t0, a, 20))
}

// A late or unknown resolution never touches a different request.
func TestHostLateOutcomesLeaveOthersAlone(t *testing.T) {
	h := NewHost()
	mustPresent(t, h, t0, "r1", 30*time.Second)
	h.Answer(at(time.Second), answer("r1", ChoiceAllow), big)
	acts, _ := h.Delivered(at(time.Second), "r1", nil)
	expect(t, "r1 answered", acts, "send resolved r1 answered", "done r1 answered allow")
	mustPresent(t, h, at(2*time.Second), "r2", 30*time.Second)

	if acts, err := h.Delivered(at(3*time.Second), "r1", nil); !errors.Is(err, ErrNotCurrent) || len(acts) != 0 {
		t.Fatalf("late delivery outcome: %v %q", err, show(acts))
	}
	if acts, err := h.Cancel(at(3*time.Second), "r1"); !errors.Is(err, ErrNotCurrent) || len(acts) != 0 {
		t.Fatalf("late cancel: %v %q", err, show(acts))
	}
	h.Answer(at(4*time.Second), answer("r2", ChoiceDeny), big)
	if acts, err := h.Delivered(at(5*time.Second), "r1", nil); !errors.Is(err, ErrNotCurrent) || len(acts) != 0 {
		t.Fatalf("other id during delivery: %v %q", err, show(acts))
	}
	if cur, _ := h.Current(); cur.ID != "r2" || !cur.Delivering || cur.Locked != ChoiceDeny {
		t.Fatalf("current %+v", cur)
	}
}

func TestHostRefusals(t *testing.T) {
	h := NewHost()
	mustPresent(t, h, t0, "r1", 30*time.Second)
	if _, err := h.Present(t0, "r1", "", time.Second); !errors.Is(err, ErrIDInUse) {
		t.Fatalf("reuse of the current id: %v", err)
	}
	h.Answer(at(time.Second), answer("r1", ChoiceAllow), big)
	if acts, err := h.Present(at(time.Second), "r2", "", time.Second); !errors.Is(err, ErrBusy) || len(acts) != 0 {
		t.Fatalf("present during delivery: %v %q", err, show(acts))
	}
	h.Delivered(at(time.Second), "r1", nil)
	if _, err := h.Present(at(time.Second), "r1", "", time.Second); !errors.Is(err, ErrIDInUse) {
		t.Fatalf("reuse of a resolved id: %v", err)
	}
	if _, err := h.Delivered(at(time.Second), "r1", nil); !errors.Is(err, ErrNotCurrent) {
		t.Fatalf("delivered while idle: %v", err)
	}
}

// The host remembers the last hostHistory resolutions; older ids are
// unknown.
func TestHostHistoryIsBounded(t *testing.T) {
	h := NewHost()
	for i := range hostHistory + 1 {
		mustPresent(t, h, t0, fmt.Sprintf("r%d", i), time.Second)
	}
	// r0 … r63 were replaced; r64 is current. r0 is still remembered…
	expect(t, "oldest remembered", h.Answer(t0, answer("r0", ChoiceAllow), big), "send resolved r0 replaced")
	h.Tick(at(time.Second)) // r64 expires: the 65th resolution pushes r0 out
	expect(t, "forgotten", h.Answer(at(time.Second), answer("r0", ChoiceAllow), big), "send error r0 unknown_request")
	expect(t, "newest", h.Answer(at(time.Second), answer("r64", ChoiceAllow), big), "send resolved r64 expired")
}

// After reconnect a held request is presented again with its remaining
// lifetime; nothing is sent while the link is down.
func TestHostReconnect(t *testing.T) {
	h := NewHost()
	mustPresent(t, h, t0, "r1", 30*time.Second)
	h.Disconnected(at(time.Second))
	expect(t, "reconnect", h.Connected(at(10*time.Second+500*time.Microsecond)), "send present r1 19999")

	// Presented while down: shown on reconnect.
	h = NewHost()
	h.Disconnected(t0)
	expect(t, "present while down", mustPresent(t, h, t0, "r1", 30*time.Second))
	expect(t, "replace while down", mustPresent(t, h, at(time.Second), "r2", 30*time.Second), "done r1 replaced")
	expect(t, "reconnect", h.Connected(at(2*time.Second)), "send present r2 29000")

	// Expiry while down resolves without a frame, and nothing is re-presented.
	h = NewHost()
	mustPresent(t, h, t0, "r1", 5*time.Second)
	h.Disconnected(at(time.Second))
	expect(t, "expire while down", h.Tick(at(5*time.Second)), "done r1 expired")
	expect(t, "reconnect", h.Connected(at(6*time.Second)))

	// Less than a millisecond left at reconnect: expired, not re-presented.
	h = NewHost()
	mustPresent(t, h, t0, "r1", 5*time.Second)
	h.Disconnected(at(time.Second))
	expect(t, "reconnect at the edge", h.Connected(at(5*time.Second-time.Microsecond)), "done r1 expired")

	// A delivery in flight over a reconnect: not re-presented until it fails.
	h = NewHost()
	mustPresent(t, h, t0, "r1", 30*time.Second)
	h.Answer(at(time.Second), answer("r1", ChoiceAllow), big)
	h.Disconnected(at(2 * time.Second))
	expect(t, "reconnect during delivery", h.Connected(at(3*time.Second)))
	acts, _ := h.Delivered(at(4*time.Second), "r1", errors.New("sink down"))
	expect(t, "failure re-presents", acts, "send present r1 26000")
	expect(t, "locked choice survives", h.Answer(at(5*time.Second), answer("r1", ChoiceDeny), big))
}
