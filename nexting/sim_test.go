package nexting

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/internal/clock"
)

type simHarness struct {
	t   *testing.T
	sim *Sim
	fr  *Framer
}

func newSimHarness(t *testing.T, info string) *simHarness {
	t.Helper()
	var raw []byte
	if info != "" {
		raw = []byte(info)
	}
	s, err := NewSim(raw)
	if err != nil {
		t.Fatal(err)
	}
	return &simHarness{t: t, sim: s, fr: s.NewFramer()}
}

// feed sends wire bytes to the simulator and returns its replies, LF
// stripped.
func (h *simHarness) feed(now time.Time, wire string) []string {
	var out []string
	for _, r := range h.fr.Feed([]byte(wire)) {
		out = append(out, frames(h.sim.Receive(now, r))...)
	}
	return out
}

func frames(fs [][]byte) []string {
	var out []string
	for _, f := range fs {
		out = append(out, strings.TrimSuffix(string(f), "\n"))
	}
	return out
}

func wantFrames(t *testing.T, step string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %q\nwant %q", step, got, want)
	}
}

const (
	wPresent = `{"v":1,"t":"present","id":"r1","sum":"Allow git push?","opt":["allow","deny"],"ttl":30000}` + "\n"
	wAllow   = `{"v":1,"t":"answer","id":"r1","ch":"allow"}`
)

func TestSimDeviceInfo(t *testing.T) {
	h := newSimHarness(t, "")
	info, err := ParseDeviceInfo(h.sim.DeviceInfo())
	if err != nil {
		t.Fatal(err)
	}
	if !info.Supports(ProfileApproval) || !info.Supports(ProfileStatus) || info.StatusSlots != 4 {
		t.Fatalf("default info %+v", info)
	}
	line := h.sim.InfoLine()
	if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
		t.Fatalf("info line %q", line)
	}
	// A pretty-printed value is compacted onto one line.
	pretty := "{\n  \"protocol\": \"nexting-device\",\n  \"spec\": \"x\",\n  \"wire\": [1],\n" +
		"  \"profiles\": [\"approval/1\"],\n  \"model\": \"m\",\n  \"fw\": \"f\",\n" +
		"  \"max_message_bytes\": 512,\n  \"max_summary_bytes\": 40\n}\n"
	s, err := NewSim([]byte(pretty))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(s.InfoLine()); strings.Count(got, "\n") != 1 || strings.Contains(got, " ") {
		t.Fatalf("not compacted: %q", got)
	}
	if s.MaxMessageBytes() != 512 {
		t.Fatalf("max %d", s.MaxMessageBytes())
	}
	// Profiles the simulator does not implement are refused; invalid info too.
	if _, err := NewSim([]byte(strings.Replace(DefaultSimDeviceInfo, `"status/1"`, `"status/1","keys/1"`, 1))); err == nil {
		t.Fatal("keys/1 accepted")
	}
	if _, err := NewSim([]byte(`{}`)); err == nil {
		t.Fatal("empty info accepted")
	}
	// Unknown profile names are fine.
	if _, err := NewSim([]byte(strings.Replace(DefaultSimDeviceInfo, `"status/1"`, `"status/1","x-vendor/3"`, 1))); err != nil {
		t.Fatal(err)
	}
}

func TestSimApprovalFlow(t *testing.T) {
	h := newSimHarness(t, "")
	wantFrames(t, "present", h.feed(t0, wPresent))
	v := h.sim.View(at(time.Second))
	if v.State != DevicePending || v.ID != "r1" || v.Summary != "Allow git push?" || v.Remaining != 29*time.Second {
		t.Fatalf("view %+v", v)
	}
	wantFrames(t, "press", frames(h.sim.Press(at(time.Second), ChoiceAllow)), wAllow)
	wantFrames(t, "second press", frames(h.sim.Press(at(time.Second), ChoiceDeny)))
	if dl, _ := h.sim.Deadline(); !dl.Equal(at(2 * time.Second)) {
		t.Fatalf("deadline %v", dl.Sub(t0))
	}
	wantFrames(t, "resend", frames(h.sim.Tick(at(2*time.Second))), wAllow)
	wantFrames(t, "other resolved", h.feed(at(2*time.Second), `{"v":1,"t":"resolved","id":"r9","r":"answered"}`+"\n"))
	wantFrames(t, "resend", frames(h.sim.Tick(at(3*time.Second))), wAllow)
	wantFrames(t, "resolved", h.feed(at(3*time.Second), `{"v":1,"t":"resolved","id":"r1","r":"answered"}`+"\n"))
	if v := h.sim.View(at(3 * time.Second)); v.State != DeviceIdle {
		t.Fatalf("view %+v", v)
	}
	wantFrames(t, "no resend", frames(h.sim.Tick(at(10*time.Second))))
}

