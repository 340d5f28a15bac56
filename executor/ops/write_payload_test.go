//go:build linux || darwin

package ops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sema-agent/sema/protocol"
)

// Every way a payload can go wrong fails the whole write and leaves the
// directory exactly as it was: no target, no staging file.
func TestWriteBadPayloadLeavesNothing(t *testing.T) {
	content := []byte("the quick brown fox jumps over the lazy dog")
	sum := protocol.Digest(sha256.Sum256(content))
	good := func() []*protocol.Payload { return payloadFrames(content, 8) }
	cases := []struct {
		name   string
		frames func() []*protocol.Payload
		code   protocol.ErrorCode
	}{
		{"bad digest", func() []*protocol.Payload {
			f := good()
			f[2].Data = bytes.Clone(f[2].Data)
			f[2].Data[0] ^= 1
			return f
		}, protocol.ErrInvalid},
		{"short payload", func() []*protocol.Payload { f := good(); return append(f[:len(f)-2], f[len(f)-1]) }, protocol.ErrInvalid},
		{"gap", func() []*protocol.Payload { f := good(); return append(f[:2:2], f[3:]...) }, protocol.ErrInvalid},
		{"out of order", func() []*protocol.Payload { f := good(); f[2], f[3] = f[3], f[2]; return f }, protocol.ErrInvalid},
		{"overlap", func() []*protocol.Payload {
			f := good()
			dup := *f[2]
			return append(f[:3:3], append([]*protocol.Payload{&dup}, f[3:]...)...)
		}, protocol.ErrInvalid},
		{"too long", func() []*protocol.Payload {
			f := good()
			extra := &protocol.Payload{Part: protocol.PartChunk, Offset: int64(len(content)), Data: []byte("!")}
			return append(f[:len(f)-1:len(f)-1], extra, f[len(f)-1])
		}, protocol.ErrInvalid},
		{"begin disagrees", func() []*protocol.Payload {
			f := good()
			f[0] = &protocol.Payload{Part: protocol.PartBegin, TotalLen: 3, SHA256: sum}
			return f
		}, protocol.ErrInvalid},
		{"commit disagrees", func() []*protocol.Payload {
			f := good()
			f[len(f)-1] = &protocol.Payload{Part: protocol.PartCommit, TotalLen: int64(len(content)), SHA256: protocol.Digest{1}}
			return f
		}, protocol.ErrInvalid},
		{"chunk before begin", func() []*protocol.Payload { return good()[1:] }, protocol.ErrInvalid},
		{"two begins", func() []*protocol.Payload { f := good(); return append([]*protocol.Payload{f[0]}, f...) }, protocol.ErrInvalid},
		{"nil frame", func() []*protocol.Payload { f := good(); f[3] = nil; return f }, protocol.ErrInvalid},
		{"another instruction's frame", func() []*protocol.Payload {
			f := good()
			other := *f[3]
			other.InstructionID = "01OTHER"
			f[3] = &other
			return f
		}, protocol.ErrInvalid},
		{"closed early", func() []*protocol.Payload { f := good(); return f[:3] }, protocol.ErrTransportLost},
		{"closed before begin", func() []*protocol.Payload { return nil }, protocol.ErrTransportLost},
	}
	for _, kind := range []protocol.InstructionKind{protocol.KindWriteFile, protocol.KindWriteFileExclusive, protocol.KindAppendFile} {
		for _, c := range cases {
			for _, existing := range []bool{false, true} {
				if existing && kind == protocol.KindWriteFileExclusive {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/existing=%v", kind, c.name, existing), func(t *testing.T) {
					dir := tempRealDir(t)
					p := dir + "/target"
					want := []string{}
					if existing {
						mustWrite(t, p, "original", 0o644)
						want = []string{"target"}
					}
					tmpdir := tempRealDir(t) // appendFile stages here
					t.Setenv("TMPDIR", tmpdir)
					out, _ := runFileReq(t, context.Background(), nil, Request{
						InstructionID: "01TEST", Kind: kind, Args: writeArgs(p, content), Payload: feedFrames(c.frames()),
					})
					wantFail(t, out, c.code)
					wantDirHolds(t, dir, want...)
					wantDirHolds(t, tmpdir)
					if existing {
						if got := mustRead(t, p); got != "original" {
							t.Fatalf("the target was touched: %q", got)
						}
					}
				})
			}
		}
	}
}

