package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// httpEvent is one NDJSON line of POST /v1/devices/{id}/instructions.
type httpEvent struct {
	Event         string          `json:"event"`
	InstructionID string          `json:"instructionId"`
	Kind          string          `json:"kind"`
	StreamSeq     int64           `json:"streamSeq"`
	DataB64       *string         `json:"dataB64"`
	ExitCode      *int            `json:"exitCode"`
	State         string          `json:"state"`
	Outcome       json.RawMessage `json:"outcome"`
	CancelledBy   string          `json:"cancelledBy"`
}

// postExec starts an exec through the HTTP plane (via the proxy, as a
// client would) and returns the open NDJSON stream.
func (e *env) postExec(ctx context.Context, cmd string) (*http.Response, *bufio.Scanner) {
	e.t.Helper()
	return e.postExecAt(ctx, e.px.URL(), cmd, instrTimeout)
}

// postExecAt is postExec to the lane at base, with the instruction's
// timeoutMs.
func (e *env) postExecAt(ctx context.Context, base, cmd string, timeout time.Duration) (*http.Response, *bufio.Scanner) {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"kind": "exec", "args": map[string]string{"command": cmd}, "timeoutMs": timeout.Milliseconds()})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/devices/"+e.deviceID+"/instructions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.apiKey)
	resp, err := e.http.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		e.t.Fatalf("POST instructions: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	return resp, sc
}

func nextEvent(t *testing.T, sc *bufio.Scanner) httpEvent {
	t.Helper()
	if !sc.Scan() {
		t.Fatalf("the stream ended early: %v", sc.Err())
	}
	var ev httpEvent
	if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
		t.Fatalf("%q: %v", sc.Text(), err)
	}
	return ev
}

// The HTTP caller sees what the Go caller sees (§4 via docs/api.md): after
// a drop in the middle of the device's stream, "accepted", then every chunk
// exactly once in order from streamSeq 0, one exit chunk last, then the
// outcome.
func TestHTTPCallerStreamAcrossADrop(t *testing.T) {
	e := newEnv(t)
	e.startExecutor()
	e.online()
	fx := e.sidefx("fx")
	const lines = 20
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	e.px.setFault(nth(4, func(f *frame) bool { return f.Dir == toLane && f.T == "chunk" }, cutMid))
	resp, sc := e.postExec(e.ctx, fx.cmd("a", fmt.Sprintf("i=1; while [ $i -le %d ]; do echo line$i; i=$((i+1)); sleep 0.01; done", lines)))
	defer resp.Body.Close()
	if ev := nextEvent(t, sc); ev.Event != "accepted" || ev.InstructionID == "" {
		t.Fatalf("first event %+v", ev)
	}
	var out strings.Builder
	seq := int64(0)
	for {
		ev := nextEvent(t, sc)
		if ev.Event == "outcome" {
			var o struct {
				OK       bool `json:"ok"`
				ExitCode int  `json:"exitCode"`
			}
			json.Unmarshal(ev.Outcome, &o)
			if ev.State != "terminal" || !o.OK || o.ExitCode != 0 {
				t.Fatalf("outcome %s %s", ev.State, ev.Outcome)
			}
			break
		}
		if ev.Event != "chunk" || ev.StreamSeq != seq {
			t.Fatalf("event %+v where streamSeq %d was due", ev, seq)
		}
		seq++
		if ev.Kind == "exit" {
			if ev.ExitCode == nil || *ev.ExitCode != 0 || ev.DataB64 != nil {
				t.Fatalf("exit chunk %+v", ev)
			}
			if last := nextEvent(t, sc); last.Event != "outcome" {
				t.Fatalf("%+v after the exit chunk", last)
			} else {
				var o struct{ OK bool }
				json.Unmarshal(last.Outcome, &o)
				if !o.OK {
					t.Fatalf("outcome %s", last.Outcome)
				}
			}
			break
		}
		b, err := base64.StdEncoding.DecodeString(*ev.DataB64)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
	}
	if sc.Scan() {
		t.Fatalf("a line after the outcome: %q", sc.Text())
	}
	if out.String() != want.String() || fx.starts("a") != 1 || fx.ends("a") != 1 {
		t.Fatalf("stdout %q, ran %d/%d", out.String(), fx.starts("a"), fx.ends("a"))
	}
	if e.px.cutCount() != 1 {
		t.Fatalf("%d cuts", e.px.cutCount())
	}
	e.checkFramesOnce()
}

// A caller that goes away cancels its instruction (docs/api.md): the command
// is killed on the device, its whole process group, and it ran once.
func TestHTTPCallerHangsUp(t *testing.T) {
	e := newEnv(t)
	e.startExecutor()
	e.online()
	fx, g, pf := e.sidefx("fx"), e.gate("a"), e.pidFile("a")
	ctx, cancel := context.WithCancel(e.ctx)
	resp, sc := e.postExec(ctx, fx.cmd("a", pf.longRunning(g)))
	ev := nextEvent(t, sc)
	pids := pf.waitPids(t)
	cancel()
	resp.Body.Close()
	eventually(t, "the command was killed", func() bool { return len(anyAlive(pids)) == 0 })
	eventually(t, "the lane let go of it", func() bool { return e.srv.Presence(e.deviceID).Inflight == 0 })
	g.open(t)
	if fx.starts("a") != 1 || fx.ends("a") != 0 || e.framesFor(ev.InstructionID) != 1 {
		t.Fatalf("ran %d/%d, %d frames", fx.starts("a"), fx.ends("a"), e.framesFor(ev.InstructionID))
	}
	e.checkFramesOnce()
}
