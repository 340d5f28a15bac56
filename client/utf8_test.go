package client_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/protocol"
)

// JSON carries only Unicode text, and encoding/json sends U+FFFD for each
// byte that is not UTF-8: a path or command that is not valid UTF-8 would
// reach the device as another one (a remove of "bad\xff" removes
// "bad\uFFFD"). Such an instruction is refused before anything is sent,
// naming the field.
func TestAnInstructionThatIsNotUTF8IsNeverSent(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "nothing should reach the lane", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	lc, err := client.New(srv.URL, fakeKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lc.Close)
	cases := []struct {
		in    api.InstructionRequest
		field string
	}{
		{api.InstructionRequest{Kind: protocol.KindRemove, Args: protocol.DirArgs{Path: "/ws/bad\xff.txt"}}, "path"},
		{api.InstructionRequest{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "rm bad\xff.txt"}}, "command"},
		{api.InstructionRequest{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "ls"}, Cwd: "/ws/\xfe"}, "cwd"},
		{api.InstructionRequest{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "ls"}, ShellEnv: map[string]string{"A": "\xc3"}}, "shellEnv"},
		{api.InstructionRequest{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "ls"}, ShellEnv: map[string]string{"\xc3": "a"}}, "shellEnv"},
	}
	for _, tc := range cases {
		_, err := lc.Instruct(t.Context(), "dev_1", tc.in, client.Sink{})
		var bad *client.NotUTF8Error
		if !errors.As(err, &bad) || bad.Field != tc.field || !strings.Contains(err.Error(), `\x`) {
			t.Errorf("%+v: %v, want a NotUTF8Error naming %s and the bad byte", tc.in, err, tc.field)
		}
	}
	_, err = lc.Upload(t.Context(), "dev_1", api.UploadRequest{Path: "/ws/bad\xff.txt"}, bytes.NewReader(nil), 0, protocol.Digest{}, client.Sink{})
	if bad := (*client.NotUTF8Error)(nil); !errors.As(err, &bad) || bad.Field != "path" {
		t.Errorf("upload: %v, want a NotUTF8Error naming path", err)
	}
	// Every other JSON body too: a device renamed, an identity created.
	if _, err := lc.Rename(t.Context(), "dev_1", "box\xff"); !errors.As(err, new(*client.NotUTF8Error)) {
		t.Errorf("rename: %v, want a NotUTF8Error", err)
	}
	if _, err := lc.CreateIdentity(t.Context(), "bob\xff"); !errors.As(err, new(*client.NotUTF8Error)) {
		t.Errorf("identity create: %v, want a NotUTF8Error", err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the lane", n)
	}
}

// A valid U+FFFD is a character like any other: it is sent.
func TestAnInstructionWithAReplacementCharacterIsSent(t *testing.T) {
	f := newFakeLane(t)
	_, err := newClient(t, f, fakeKey).Instruct(t.Context(), "dev_1", api.InstructionRequest{
		Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "echo \uFFFD"}, TimeoutMs: 1000,
	}, client.Sink{})
	var bad *client.NotUTF8Error
	if errors.As(err, &bad) {
		t.Errorf("a valid U+FFFD was refused: %v", err)
	}
}
