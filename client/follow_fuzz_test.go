package client

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/protocol"
)

// Whatever the lane's stream holds, follow ends with an outcome or a
// *StreamError, never a panic, and hands the sink only decoded chunks.
func FuzzFollow(f *testing.F) {
	f.Add([]byte(`{"event":"accepted","instructionId":"ins_1"}` + "\n" +
		`{"event":"chunk","kind":"stdout","streamSeq":0,"dataB64":"aGkK"}` + "\n" +
		`{"event":"outcome","state":"terminal","outcome":{"ok":true,"kind":"exec","exitCode":0}}` + "\n"))
	f.Add([]byte(`{"event":"accepted","instructionId":"a"}` + "\n" + `{"event":"accepted","instructionId":"b"}` + "\n"))
	f.Add([]byte(`{"event":"outcome","state":"terminal","outcome":[]}` + "\n"))
	f.Add([]byte(`{"event":"chunk","kind":"data","dataB64":"!!"}` + "\n"))
	f.Fuzz(func(t *testing.T, stream []byte) { followAny(t, api.NewEventReader(bytes.NewReader(stream))) })
}

// FuzzFollowRaw is FuzzFollow over the raw stream.
func FuzzFollowRaw(f *testing.F) {
	f.Add([]byte("j\x00\x00\x00\x2c" + `{"event":"accepted","instructionId":"ins_1"}` + "o\x00\x00\x00\x0b\x00\x00\x00\x00\x00\x00\x00\x00hi\n" +
		"j\x00\x00\x00\x56" + `{"event":"outcome","state":"terminal","outcome":{"ok":true,"kind":"exec","exitCode":0}}`))
	f.Add([]byte("o\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, stream []byte) { followAny(t, api.NewRawEventReader(bytes.NewReader(stream))) })
}

// followAny follows one fuzzed stream: an outcome or a *StreamError.
func followAny(t *testing.T, er api.EventStream) {
	w := newWatcher(nil, context.Background(), func() {}, nil, nil)
	defer w.stop()
	res, err := follow(er, Sink{Chunk: func(kind protocol.ChunkKind, data []byte) error {
		if len(data) == 0 || kind == protocol.ChunkExit {
			t.Errorf("the sink got %q %q", kind, data)
		}
		return nil
	}}, w)
	var se *StreamError
	if err != nil && !errors.As(err, &se) {
		t.Errorf("error %T %v", err, err)
	}
	if err == nil && res.ID == "" {
		t.Errorf("an outcome without an accepted instruction id: %+v", res)
	}
}