// A malformed status (whatever the fault) leaves the previous status; a
// valid one replaces it atomically.
func TestSimStatusIsAtomic(t *testing.T) {
	h := newSimHarness(t, "")
	h.feed(t0, `{"v":1,"t":"status","agents":[{"slot":0,"state":"thinking","label":"fix login bug"},{"slot":1,"state":"working"}]}`+"\n")
	want := []Agent{{Slot: 0, State: AgentThinking, Label: "fix login bug"}, {Slot: 1, State: AgentWorking}}
	for _, bad := range []string{
		`{"v":1,"t":"status","agents":[{"slot":2,"state":"idle"},{"slot":2,"state":"idle"}]}`,   // duplicate slot
		`{"v":1,"t":"status","agents":[{"slot":2,"state":"idle"},{"slot":3,"state":"asleep"}]}`, // bad enum late in the list
		`{"v":1,"t":"status","agents":[{"slot":8,"state":"idle"}]}`,                             // slot out of range
		`{"v":1,"t":"status","agents":[],"agents":[]}`,                                          // duplicate key
		`{"v":1,"t":"status","id":"r1","agents":[]}`,                                            // id on status
		`{"v":1,"t":"status","agents":[{"slot":2,"state":"idle"}]`,                              // truncated
		`{"v":1,"t":"status","agents":[{"slot":2,"state":"idle","label":""}]}`,                  // empty label
	} {
		h.feed(at(time.Second), bad+"\n")
		if got := h.sim.View(at(time.Second)).Status; !reflect.DeepEqual(got, want) {
			t.Fatalf("after %s: status %+v", bad, got)
		}
	}
	h.feed(at(time.Second), `{"v":1,"t":"status","agents":[{"slot":3,"state":"complete"},{"slot":6,"state":"error"}]}`+"\n")
	if got := h.sim.View(at(time.Second)).Status; !reflect.DeepEqual(got, []Agent{{Slot: 3, State: AgentComplete}}) {
		t.Fatalf("replacement %+v (slot 6 is beyond the 4 physical slots)", got)
	}
	h.sim.Reset()
	if got := h.sim.View(at(time.Second)).Status; len(got) != 0 {
		t.Fatalf("reset kept %+v", got)
	}
}

// Everything refused is answered with an error when the reply is not
// larger than the input, never answered when it is an error, and never
// changes the approval state.
func TestSimRefusals(t *testing.T) {
	h := newSimHarness(t, strings.Replace(DefaultSimDeviceInfo, `"max_summary_bytes":240`, `"max_summary_bytes":20`, 1))
	h.feed(t0, wPresent[:len(wPresent)-len(`"Allow git push?","opt":["allow","deny"],"ttl":30000}`+"\n")]+`"short","opt":["allow","deny"],"ttl":30000}`+"\n")
	if v := h.sim.View(t0); v.State != DevicePending {
		t.Fatalf("setup: %+v", v)
	}
	cases := []struct {
		name, in string
		want     []string
	}{
		{"answer sent to a device", `{"v":1,"t":"answer","id":"r1","ch":"allow","pad":"...."}`,
			[]string{`{"v":1,"t":"error","id":"r1","code":"bad_message"}`}},
		{"unknown type", `{"v":1,"t":"frobnicate_the_widget_now","x":1}`,
			[]string{`{"v":1,"t":"error","code":"bad_message"}`}},
		{"short unknown type", `{"v":1,"t":"zap"}`, nil},
		{"error never answered", `{"v":1,"t":"error","code":"busy","id":"r1","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`, nil},
		{"malformed error never answered", `{"v":1,"t":"error","code":"nope","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`, nil},
		{"summary over the device's limit", `{"v":1,"t":"present","id":"r2","sum":"this summary is too long","opt":["allow","deny"],"ttl":1000}`,
			[]string{`{"v":1,"t":"error","id":"r2","code":"bad_message"}`}},
		{"wrong version", `{"v":2,"t":"present","id":"r2","sum":"","opt":["allow","deny"],"ttl":1000}`,
			[]string{`{"v":1,"t":"error","code":"unsupported_version"}`}}, // the id of another major is not read
		{"profile not declared", `{"v":1,"t":"text","channel":0,"content":"hello there, device"}`,
			[]string{`{"v":1,"t":"error","code":"unsupported_profile"}`}},
		{"oversize", `{"v":1,"t":"present","sum":"` + strings.Repeat("a", 5000) + `"}`,
			[]string{`{"v":1,"t":"error","code":"message_too_large"}`}},
		{"invalid UTF-8", `{"v":1,"t":"present","id":"r2","sum":"` + strings.Repeat("a", 60) + "\xff" + `"}`,
			[]string{`{"v":1,"t":"error","code":"bad_message"}`}},
	}
	for _, c := range cases {
		wantFrames(t, c.name, h.feed(at(time.Second), c.in+"\n"), c.want...)
		if v := h.sim.View(at(time.Second)); v.State != DevicePending || v.ID != "r1" {
			t.Fatalf("%s changed the approval: %+v", c.name, v)
		}
	}
	if v := h.sim.View(t0); v.LastError != (ErrorMessage{ID: "r1", Code: CodeBusy}) || v.Refused != len(cases)-1 {
		t.Fatalf("view %+v", v)
	}
}

