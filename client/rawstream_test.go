package client_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/protocol"
)

// laneAnswering is an HTTP server that answers every instruction with
// stream (as contentType) and keeps the Accept it was sent.
func laneAnswering(t *testing.T, contentType string, stream []byte, accept *string) *client.Client {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*accept = r.Header.Get("Accept")
		w.Header().Set("Content-Type", contentType)
		w.Write(stream)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "sema_k")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// The client asks for the raw stream, and follows whichever stream the
// lane sends by its Content-Type: the same output and outcome from both.
func TestInstructAsksForTheRawStreamAndReadsEither(t *testing.T) {
	chunks := []protocol.Chunk{
		{Kind: protocol.ChunkStdout, StreamSeq: 0, Data: []byte("out\x00")},
		{Kind: protocol.ChunkStderr, StreamSeq: 1, Data: []byte("err\n")},
		{Kind: protocol.ChunkExit, StreamSeq: 2, ExitCode: 4},
	}
	ndjson, raw := api.AppendAcceptedLine(nil, "ins_1"), api.AppendRawAccepted(nil, "ins_1")
	for i := range chunks {
		ndjson, raw = api.AppendChunkLine(ndjson, &chunks[i]), api.AppendRawChunk(raw, &chunks[i])
	}
	o := protocol.ExecOutcome{ExitCode: 4}
	ndjson = api.AppendOutcomeLine(ndjson, protocol.StateTerminal, o, false)
	raw = api.AppendRawOutcome(raw, protocol.StateTerminal, o, false)
	for _, c := range []struct {
		contentType string
		stream      []byte
	}{{api.ContentTypeRawStream, raw}, {api.ContentTypeNDJSON, ndjson}} {
		var accept string
		var out, lines bytes.Buffer
		res, err := laneAnswering(t, c.contentType, c.stream, &accept).Instruct(t.Context(), "dev_1", api.InstructionRequest{Kind: protocol.KindExec},
			client.Sink{Chunk: func(kind protocol.ChunkKind, data []byte) error {
				out.WriteString(string(kind) + ":" + string(data) + ";")
				return nil
			}, Line: func(line []byte) { lines.Write(line) }})
		if err != nil || res.ID != "ins_1" || res.Outcome.ExitCode == nil || *res.Outcome.ExitCode != 4 {
			t.Fatalf("%s: %+v, %v", c.contentType, res, err)
		}
		if !api.AcceptsRawStream([]string{accept}) {
			t.Fatalf("the client's Accept %q does not ask for the raw stream", accept)
		}
		if got, want := out.String(), "stdout:out\x00;stderr:err\n;"; got != want {
			t.Fatalf("%s: output %q, want %q", c.contentType, got, want)
		}
		if !bytes.Equal(lines.Bytes(), ndjson) {
			t.Fatalf("%s: lines %q, want the NDJSON stream", c.contentType, lines.Bytes())
		}
	}
}
