package nexting

import (
	"errors"
	"fmt"
	"testing"
)

func TestReply(t *testing.T) {
	neg := mustNegotiate(t, 4096, ProfileApproval)
	cases := []struct {
		name    string
		frame   string
		decode  func([]byte) (Message, error)
		want    bool
		code    Code
		replyID string
	}{
		{"unknown type", `{"v":1,"t":"launch_missiles","id":"r9","target":"somewhere far away"}`, Decode, true, CodeBadMessage, ""},
		{"unknown type, short probe", `{"v":1,"t":"x"}`, Decode, false, "", ""},
		{"unsupported version", `{"v":2,"t":"answer","id":"request-0001","ch":"allow","extra":"bytes"}`, Decode, true, CodeUnsupportedVersion, ""},
		{"unsupported profile names the request", `{"v":1,"t":"nav_present","id":"q7","items":["Fix it","Explain"],"cursor":0,"ttl":30000}`, neg.Decode, true, CodeUnsupportedProfile, "q7"},
		{"bad field names the request", `{"v":1,"t":"present","id":"r1","sum":"Allow git push?","opt":["allow","deny"],"ttl":0}`, Decode, true, CodeBadMessage, "r1"},
		{"id dropped when only the bare reply fits", `{"v":1,"t":"answer","id":"request-1","ch":"maybe"}`, Decode, true, CodeBadMessage, ""},
		{"invalid id is never echoed", `{"v":1,"t":"answer","id":"bad id with spaces and more","ch":"allow"}`, Decode, true, CodeBadMessage, ""},
		{"error is never answered", `{"v":1,"t":"error","id":"r1","code":"not_a_code","padding":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`, Decode, false, "", ""},
		{"error with a wrong version is never answered", `{"v":3,"t":"error","code":"busy","padding":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`, Decode, false, "", ""},
		{"garbage shorter than a reply", `not json`, Decode, false, "", ""},
		{"empty line", ``, Decode, false, "", ""},
		{"oversize", `{"v":1,"t":"answer","id":"r","ch":"allow","pad":"` + rep("x", 5000) + `"}`, Decode, true, CodeMessageTooLarge, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.decode([]byte(c.frame))
			if err == nil {
				t.Fatal("accepted")
			}
			m, send := Reply(err)
			if send != c.want {
				t.Fatalf("send=%v, want %v (%v)", send, c.want, err)
			}
			if !send {
				return
			}
			if m.Code != c.code || m.ID != c.replyID {
				t.Fatalf("reply %#v, want code %s id %q", m, c.code, c.replyID)
			}
			b, err := Encode(m)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != replySize(m) || len(b) > len(c.frame)+1 {
				t.Fatalf("reply %d bytes (computed %d) for %d bytes of input", len(b), replySize(m), len(c.frame)+1)
			}
		})
	}
	// Framing errors: sized by what was received.
	f, _ := NewFramer(512)
	rs := f.Feed([]byte(rep("x", 600) + "\n\xff\n"))
	if m, send := Reply(rs[0].Err); !send || m.Code != CodeMessageTooLarge {
		t.Errorf("oversize framing error: %v %#v", send, m)
	}
	if _, send := Reply(rs[1].Err); send {
		t.Error("one invalid byte answered")
	}
	// Encoder errors and foreign errors are never answered.
	if _, err := Encode(Answer{ID: "r"}); err == nil {
		t.Fatal("encoded")
	} else if _, send := Reply(err); send {
		t.Error("encoder error answered")
	}
	if _, send := Reply(errors.New("x")); send {
		t.Error("foreign error answered")
	}
	if _, send := Reply(fmt.Errorf("wrapped: %w", &Error{Code: CodeBadMessage, Size: 100})); !send {
		t.Error("wrapped *Error not answered")
	}
}

func TestErrorFormat(t *testing.T) {
	_, err := Decode([]byte(`{"v":1,"t":"status","agents":[{"slot":9,"state":"idle"}]}`))
	var e *Error
	if !errors.As(err, &e) || e.Field != "agents[0].slot" || e.Type != TypeStatus || e.Size != 58 {
		t.Fatalf("%#v", e)
	}
	if got := err.Error(); got != "nexting: bad_message: agents[0].slot: must be 0-7" {
		t.Errorf("message %q", got)
	}
	_, err = Decode([]byte(`{"v":1,"t":"keymap","rev":1,"keys":[{"slot":0,"label":"k","enabled":true,"light":"off","rgb":[1,2,300]}]}`))
	if !errors.As(err, &e) || e.Field != "keys[0].rgb[2]" {
		t.Errorf("nested path: %v", err)
	}
	if !CodeBadMessage.Valid() || Code("x").Valid() || len(Codes()) != 7 || CodeOf(nil) != "" {
		t.Error("code set")
	}
}