// payloadPump feeds frames one at a time on an unbuffered channel, so the
// test knows each frame was taken by the op before it goes on.
type payloadPump struct {
	ch chan *protocol.Payload
}

func (p payloadPump) send(t *testing.T, f *protocol.Payload) {
	t.Helper()
	select {
	case p.ch <- f:
	case <-time.After(time.Minute):
		t.Fatal("the op stopped taking payload frames")
	}
}

// startWrite runs a write in the background; the outcome arrives on the
// returned channel.
func startWrite(t *testing.T, ctx context.Context, kind protocol.InstructionKind, p string, content []byte, timeout time.Duration) (payloadPump, <-chan protocol.Outcome) {
	pump := payloadPump{ch: make(chan *protocol.Payload)}
	done := make(chan protocol.Outcome, 1)
	go func() {
		done <- File(ctx, &Env{}, Request{
			InstructionID: "01TEST", Kind: kind, Args: writeArgs(p, content), Payload: pump.ch, Timeout: timeout,
		}, &fsSink{})
	}()
	return pump, done
}

func TestWriteCancelMidPayload(t *testing.T) {
	content := bytes.Repeat([]byte("x"), 100)
	for _, kind := range []protocol.InstructionKind{protocol.KindWriteFile, protocol.KindWriteFileExclusive, protocol.KindAppendFile} {
		t.Run(string(kind), func(t *testing.T) {
			dir := tempRealDir(t)
			t.Setenv("TMPDIR", tempRealDir(t))
			ctx, cancel := context.WithCancelCause(context.Background())
			pump, done := startWrite(t, ctx, kind, dir+"/f", content, 0)
			frames := payloadFrames(content, 10)
			pump.send(t, frames[0])
			pump.send(t, frames[1])
			pump.send(t, frames[2]) // begin and a chunk were handled: the staging file exists
			cancel(ErrCancelled)
			out := <-done
			checkFileOutcome(t, kind, out)
			if c := wantArm[protocol.CancelledOutcome](t, out); c.State != protocol.CancelKilled {
				t.Fatalf("state %q, want killed (a staging file had been created)", c.State)
			}
			wantDirHolds(t, dir)
			wantDirHolds(t, os.Getenv("TMPDIR"))
		})
	}
}

func TestWriteCancelBeforeBegin(t *testing.T) {
	dir := tempRealDir(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	_, done := startWrite(t, ctx, protocol.KindWriteFile, dir+"/f", []byte("x"), 0)
	cancel(ErrCancelled)
	out := <-done
	checkFileOutcome(t, protocol.KindWriteFile, out)
	if c := wantArm[protocol.CancelledOutcome](t, out); c.State != protocol.CancelNotStarted {
		t.Fatalf("state %q, want not_started", c.State)
	}
	wantDirHolds(t, dir)
}

func TestWriteTimeoutMidPayload(t *testing.T) {
	dir := tempRealDir(t)
	content := []byte("0123456789")
	frames := payloadFrames(content, 5)
	ch := make(chan *protocol.Payload, 2)
	ch <- frames[0]
	ch <- frames[1] // and nothing more: the op's own timeout ends it
	out, _ := runFileReq(t, context.Background(), nil, Request{
		InstructionID: "01TEST", Kind: protocol.KindWriteFile, Args: writeArgs(dir+"/f", content), Payload: ch, Timeout: 50 * time.Millisecond,
	})
	wantFail(t, out, protocol.ErrTimeout)
	wantDirHolds(t, dir)
}

func TestWriteAbortedMidPayload(t *testing.T) {
	dir := tempRealDir(t)
	content := []byte("0123456789")
	ctx, cancel := context.WithCancelCause(context.Background())
	pump, done := startWrite(t, ctx, protocol.KindWriteFile, dir+"/f", content, 0)
	frames := payloadFrames(content, 5)
	pump.send(t, frames[0])
	pump.send(t, frames[1])
	cancel(errors.New("generation fenced"))
	wantFail(t, <-done, protocol.ErrAborted)
	wantDirHolds(t, dir)
}
