package lanetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/protocol"
)

// WaitBound is the failure bound of every wait on a socket: reaching it
// fails the test; nothing waits for it to pass.
const WaitBound = 10 * time.Second

// ErrNoFrame is a read that reached WaitBound: the socket is still open.
var ErrNoFrame = errors.New("no frame within the wait bound")

// Inbox is a scripted executor's socket as its test reads it: every frame
// the lane sends must pass the executor's own decoder, and frames read
// while the test waits for another are kept, in order, for later.
type Inbox struct {
	WS      *websocket.Conn
	Pending []protocol.ServerFrame // read, not yet expected
}

// Read reads one frame from the socket.
func (b *Inbox) Read(t testing.TB) (protocol.ServerFrame, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitBound)
	defer cancel()
	typ, data, err := b.WS.Read(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ErrNoFrame
		}
		return nil, err
	}
	if typ != websocket.MessageText {
		t.Fatalf("the lane sent a binary frame")
	}
	f, err := protocol.DecodeServerFrame(protocol.TextMessage, data)
	if err != nil {
		t.Fatalf("the lane sent a frame an executor must refuse: %v: %.200s", err, data)
	}
	return f, nil
}

// Next returns the oldest frame not yet expected, or reads one.
func (b *Inbox) Next(t testing.TB) protocol.ServerFrame {
	t.Helper()
	if len(b.Pending) > 0 {
		f := b.Pending[0]
		b.Pending = b.Pending[1:]
		return f
	}
	f, err := b.Read(t)
	if err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	return f
}

// Expect returns the first frame of type T that matches (nil matches any),
// keeping every other frame for later.
func Expect[T protocol.ServerFrame](t testing.TB, b *Inbox, match func(T) bool) T {
	t.Helper()
	for i, f := range b.Pending {
		if g, ok := f.(T); ok && (match == nil || match(g)) {
			b.Pending = slices.Delete(b.Pending, i, i+1)
			return g
		}
	}
	for {
		f, err := b.Read(t)
		if err != nil {
			var zero T
			t.Fatalf("waiting for a %T frame: %v (unexpected so far: %s)", zero, err, Describe(b.Pending...))
		}
		if g, ok := f.(T); ok && (match == nil || match(g)) {
			return g
		}
		b.Pending = append(b.Pending, f)
	}
}

// ExpectClosed reads until the lane closes the socket and returns the read
// error; frames read on the way are kept.
func (b *Inbox) ExpectClosed(t testing.TB) error {
	t.Helper()
	for {
		f, err := b.Read(t)
		if err == ErrNoFrame {
			t.Fatalf("the socket is still open (unexpected frames: %s)", Describe(b.Pending...))
		}
		if err != nil {
			return err
		}
		b.Pending = append(b.Pending, f)
	}
}

// None fails if any of frames matches.
func None[T protocol.ServerFrame](t testing.TB, frames []protocol.ServerFrame, what string, match func(T) bool) {
	t.Helper()
	for _, f := range frames {
		if g, ok := f.(T); ok && (match == nil || match(g)) {
			t.Fatalf("unexpected %s: %s", what, Describe(f))
		}
	}
}

// Describe shows frames as their JSON, each cut at 200 bytes.
func Describe(frames ...protocol.ServerFrame) string {
	var parts []string
	for _, f := range frames {
		b, err := f.MarshalJSON()
		if err != nil {
			parts = append(parts, fmt.Sprintf("%T(%v)", f, err))
			continue
		}
		if len(b) > 200 {
			b = append(b[:200], "…"...)
		}
		parts = append(parts, string(b))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
