package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/protocol"
)

// These are what a user's own script does with the HTTP API: net/http,
// one line of the NDJSON at a time through encoding/json, the data through
// encoding/base64 (docs/api.md "Instructions"). Not the CLI's or the api
// package's reader: the row measures the door, not our client.

// eventLine is one line of the instruction's stream.
type eventLine struct {
	Event    string          `json:"event"`
	Kind     string          `json:"kind"`
	DataB64  string          `json:"dataB64"`
	ExitCode *int            `json:"exitCode"`
	State    string          `json:"state"`
	Outcome  json.RawMessage `json:"outcome"`
}

type outcome struct {
	OK       bool   `json:"ok"`
	Kind     string `json:"kind"`
	ExitCode *int   `json:"exitCode"`
}

// streamStats are what a stream's chunks looked like.
type streamStats struct {
	bytes, chunks, biggest int64
}

// instruct POSTs one instruction and reads its stream to the outcome; it
// returns the bytes of stdout and an error unless the command ran and
// exited 0.
func instruct(ctx context.Context, hc *http.Client, u *UserPath, body string) (int64, error) {
	st, err := instructStats(ctx, hc, u, body)
	return st.bytes, err
}

func instructStats(ctx context.Context, hc *http.Client, u *UserPath, body string) (streamStats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.URL+"/v1/devices/"+u.DeviceID+"/instructions", bytes.NewBufferString(body))
	if err != nil {
		return streamStats{}, err
	}
	req.Header.Set("Authorization", "Bearer "+u.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return streamStats{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return streamStats{}, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var st streamStats
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return st, fmt.Errorf("the stream ended before its outcome after %d bytes: %v", st.bytes, err)
		}
		var ev eventLine
		if err := json.Unmarshal(line, &ev); err != nil {
			return st, fmt.Errorf("a bad line: %v", err)
		}
		switch ev.Event {
		case "chunk":
			if ev.Kind == "stdout" {
				data, err := base64.StdEncoding.DecodeString(ev.DataB64)
				if err != nil {
					return st, fmt.Errorf("bad base64: %v", err)
				}
				st.bytes += int64(len(data))
				st.chunks++
				st.biggest = max(st.biggest, int64(len(data)))
			}
		case "outcome":
			io.Copy(io.Discard, br) // nothing follows the outcome; reuse the connection
			var o outcome
			if err := json.Unmarshal(ev.Outcome, &o); err != nil || !o.OK || o.ExitCode == nil || *o.ExitCode != 0 {
				return st, fmt.Errorf("outcome %s %s", ev.State, clip(string(ev.Outcome), 160))
			}
			return st, nil
		}
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// decodeCeiling is how fast this client's decoding alone goes (the same
// json.Unmarshal and base64 of each line, from memory, no lane): lines of
// chunk bytes until total are decoded; it returns the time it took.
func decodeCeiling(total, chunk int64) time.Duration {
	if chunk <= 0 {
		return 0
	}
	line := fmt.Appendf(nil, `{"event":"chunk","kind":"stdout","streamSeq":1,"dataB64":"%s"}`+"\n", base64.StdEncoding.EncodeToString(make([]byte, chunk)))
	t0 := time.Now()
	for n := int64(0); n < total; {
		var ev eventLine
		if json.Unmarshal(line, &ev) != nil {
			return 0
		}
		data, err := base64.StdEncoding.DecodeString(ev.DataB64)
		if err != nil {
			return 0
		}
		n += int64(len(data))
	}
	return time.Since(t0)
}

// instructRaw is the same request read as curl or any line reader reads
// it, without a JSON decoder: the lines are taken as they come, the stdout
// bytes counted from each chunk's dataB64 (its length, less padding), and
// only the outcome line is decoded. It measures the door itself, apart
// from a client's own JSON decoding.
func instructRaw(ctx context.Context, hc *http.Client, u *UserPath, body string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.URL+"/v1/devices/"+u.DeviceID+"/instructions", bytes.NewBufferString(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+u.Key)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	prefix, field := []byte(`{"event":"chunk","kind":"stdout"`), []byte(`"dataB64":"`)
	var n int64
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return n, fmt.Errorf("the stream ended before its outcome after %d bytes: %v", n, err)
		}
		if bytes.HasPrefix(line, prefix) {
			i := bytes.Index(line, field)
			if i < 0 {
				return n, fmt.Errorf("a chunk line without dataB64")
			}
			b64 := line[i+len(field):]
			b64 = b64[:bytes.IndexByte(b64, '"')]
			n += int64(len(b64)/4*3 - bytes.Count(b64[max(len(b64)-2, 0):], []byte("=")))
			continue
		}
		var ev eventLine
		if json.Unmarshal(line, &ev) == nil && ev.Event == "outcome" {
			var o outcome
			if err := json.Unmarshal(ev.Outcome, &o); err != nil || !o.OK || o.ExitCode == nil || *o.ExitCode != 0 {
				return n, fmt.Errorf("outcome %s %s", ev.State, clip(string(ev.Outcome), 160))
			}
			return n, nil
		}
	}
}

// instructRawStream is the same request with Accept naming the raw stream
// (docs/api.md), read with api.RawEventReader: the stdout bytes counted,
// the outcome checked.
func instructRawStream(ctx context.Context, hc *http.Client, u *UserPath, body string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.URL+"/v1/devices/"+u.DeviceID+"/instructions", bytes.NewBufferString(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+u.Key)
	req.Header.Set("Accept", api.ContentTypeRawStream)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != api.ContentTypeRawStream {
		return 0, fmt.Errorf("the lane answered %q, not the raw stream", ct)
	}
	r := api.NewRawEventReader(resp.Body)
	var n int64
	for {
		ev, err := r.Next()
		if err != nil {
			return n, fmt.Errorf("the stream ended before its outcome after %d bytes: %v", n, err)
		}
		switch {
		case ev.Event == api.EventChunk && ev.Kind == protocol.ChunkStdout:
			n += int64(len(ev.Data))
		case ev.Event == api.EventOutcome:
			var o outcome
			if err := json.Unmarshal(ev.Outcome, &o); err != nil || !o.OK || o.ExitCode == nil || *o.ExitCode != 0 {
				return n, fmt.Errorf("outcome %s %s", ev.State, clip(string(ev.Outcome), 160))
			}
			return n, nil
		}
	}
}
