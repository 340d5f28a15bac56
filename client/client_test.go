package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/protocol"
)

func newClient(t *testing.T, f *fakeLane, key string) *client.Client {
	t.Helper()
	c, err := client.New(f.srv.URL+"/", key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestNewRefusesABadURLOrNoKey(t *testing.T) {
	if _, err := client.New("ftp://x", "k"); err == nil || !strings.Contains(err.Error(), "http://") {
		t.Errorf("ftp URL: %v", err)
	}
	if _, err := client.New("http://x", ""); err == nil {
		t.Error("no key: no error")
	}
}

func TestDevicesAndTypedErrors(t *testing.T) {
	f := newFakeLane(t)
	devs, err := newClient(t, f, fakeKey).Devices(t.Context())
	if err != nil || len(devs) != 1 || devs[0].DeviceID != "dev_1" || !devs[0].Online {
		t.Fatalf("devices %+v, %v", devs, err)
	}
	_, err = newClient(t, f, "sema_wrong").Devices(t.Context())
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 403 || ce.Code != api.CodeForbidden || ce.Message != "no verified identity" {
		t.Fatalf("wrong key: %#v", err)
	}
	dead, _ := client.New("http://127.0.0.1:1", fakeKey)
	_, err = dead.Devices(t.Context())
	var ue *client.UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "cannot reach the lane at http://127.0.0.1:1") {
		t.Fatalf("dead lane: %#v", err)
	}
}

func TestInstructFollowsTheStream(t *testing.T) {
	f := newFakeLane(t)
	var got bytes.Buffer
	var accepted string
	res, err := newClient(t, f, fakeKey).Instruct(t.Context(), "dev_1", api.InstructionRequest{
		Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "echo"}, TimeoutMs: 1000,
	}, client.Sink{
		Accepted: func(id string) { accepted = id },
		Chunk: func(kind protocol.ChunkKind, data []byte) error {
			got.WriteString(string(kind) + ":" + string(data) + ";")
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if accepted != "ins_1" || res.ID != "ins_1" || got.String() != "stdout:one ;stdout:two;" {
		t.Errorf("accepted %q, id %q, chunks %q", accepted, res.ID, got.String())
	}
	if o := res.Outcome; res.State != protocol.StateTerminal || !o.OK || o.Kind != protocol.OutcomeExec || o.ExitCode == nil || *o.ExitCode != 0 || res.Interrupted {
		t.Errorf("result %+v", res)
	}
}

// The end of ctx does not drop the stream: the cancel is posted and the
// outcome still read from it.
func TestInstructCancelsWhenCtxEnds(t *testing.T) {
	f := newFakeLane(t)
	ctx, cancel := context.WithCancel(t.Context())
	var cancelling atomic.Bool
	res, err := newClient(t, f, fakeKey).Instruct(ctx, "dev_1", api.InstructionRequest{
		Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "hang"}, TimeoutMs: 1000,
	}, client.Sink{Accepted: func(string) { cancel() }, Cancelling: func() { cancelling.Store(true) }})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || !cancelling.Load() || res.Outcome.Kind != protocol.OutcomeCancelled || res.Outcome.State != protocol.CancelKilled {
		t.Errorf("result %+v, cancelling %v", res, cancelling.Load())
	}
	if _, err := newClient(t, f, fakeKey).Instruct(ctx, "dev_1", api.InstructionRequest{}, client.Sink{}); !errors.Is(err, client.ErrNotSent) || !errors.Is(err, context.Canceled) {
		t.Errorf("a call with an ended ctx: %v", err)
	}
}

func TestInstructStreamBroken(t *testing.T) {
	f := newFakeLane(t)
	_, err := newClient(t, f, fakeKey).Instruct(t.Context(), "dev_1", api.InstructionRequest{
		Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "break"}, TimeoutMs: 1000,
	}, client.Sink{})
	var se *client.StreamError
	if !errors.As(err, &se) || se.InstructionID != "ins_1" || !strings.Contains(err.Error(), "ended before the outcome") || !strings.Contains(err.Error(), "ins_1 may have run") {
		t.Fatalf("%v", err)
	}
}

func TestUploadStreamsTheRawBody(t *testing.T) {
	f := newFakeLane(t)
	content := make([]byte, 5<<20+17)
	rand.Read(content)
	sum := sha256.Sum256(content)
	c := newClient(t, f, fakeKey)
	res, err := c.Upload(t.Context(), "dev_1", api.UploadRequest{Path: "/ws/a b.bin", TimeoutMs: 5000},
		bytes.NewReader(content), int64(len(content)), sum, client.Sink{})
	if err != nil {
		t.Fatal(err)
	}
	if o := res.Outcome; !o.OK || o.Kind != protocol.OutcomeWrite || o.CanonicalPath != "/ws/a b.bin" || o.Created == nil || !*o.Created {
		t.Fatalf("outcome %+v", o)
	}
	if !bytes.Equal(f.uploaded, content) {
		t.Errorf("the lane got %d bytes, sent %d", len(f.uploaded), len(content))
	}
	want := map[string]string{api.UploadPath: "/ws/a b.bin", api.UploadTimeoutMs: "5000", api.UploadSHA256: protocol.Digest(sum).String()}
	if len(f.query) != len(want) {
		t.Errorf("query %v, want %v", f.query, want)
	}
	for k, v := range want {
		if f.query[k] != v {
			t.Errorf("query %s = %q, want %q", k, f.query[k], v)
		}
	}
	if f.header.Get("Expect") != "100-continue" {
		t.Errorf("no Expect: 100-continue: %v", f.header)
	}

	// A guarded write carries its kind and expect; an empty body is sent with Content-Length 0.
	empty := sha256.Sum256(nil)
	res, err = c.Upload(t.Context(), "dev_1", api.UploadRequest{Kind: protocol.KindWriteFileGuarded, Path: "/ws/e", TimeoutMs: 1,
		Expect: &protocol.Expect{CanonicalPath: "/ws/e", Exclusive: true}}, strings.NewReader(""), 0, empty, client.Sink{})
	if err != nil || !res.Outcome.OK || len(f.uploaded) != 0 {
		t.Fatalf("empty upload: %+v %v (%d bytes)", res, err, len(f.uploaded))
	}
	if f.query[api.UploadKind] != "writeFileGuarded" || f.query[api.UploadExpect] != `{"canonicalPath":"/ws/e","exclusive":true}` {
		t.Errorf("guarded query %v", f.query)
	}
}

// A body that ends early is refused locally and writes nothing.
func TestUploadShortBody(t *testing.T) {
	f := newFakeLane(t)
	_, err := newClient(t, f, fakeKey).Upload(t.Context(), "dev_1", api.UploadRequest{Path: "/ws/x", TimeoutMs: 1},
		strings.NewReader("abc"), 10, sha256.Sum256([]byte("abc")), client.Sink{})
	if err == nil || !strings.Contains(err.Error(), "7 bytes short") || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("%v", err)
	}
}

