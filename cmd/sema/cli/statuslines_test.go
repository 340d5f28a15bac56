package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/clock"
	"github.com/sema-agent/sema/internal/syncbuf"
)

// fakeTerminal makes stderr a terminal (or not) and the status lines' clock
// clk for one test; out collects Stderr.
func fakeTerminal(t *testing.T, terminal bool) (*clock.Fake, *syncbuf.Buffer) {
	clk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	out := &syncbuf.Buffer{}
	oldErr, oldTerm, oldIn, oldClk := Stderr, stderrIsTerminal, stdinIsTerminal, uiClock
	Stderr, uiClock = out, clk
	stderrIsTerminal = func() bool { return terminal }
	stdinIsTerminal = func() bool { return true }
	t.Cleanup(func() { Stderr, stderrIsTerminal, stdinIsTerminal, uiClock = oldErr, oldTerm, oldIn, oldClk })
	return clk, out
}

func TestWaitNoticeSaysWhyItIsSilent(t *testing.T) {
	clk, out := fakeTerminal(t, true)
	n := newWaitNotice()
	n.accepted("ins_1")
	clk.Advance(waitNoticeAfter - time.Millisecond)
	if out.String() != "" {
		t.Fatalf("a line before %v: %q", waitNoticeAfter, out)
	}
	clk.Advance(time.Millisecond)
	if want := "\r" + waitingLine + "\x1b[K"; out.String() != want {
		t.Fatalf("after %v: %q, want %q", waitNoticeAfter, out, want)
	}
	n.beforeOutput()
	n.cancelling()
	n.end()
	want := "\r" + waitingLine + "\x1b[K" + clearLine + "\r" + cancellingLine + "\x1b[K" + clearLine
	if out.String() != want {
		t.Errorf("lines %q, want %q", out, want)
	}

	// Output in time: no line, ever.
	clk, out = fakeTerminal(t, true)
	n = newWaitNotice()
	n.accepted("ins_2")
	n.beforeOutput()
	clk.Advance(time.Minute)
	n.end()
	if out.String() != "" || clk.Pending() != 0 {
		t.Errorf("output came in time, yet %q (%d timers)", out, clk.Pending())
	}
}

func TestNoStatusLinesOffATerminal(t *testing.T) {
	clk, out := fakeTerminal(t, false)
	n := newWaitNotice()
	n.accepted("ins_1")
	clk.Advance(time.Minute)
	n.cancelling()
	n.end()
	p := newProgress("put", 100)
	clk.Advance(time.Second)
	p.add(50)
	p.done()
	if out.String() != "" || n != nil || p != nil {
		t.Errorf("off a terminal: %q", out)
	}
}

func TestProgressLine(t *testing.T) {
	clk, out := fakeTerminal(t, true)
	p := newProgress("put", 10<<20)
	p.add(1 << 20)
	if out.String() != "" {
		t.Fatalf("drawn before %v: %q", progressEvery, out)
	}
	clk.Advance(progressEvery)
	p.add(1 << 20) // 2 MiB in 0.2 s: 10 MiB/s, 8 MiB left
	want := "\rput 2.0 MiB / 10.0 MiB  10.0 MiB/s  1s left\x1b[K"
	if out.String() != want {
		t.Fatalf("line %q, want %q", out, want)
	}
	clk.Advance(progressEvery / 2)
	p.add(1 << 20)
	if out.String() != want {
		t.Errorf("redrawn within %v: %q", progressEvery, out)
	}
	p.done()
	p.add(1)
	if out.String() != want+clearLine {
		t.Errorf("after done: %q", out)
	}
	// An unknown total shows no time left.
	clk, out = fakeTerminal(t, true)
	p = newProgress("get", -1)
	clk.Advance(time.Second)
	p.add(512)
	if want := "\rget 512 B  512 B/s\x1b[K"; out.String() != want {
		t.Errorf("unknown total: %q, want %q", out, want)
	}
}

