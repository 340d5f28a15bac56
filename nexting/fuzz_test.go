package nexting

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// addMessageSeeds seeds with every published vector frame (valid and
// invalid, LF stripped) and a few strictness cases.
func addMessageSeeds(f *testing.F) {
	for name, vf := range loadVectors(f) {
		if name == "device-info-v1.json" {
			continue
		}
		for _, v := range vf.Valid {
			f.Add([]byte(strings.TrimSuffix(v.Wire, "\n")))
		}
		for _, raw := range vf.Invalid {
			var w string
			if raw.Kind() == '"' {
				w = string(raw[1 : len(raw)-1])
			} else {
				w = string(raw)
			}
			f.Add([]byte(strings.TrimSuffix(w, "\n")))
		}
	}
	for _, s := range []string{
		fPresent, fAnswer, fStatus,
		`{"v":1,"t":"answer","id":"r","ch":"allow","\u0063h":"deny"}`,
		`{"v":1,"t":"answer","id":"r","ch":"allow","x":[[[[[[[[1]]]]]]]]}`,
		`{"v":1,"t":"config","rev":1,"entries":[{"key":"a","value":-0}]}`,
		`{"v":1,"t":"usage","model":"m","input_tokens":9007199254740991,"output_tokens":0,"context_used":1,"context_limit":1}`,
		`{"v":1,"t":"text","channel":0,"title":"\ud83d\ude00","content":"a\n\tb"}`,
		// Known wire fields are typed in every message (the reference's rule).
		`{"seq":-1,"v":1,"t":"present","id":"r","sum":"s","opt":["allow","deny"],"ttl":1}`,
		`{"rev":1e2,"v":1,"t":"answer","id":"r","ch":"allow"}`,
		`{"v":1,"t":"status","agents":[],"id":"r"}`,
		`{"v":1,"t":"error","code":"busy","context_limit":99999999999999999999,"title":5}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzDecode: Decode never panics; a refusal is an *Error with a valid
// code; an accepted frame re-encodes canonically and decodes to the same
// value, and its canonical form is a fixed point.
func FuzzDecode(f *testing.F) {
	addMessageSeeds(f)
	neg := mustNegotiate(f, 1024, ProfileApproval, ProfileStatus, ProfileText)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		_, _ = neg.Decode(data) // must not panic either
		if err != nil {
			e, ok := err.(*Error)
			if !ok || !e.Code.Valid() || e.Size != len(data)+1 || m != nil {
				t.Fatalf("bad refusal %#v for %q", err, data)
			}
			if _, send := Reply(err); send && e.Type == TypeError {
				t.Fatalf("would answer an error: %q", data)
			}
			return
		}
		if name, typed := unsignedMembersTyped(data); !typed {
			t.Fatalf("accepted %q with a mistyped %q", data, name)
		}
		enc, err := Encode(m)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode %#v: %v", data, m, err)
		}
		m2, err := DecodeFrame(enc)
		if err != nil {
			t.Fatalf("re-encoded %q refused: %v", enc, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip differs\n in %q\nout %q\n%#v\n%#v", data, enc, m, m2)
		}
		if enc2, _ := Encode(m2); !bytes.Equal(enc, enc2) {
			t.Fatalf("canonical form not a fixed point: %q vs %q", enc, enc2)
		}
		if len(enc) > len(data)+1 && !bytes.ContainsAny(enc, `\`) && !bytes.Contains(data, []byte(`\u`)) {
			// Canonical output only drops bytes (escapes, unknown fields),
			// except where an escape is spelled longer than the input.
			t.Fatalf("canonical form longer than input: %q -> %q", data, enc)
		}
	})
}

// FuzzDeviceInfo: ParseDeviceInfo never panics, and what it accepts
// negotiates.
func FuzzDeviceInfo(f *testing.F) {
	vf := loadVectors(f)["device-info-v1.json"]
	for _, v := range vf.Valid {
		f.Add([]byte(v.Wire))
	}
	for _, v := range vf.InvalidCore {
		f.Add([]byte(v.Wire))
	}
	f.Add([]byte(devInfo("vendor", `{"namespace":"com.example","facts":[{"key":"k","label":"L","value":7}]}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := ParseDeviceInfo(data)
		if err != nil {
			if CodeOf(err) == "" || info != nil {
				t.Fatalf("bad refusal %v", err)
			}
			return
		}
		n, err := Negotiate(DefaultHostConfig(), info)
		if err != nil {
			t.Fatalf("accepted Device Info does not negotiate: %v", err)
		}
		if n.MaxMessageBytes() < MinFrameBytes || n.MaxMessageBytes() > MaxFrameBytes || !n.Has(ProfileApproval) {
			t.Fatalf("negotiated %#v", n)
		}
	})
}

// FuzzFramer: the framer never panics, never yields a frame over the limit,
// with an LF or with invalid UTF-8, and yields the same results however the
// stream is chunked — the same as a simple line-by-line model.
func FuzzFramer(f *testing.F) {
	f.Add([]byte(fPresent+"\n"+fAnswer+"\n"), []byte{3, 7, 1})
	f.Add([]byte("\xe2\x82\n\xff\n"+rep("x", 600)+"\n"+fStatus+"\n"), []byte{1})
	f.Add([]byte("\n\n\xc3\xa9\n"), []byte{2, 2})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		const max = 512
		var offs []int
		for i, at := 0, 0; at < len(data) && i < len(cuts); i++ {
			at += int(cuts[i])
			if at < len(data) {
				offs = append(offs, at)
			}
		}
		whole := feedChunks(t, max, data)
		chunked := feedChunks(t, max, data, offs...)
		if fmt.Sprint(whole) != fmt.Sprint(chunked) {
			t.Fatalf("chunking changed results\nwhole %v\n cuts %v: %v", whole, offs, chunked)
		}
		if want := lineModel(data, max); fmt.Sprint(whole) != fmt.Sprint(want) {
			t.Fatalf("framer differs from the line model\n got %v\nwant %v", whole, want)
		}
		for _, o := range whole {
			if o.code == "" && (len(o.frame) >= max || strings.Contains(o.frame, "\n") || !utf8.ValidString(o.frame)) {
				t.Fatalf("bad frame %q", o.frame)
			}
			if o.code == "" {
				_, _ = Decode([]byte(o.frame))
			}
		}
	})
}

// lineModel is the framing rule stated line by line, without chunks: each
// LF-terminated line is a frame unless it holds invalid UTF-8 within its
// first max-1 bytes (bad_message, sized to the invalid sequence) or is
// longer than max-1 bytes (message_too_large); the unterminated tail yields
// only an error already certain.
func lineModel(data []byte, max int) []outcome {
	var out []outcome
	for len(data) > 0 {
		lf := bytes.IndexByte(data, '\n')
		line, terminated := data, lf >= 0
		if terminated {
			line, data = data[:lf], data[lf+1:]
		} else {
			data = nil
		}
		over := len(line) > max-1
		prefix := line
		if over {
			prefix = line[:max-1]
		}
		if bad := firstInvalid(prefix, terminated && !over); bad >= 0 {
			out = append(out, outcome{code: CodeBadMessage, size: bad + 1})
		} else if over {
			out = append(out, outcome{code: CodeMessageTooLarge, size: max})
		} else if terminated {
			out = append(out, outcome{frame: string(line)})
		}
	}
	return out
}

// firstInvalid returns the offset of the first invalid UTF-8 sequence; an
// incomplete sequence at the end counts only when final.
func firstInvalid(b []byte, final bool) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			if !final && !utf8.FullRune(b[i:]) {
				return -1
			}
			return i
		}
		i += size
	}
	return -1
}
