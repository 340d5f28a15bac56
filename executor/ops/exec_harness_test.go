//go:build linux

package ops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"hash"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-agent/sema/protocol"
)

// testSink records an exec stream and checks the Sink contract as it goes:
// one call at a time, no empty or oversized chunk, only stdout and stderr,
// nothing after the exit chunk.
type testSink struct {
	t      testing.TB
	keep   bool                                          // keep the bytes (else only count and hash them)
	onData func(kind protocol.ChunkKind, p []byte) error // optional hook, called after recording

	inCall atomic.Bool
	mu     sync.Mutex
	out    map[protocol.ChunkKind]*bytes.Buffer
	hash   map[protocol.ChunkKind]hash.Hash
	n      map[protocol.ChunkKind]int64 // bytes per stream
	chunks map[protocol.ChunkKind]int   // chunks per stream
	exits  []int
}

func newTestSink(t testing.TB) *testSink {
	s := &testSink{
		t:      t,
		keep:   true,
		out:    map[protocol.ChunkKind]*bytes.Buffer{protocol.ChunkStdout: {}, protocol.ChunkStderr: {}},
		hash:   map[protocol.ChunkKind]hash.Hash{},
		n:      map[protocol.ChunkKind]int64{},
		chunks: map[protocol.ChunkKind]int{},
	}
	for _, k := range []protocol.ChunkKind{protocol.ChunkStdout, protocol.ChunkStderr} {
		s.hash[k] = sha256.New()
	}
	return s
}

func (s *testSink) enter() func() {
	if !s.inCall.CompareAndSwap(false, true) {
		s.t.Errorf("sink called concurrently")
	}
	return func() { s.inCall.Store(false) }
}

func (s *testSink) Data(kind protocol.ChunkKind, p []byte) error {
	defer s.enter()()
	s.mu.Lock()
	switch {
	case kind != protocol.ChunkStdout && kind != protocol.ChunkStderr:
		s.t.Errorf("chunk of kind %q from exec", kind)
	case len(p) == 0:
		s.t.Errorf("empty %s chunk", kind)
	case len(p) > MaxChunkBytes:
		s.t.Errorf("%s chunk of %d bytes, more than MaxChunkBytes", kind, len(p))
	case len(s.exits) > 0:
		s.t.Errorf("%s chunk after the exit chunk", kind)
	}
	s.n[kind] += int64(len(p))
	s.chunks[kind]++
	if h := s.hash[kind]; h != nil {
		h.Write(p)
	}
	if s.keep {
		s.out[kind].Write(p)
	}
	hook := s.onData
	s.mu.Unlock()
	if hook != nil {
		return hook(kind, p)
	}
	return nil
}

func (s *testSink) Exit(code int) error {
	defer s.enter()()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exits = append(s.exits, code)
	return nil
}

func (s *testSink) stdout() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out[protocol.ChunkStdout].String()
}
func (s *testSink) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out[protocol.ChunkStderr].String()
}

func (s *testSink) sum(kind protocol.ChunkKind) []byte {
	return s.hash[kind].Sum(nil)
}

// checkStream checks the §4 rule against the outcome: exactly one exit
// chunk, last, with the outcome's code, for an exec outcome; none otherwise.
func (s *testSink) checkStream(out protocol.Outcome) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	eo, ok := out.(protocol.ExecOutcome)
	switch {
	case ok && len(s.exits) != 1:
		s.t.Errorf("exec outcome with %d exit chunks, want exactly 1", len(s.exits))
	case ok && s.exits[0] != eo.ExitCode:
		s.t.Errorf("exit chunk %d, outcome exitCode %d", s.exits[0], eo.ExitCode)
	case !ok && len(s.exits) != 0:
		s.t.Errorf("outcome %#v came with %d exit chunks, want none", out, len(s.exits))
	}
}

func testEnv(t testing.TB) *Env {
	return &Env{WorkspaceRoot: t.TempDir()}
}

func cmdReq(command string) Request {
	return Request{InstructionID: "01J0000000000000000000TEST", Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: command}}
}

// run runs one exec with a fresh sink and checks the stream and that no
// goroutine of Exec outlives it.
func run(t *testing.T, ctx context.Context, env *Env, req Request, sink *testSink) protocol.Outcome {
	t.Helper()
	if sink == nil {
		sink = newTestSink(t)
	}
	before := runtime.NumGoroutine()
	out := Exec(ctx, env, req, sink)
	sink.checkStream(out)
	checkGoroutines(t, before)
	return out
}

// checkGoroutines fails if more goroutines run than before. Exec waits for
// its goroutines, but one that has signalled its end may not have returned
// yet, so this polls briefly.
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines after Exec, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func wantExec(t *testing.T, out protocol.Outcome, code int) protocol.ExecOutcome {
	t.Helper()
	eo, ok := out.(protocol.ExecOutcome)
	if !ok {
		t.Fatalf("outcome %#v, want an exec outcome with exit code %d", out, code)
	}
	if eo.ExitCode != code {
		t.Fatalf("exit code %d, want %d", eo.ExitCode, code)
	}
	return eo
}

func wantFailure(t *testing.T, out protocol.Outcome, code protocol.ErrorCode, msgHas ...string) protocol.Failure {
	t.Helper()
	f, ok := out.(protocol.Failure)
	if !ok || f.ErrorCode != code {
		t.Fatalf("outcome %#v, want failure %s", out, code)
	}
	for _, s := range msgHas {
		if !strings.Contains(f.Message, s) {
			t.Errorf("message %q does not mention %q", f.Message, s)
		}
	}
	if _, err := f.MarshalJSON(); err != nil {
		t.Errorf("failure does not marshal: %v", err)
	}
	return f
}