// oneDeviceLane is a lane with one device, dev_1, whose instructions are
// answered by instructions once their body is read.
func oneDeviceLane(instructions http.HandlerFunc) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "GET" && r.URL.Path == "/v1/devices":
			json.NewEncoder(w).Encode(api.DeviceList{Devices: []api.Device{{DeviceID: "dev_1", WorkspaceRoot: "/ws"}}})
		case r.Method == "POST" && r.URL.Path == "/v1/devices/dev_1/instructions":
			io.Copy(io.Discard, r.Body)
			instructions(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
}

// sema run in process against a lane that takes the command and stays
// silent: on a (fake) terminal it says so after the wait, and erases the
// line before the output.
func TestRunSaysWhileTheDeviceIsSilent(t *testing.T) {
	clk, stderr := fakeTerminal(t, true)
	release := make(chan struct{})
	lane := oneDeviceLane(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"event":"accepted","instructionId":"ins_1"}`+"\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, `{"event":"chunk","kind":"stderr","streamSeq":0,"dataB64":"aGkK"}`+"\n"+
			`{"event":"outcome","state":"terminal","outcome":{"ok":true,"kind":"exec","exitCode":0}}`+"\n")
	})
	defer lane.Close()
	t.Setenv(EnvAPIKey, "sema_x")
	done := make(chan int)
	go func() { done <- Run(t.Context(), []string{"run", "--server", lane.URL, "--", "sleep 5; echo hi >&2"}) }()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, ok := clk.WaitTimer(ctx, func(d time.Duration) bool { return d == waitNoticeAfter }); !ok {
		t.Fatal("run armed no wait")
	}
	clk.Advance(waitNoticeAfter)
	close(release)
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := "\r" + waitingLine + "\x1b[K" + clearLine + "hi\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
}

// sema run on a terminal asks the lane for device notices and says at once
// that the device disconnected and how long the lane waits for it; the
// line is erased when it is back, before the output. Not on a terminal it
// does not ask.
func TestRunSaysWhenTheDeviceDisconnects(t *testing.T) {
	for _, terminal := range []bool{true, false} {
		_, stderr := fakeTerminal(t, terminal)
		asked := make(chan string, 1)
		lane := oneDeviceLane(func(w http.ResponseWriter, r *http.Request) {
			asked <- r.Header.Get(api.HeaderNotices)
			io.WriteString(w, `{"event":"accepted","instructionId":"ins_1"}`+"\n")
			if r.Header.Get(api.HeaderNotices) == api.NoticesDevice {
				io.WriteString(w, `{"event":"device","graceMs":120000,"presence":"disconnected"}`+"\n"+
					`{"event":"device","presence":"connected"}`+"\n")
			}
			io.WriteString(w, `{"event":"chunk","kind":"stderr","streamSeq":0,"dataB64":"aGkK"}`+"\n"+
				`{"event":"outcome","state":"terminal","outcome":{"ok":true,"kind":"exec","exitCode":0}}`+"\n")
		})
		t.Setenv(EnvAPIKey, "sema_x")
		code := Run(t.Context(), []string{"run", "--server", lane.URL, "--", "make test"})
		lane.Close()
		if code != 0 {
			t.Fatalf("terminal %v: exit %d: %s", terminal, code, stderr)
		}
		want, header := "hi\n", ""
		if terminal {
			want = "\rsema: the device disconnected; waiting up to 120 seconds for it to come back\x1b[K" + clearLine + "hi\n"
			header = api.NoticesDevice
		}
		if got := <-asked; got != header {
			t.Errorf("terminal %v: %s %q, want %q", terminal, api.HeaderNotices, got, header)
		}
		if stderr.String() != want {
			t.Errorf("terminal %v: stderr %q, want %q", terminal, stderr, want)
		}
	}
}

func TestStdinWrapKeepsTheCommand(t *testing.T) {
	in := &remoteStdin{path: "/tmp/it's"}
	if got, want := in.wrap("echo a # )"), "exec <'/tmp/it'\\''s'\necho a # )"; got != want {
		t.Errorf("wrap = %q, want %q", got, want)
	}
	if got := (*remoteStdin)(nil).wrap("true"); got != "true" {
		t.Errorf("no stdin: %q", got)
	}
	if singleQuote("a'b") != `'a'\''b'` {
		t.Errorf("singleQuote(a'b) = %s", singleQuote("a'b"))
	}
}
