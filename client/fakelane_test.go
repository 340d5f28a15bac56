package client_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/b64"
	"github.com/sema-agent/sema/protocol"
)

// fakeLane answers as docs/api.md says the lane does, for the endpoints
// the client calls: the devices list, instructions with their NDJSON
// stream, cancel, and the streamed write upload of the contract (query
// keys checked, Content-Length required, the body read in 256 KiB parts
// and its digest verified before the write's outcome).
type fakeLane struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	cancels  chan string // ids of posted cancels
	uploaded []byte      // the last upload's body as received
	query    map[string]string
	header   http.Header
	partial  chan int64 // bytes of an upload body received so far, after each part
}

const fakeKey = "sema_test"

func newFakeLane(t *testing.T) *fakeLane {
	f := &fakeLane{t: t, cancels: make(chan string, 4), partial: make(chan int64, 1024)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/devices", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.DeviceList{Devices: []api.Device{{DeviceID: "dev_1", PlatformOS: "linux", WorkspaceRoot: "/ws", Online: true}}})
	})
	mux.HandleFunc("POST /v1/devices/{id}/instructions", f.instruction)
	mux.HandleFunc("POST /v1/instructions/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		f.cancels <- r.PathValue("id")
		writeJSON(w, 202, api.CancelResponse{InstructionID: r.PathValue("id")})
	})
	mux.HandleFunc("POST /v1/devices/{id}/writes", f.upload)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+fakeKey {
			writeJSON(w, 403, api.Error{Code: api.CodeForbidden, Message: "no verified identity"})
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func line(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Write(append(b, '\n'))
	w.(http.Flusher).Flush()
}

func outcomeLine(w http.ResponseWriter, state string, outcome string) {
	line(w, map[string]any{"event": "outcome", "state": state, "outcome": json.RawMessage(outcome)})
}

// instruction runs args.command: "echo X" answers X on stdout then exit 0;
// "hang" holds until its cancel and answers the cancel receipt; "break"
// ends the stream after accepted.
func (f *fakeLane) instruction(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Kind      string
		Args      struct{ Command string }
		TimeoutMs int64
	}
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&in); err != nil || in.TimeoutMs <= 0 {
		writeJSON(w, 400, api.Error{Code: api.CodeBodyShape, Message: fmt.Sprint("bad body ", err)})
		return
	}
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	line(w, map[string]string{"event": "accepted", "instructionId": "ins_1"})
	switch cmd := in.Args.Command; {
	case cmd == "hang":
		<-f.cancels
		outcomeLine(w, "terminal", `{"ok":true,"kind":"cancelled","state":"killed"}`)
	case cmd == "break":
		return
	default:
		for i, part := range []string{"one ", "two"} {
			d := b64.EncodeToString([]byte(part))
			line(w, map[string]any{"event": "chunk", "kind": "stdout", "streamSeq": i, "dataB64": d})
		}
		line(w, map[string]any{"event": "chunk", "kind": "exit", "streamSeq": 2, "exitCode": 0})
		outcomeLine(w, "terminal", `{"ok":true,"kind":"exec","exitCode":0}`)
	}
}

func (f *fakeLane) upload(w http.ResponseWriter, r *http.Request) {
	q := map[string]string{}
	for k, v := range r.URL.Query() {
		switch k {
		case api.UploadKind, api.UploadPath, api.UploadTimeoutMs, api.UploadSHA256, api.UploadExpect, api.UploadRootSessionID:
			q[k] = v[0]
		default:
			writeJSON(w, 400, api.Error{Code: api.CodeBodyShape, Message: "unknown query key " + strconv.Quote(k)})
			return
		}
	}
	sum, err := protocol.ParseDigest(q[api.UploadSHA256])
	if err != nil || q[api.UploadPath] == "" || q[api.UploadTimeoutMs] == "" {
		writeJSON(w, 400, api.Error{Code: api.CodeFieldInvalid, Message: "bad query"})
		return
	}
	if r.ContentLength < 0 {
		writeJSON(w, 411, api.Error{Code: api.CodeLengthRequired, Message: "Content-Length required"})
		return
	}
	f.mu.Lock()
	f.query, f.header = q, r.Header.Clone()
	f.mu.Unlock()
	h := sha256.New()
	var got []byte
	part := make([]byte, protocol.DefaultPayloadPartBytes)
	for {
		n, err := io.ReadFull(r.Body, part)
		h.Write(part[:n])
		got = append(got, part[:n]...)
		select {
		case f.partial <- int64(len(got)):
		default:
		}
		if err != nil {
			break
		}
	}
	f.mu.Lock()
	f.uploaded = got
	f.mu.Unlock()
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	line(w, map[string]string{"event": "accepted", "instructionId": "ins_w"})
	if int64(len(got)) != r.ContentLength || [32]byte(h.Sum(nil)) != sum {
		outcomeLine(w, "terminal", `{"ok":false,"errorCode":"invalid","message":"length or digest mismatch"}`)
		return
	}
	outcomeLine(w, "terminal", `{"ok":true,"kind":"write","canonicalPath":`+strconv.Quote(q[api.UploadPath])+`,"created":true}`)
}