// The simulator over a real connection, the test playing the host: the
// identical answer every 1000 ms of the fake clock until resolved or the
// local TTL; then nothing more (proven by the next reply being the one to
// the next input); a disconnect clears everything.
func TestSimConnResends(t *testing.T) {
	hostEnd, devEnd := pipePair(t)
	clk := clock.NewFake(t0)
	sim, err := NewSim(nil)
	if err != nil {
		t.Fatal(err)
	}
	dev := ServeSim(devEnd, sim, clk)
	defer dev.Close()
	in := newLines(t, hostEnd)
	in.expect(DefaultSimDeviceInfo)
	marker := func() {
		t.Helper()
		write(t, hostEnd, `{"v":1,"t":"answer","id":"r1","ch":"allow","pad":"xxxxxx"}`+"\n")
		in.expect(`{"v":1,"t":"error","id":"r1","code":"bad_message"}`)
	}

	// Until resolved.
	write(t, hostEnd, wPresent)
	write(t, hostEnd, `{"v":1,"t":"status","agents":[{"slot":0,"state":"working","label":"tests"}]}`+"\n")
	waitDevice(t, dev, "r1 and status", func(v SimView) bool { return v.State == DevicePending && len(v.Status) == 1 })
	if !dev.Press(ChoiceAllow) {
		t.Fatal("press not sent")
	}
	in.expect(wAllow)
	for range 3 {
		clk.Advance(AnswerResendInterval - time.Millisecond)
		clk.Advance(time.Millisecond)
		dev.Press(ChoiceDeny) // never changes the choice
		in.expect(wAllow)
	}
	write(t, hostEnd, `{"v":1,"t":"resolved","id":"r9","r":"answered"}`+"\n") // another id: nothing
	clk.Advance(AnswerResendInterval)
	in.expect(wAllow)
	write(t, hostEnd, `{"v":1,"t":"resolved","id":"r1","r":"answered"}`+"\n")
	waitDevice(t, dev, "resolved", idle)
	clk.Advance(10 * AnswerResendInterval)
	marker()

	// Until the local TTL.
	write(t, hostEnd, `{"v":1,"t":"present","id":"r2","sum":"x","opt":["allow","deny"],"ttl":2500}`+"\n")
	waitDevice(t, dev, "r2", pendingID("r2"))
	dev.Press(ChoiceDeny)
	wDeny := `{"v":1,"t":"answer","id":"r2","ch":"deny"}`
	in.expect(wDeny)
	clk.Advance(AnswerResendInterval)
	in.expect(wDeny)
	clk.Advance(AnswerResendInterval)
	in.expect(wDeny)
	clk.Advance(AnswerResendInterval / 2)
	waitDevice(t, dev, "local expiry", idle)
	clk.Advance(10 * AnswerResendInterval)
	marker()
	if v := dev.View(); len(v.Status) != 1 {
		t.Fatalf("status lost without a disconnect: %+v", v)
	}

	// Disconnect mid-frame: approval UI and status cleared.
	write(t, hostEnd, `{"v":1,"t":"present","id":"r3","sum":"x","opt":["allow","deny"],"ttl":2500}`+"\n")
	waitDevice(t, dev, "r3", pendingID("r3"))
	write(t, hostEnd, `{"v":1,"t":"resolved","id":"r3"`)
	hostEnd.Close()
	<-dev.Done()
	if v := dev.View(); v.State != DeviceIdle || len(v.Status) != 0 {
		t.Fatalf("after disconnect %+v", v)
	}
	if dev.Press(ChoiceAllow) {
		t.Fatal("press after disconnect")
	}
}
