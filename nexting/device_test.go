package nexting

import (
	"reflect"
	"testing"
	"time"
)

func present(id string, ttlMillis int) Present {
	return Present{ID: id, Summary: "Allow git push?", TTLMillis: ttlMillis}
}

func wantState(t *testing.T, d *Device, want DeviceState) {
	t.Helper()
	if d.State() != want {
		t.Fatalf("state %v, want %v", d.State(), want)
	}
}

func wantTick(t *testing.T, d *Device, now time.Time, want *Answer) {
	t.Helper()
	a, ok := d.Tick(now)
	switch {
	case want == nil && ok:
		t.Fatalf("tick at %v sent %+v", now.Sub(t0), a)
	case want != nil && (!ok || a != *want):
		t.Fatalf("tick at %v: got %+v %v, want %+v", now.Sub(t0), a, ok, *want)
	}
}

// Pending → Waiting Resolution on a press; the identical answer every
// 1000 ms until a matching resolved; the choice never changes.
func TestDeviceResendEverySecondUntilResolved(t *testing.T) {
	d := NewDevice(0)
	d.Present(t0, present("r1", 30000))
	wantState(t, d, DevicePending)
	if dl, _ := d.Deadline(); !dl.Equal(at(30 * time.Second)) {
		t.Fatalf("pending deadline %v", dl.Sub(t0))
	}
	a, ok := d.Press(at(2*time.Second), ChoiceAllow)
	if !ok || a != answer("r1", ChoiceAllow) {
		t.Fatalf("press: %+v %v", a, ok)
	}
	wantState(t, d, DeviceWaiting)
	if _, ok := d.Press(at(2*time.Second), ChoiceDeny); ok {
		t.Fatal("second press answered")
	}
	want := answer("r1", ChoiceAllow)
	for i := 1; i <= 5; i++ {
		next := at(2*time.Second + time.Duration(i)*AnswerResendInterval)
		if dl, _ := d.Deadline(); !dl.Equal(next) {
			t.Fatalf("deadline %v, want %v", dl.Sub(t0), next.Sub(t0))
		}
		wantTick(t, d, next.Add(-time.Millisecond), nil)
		wantTick(t, d, next, &want)
		d.Press(next, ChoiceDeny) // never changes the choice
	}
	if d.Resolved(at(8*time.Second), Resolved{ID: "r2", Reason: ReasonAnswered}) {
		t.Fatal("a resolved for another id cleared the request")
	}
	wantState(t, d, DeviceWaiting)
	if !d.Resolved(at(8*time.Second), Resolved{ID: "r1", Reason: ReasonAnswered}) {
		t.Fatal("matching resolved ignored")
	}
	wantState(t, d, DeviceIdle)
	if _, ok := d.Deadline(); ok {
		t.Fatal("a deadline after resolution")
	}
	wantTick(t, d, at(time.Minute), nil)
}

// Resends stop at the local TTL; at the very instant, expiry wins.
func TestDeviceLocalTTL(t *testing.T) {
	d := NewDevice(0)
	d.Present(t0, present("r1", 3000))
	d.Press(at(time.Second), ChoiceDeny)
	want := answer("r1", ChoiceDeny)
	wantTick(t, d, at(2*time.Second), &want)
	if dl, _ := d.Deadline(); !dl.Equal(at(3 * time.Second)) {
		t.Fatalf("deadline %v", dl.Sub(t0))
	}
	wantTick(t, d, at(3*time.Second), nil)
	wantState(t, d, DeviceIdle)

	d.Present(t0, present("r2", 1000))
	wantTick(t, d, at(999*time.Millisecond), nil)
	wantState(t, d, DevicePending)
	if _, ok := d.Press(at(time.Second), ChoiceAllow); ok {
		t.Fatal("press after the local TTL answered")
	}
	wantState(t, d, DeviceIdle)
}