// blockingReader hands out n bytes, then blocks until ctx ends (a body
// read that blocks holds up the transport, which waits for it).
type blockingReader struct {
	ctx context.Context
	n   int
}

func (b *blockingReader) Read(p []byte) (int, error) {
	if b.n == 0 {
		<-b.ctx.Done()
		return 0, io.ErrNoProgress
	}
	n := min(len(p), b.n)
	b.n -= n
	return n, nil
}

// Ctrl-C during the body stops it short: the lane never gets the rest, so
// nothing is written, and the error says so.
func TestUploadStoppedByCtx(t *testing.T) {
	f := newFakeLane(t)
	ctx, cancel := context.WithCancel(t.Context())
	const sent = 1 << 20
	go func() {
		for n := range f.partial {
			if n >= sent {
				cancel()
				return
			}
		}
	}()
	_, err := newClient(t, f, fakeKey).Upload(ctx, "dev_1", api.UploadRequest{Path: "/ws/x", TimeoutMs: 1},
		&blockingReader{ctx: ctx, n: sent}, 4<<20, protocol.Digest{}, client.Sink{})
	if !errors.Is(err, client.ErrUploadStopped) || !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
}

// The lane's refusal of the query comes back typed, before the body.
func TestUploadRefused(t *testing.T) {
	f := newFakeLane(t)
	_, err := newClient(t, f, fakeKey).Upload(t.Context(), "dev_1", api.UploadRequest{Path: "", TimeoutMs: 1},
		strings.NewReader("x"), 1, sha256.Sum256([]byte("x")), client.Sink{})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || ce.Code != api.CodeFieldInvalid {
		t.Fatalf("%#v", err)
	}
}