func TestDeviceResolvedWhilePendingAndLateResolved(t *testing.T) {
	d := NewDevice(0)
	d.Present(t0, present("r1", 30000))
	if !d.Resolved(at(time.Second), Resolved{ID: "r1", Reason: ReasonCancelled}) {
		t.Fatal("matching resolved while Pending ignored")
	}
	wantState(t, d, DeviceIdle)

	// Host replaces r1 by r2: resolved(r1) first, then present(r2); a late
	// duplicate resolved(r1) must not clear r2.
	d.Present(t0, present("r1", 30000))
	d.Press(at(time.Second), ChoiceAllow)
	d.Resolved(at(2*time.Second), Resolved{ID: "r1", Reason: ReasonReplaced})
	d.Present(at(2*time.Second), present("r2", 30000))
	if d.Resolved(at(3*time.Second), Resolved{ID: "r1", Reason: ReasonReplaced}) {
		t.Fatal("late resolved cleared the new request")
	}
	if v := d.View(at(3 * time.Second)); v.State != DevicePending || v.ID != "r2" || v.Choice != "" {
		t.Fatalf("view %+v", v)
	}
	// Idle: resolved and presses are ignored.
	d.Reset()
	if d.Resolved(t0, Resolved{ID: "r2", Reason: ReasonAnswered}) {
		t.Fatal("resolved while idle")
	}
	if _, ok := d.Press(t0, ChoiceAllow); ok {
		t.Fatal("press while idle")
	}
}

func TestDevicePresentReplaces(t *testing.T) {
	d := NewDevice(0)
	d.Present(t0, present("r1", 30000))
	d.Present(at(time.Second), Present{ID: "r2", Summary: "Allow rm?", TTLMillis: 5000})
	v := d.View(at(2 * time.Second))
	if v.State != DevicePending || v.ID != "r2" || v.Summary != "Allow rm?" || v.Remaining != 4*time.Second {
		t.Fatalf("view %+v", v)
	}
	// Waiting: a different request replaces (its resolved was lost); the
	// request being waited on, presented again, changes nothing.
	d.Press(at(2*time.Second), ChoiceDeny)
	d.Present(at(3*time.Second), present("r2", 30000))
	if v := d.View(at(3 * time.Second)); v.State != DeviceWaiting || v.Choice != ChoiceDeny || v.Remaining != 3*time.Second {
		t.Fatalf("re-present of the waited request: %+v", v)
	}
	d.Present(at(3*time.Second), present("r3", 30000))
	if v := d.View(at(3 * time.Second)); v.State != DevicePending || v.ID != "r3" || v.Choice != "" {
		t.Fatalf("replacement while waiting: %+v", v)
	}
	wantTick(t, d, at(10*time.Second), nil) // no resend for the replaced answer
}

func TestDeviceStatusAndReset(t *testing.T) {
	d := NewDevice(3)
	s1 := Status{Agents: []Agent{{Slot: 5, State: AgentError}, {Slot: 2, State: AgentWorking, Label: "b"}, {Slot: 0, State: AgentThinking, Label: "a"}}}
	d.SetStatus(s1)
	want := []Agent{{Slot: 0, State: AgentThinking, Label: "a"}, {Slot: 2, State: AgentWorking, Label: "b"}}
	if got := d.Status(); !reflect.DeepEqual(got, want) {
		t.Fatalf("status %+v", got)
	}
	// Full replacement: slot 0 is gone.
	d.SetStatus(Status{Agents: []Agent{{Slot: 1, State: AgentComplete}}})
	if got := d.Status(); !reflect.DeepEqual(got, []Agent{{Slot: 1, State: AgentComplete}}) {
		t.Fatalf("status %+v", got)
	}
	d.SetStatus(Status{Agents: []Agent{}})
	if got := d.Status(); len(got) != 0 {
		t.Fatalf("empty status kept %+v", got)
	}
	// Status never touches the approval.
	d.Present(t0, present("r1", 30000))
	d.SetStatus(Status{Agents: []Agent{{Slot: 0, State: AgentNeedsInput}}})
	wantState(t, d, DevicePending)
	// Disconnect or reboot clears both.
	d.Reset()
	if v := d.View(t0); v.State != DeviceIdle || v.ID != "" || len(v.Status) != 0 {
		t.Fatalf("after reset %+v", v)
	}
	if _, ok := d.Deadline(); ok {
		t.Fatal("deadline after reset")
	}
	if got := NewDevice(0); len(got.Status()) != 0 {
		t.Fatal("status on a device without slots")
	}
	d0 := NewDevice(0)
	d0.SetStatus(Status{Agents: []Agent{{Slot: 0, State: AgentIdle}}})
	if len(d0.Status()) != 0 {
		t.Fatal("a device without slots rendered a status")
	}
}
