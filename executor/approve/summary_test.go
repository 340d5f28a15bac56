package approve_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sema-agent/sema/executor/approve"
	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/protocol"
)

func TestSummary(t *testing.T) {
	ws := "/home/me/ws"
	yes := true
	for _, c := range []struct {
		req  ops.Request
		want string
	}{
		{execReq("git push origin main"), "Run: git push origin main"},
		{ops.Request{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "make test"}, Cwd: "/srv/app"}, "Run in /srv/app: make test"},
		{ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "ls"}, Cwd: ws}, "Run: ls"},
		{ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "git push"},
			ShellEnv: map[string]string{"GIT_DIR": "/x", "A": "two words"}}, `Run: A="two words" GIT_DIR=/x git push`},
		{ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "ls"}, ShellEnv: map[string]string{"E": ""}}, `Run: E="" ls`},
		{execReq("echo a\nrm -rf ~"), `Run: "echo a\nrm -rf ~"`},
		{execReq("echo \u202egnp.exe"), `Run: "echo \u202egnp.exe"`},
		{execReq("echo\u00a0hi"), `Run: "echo\u00a0hi"`},
		{execReq("printf '\x1b[2J'"), `Run: "printf '\x1b[2J'"`},
		{execReq("bad \xff byte"), `Run: "bad \xff byte"`},
		{execReq(`"quoted" start`), `Run: "\"quoted\" start"`},
		{execReq(`echo "ok" 'fine' \ back`), `Run: echo "ok" 'fine' \ back`},
		{execReq("echo héllo 世界"), "Run: echo héllo 世界"},
		{execReq(""), `Run: ""`},
		{writeReq(protocol.KindWriteFile, "/etc/hosts"), "Write 3 bytes to /etc/hosts"},
		{ops.Request{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: "/x", ContentLen: 1}}, "Write 1 byte to /x"},
		{writeReq(protocol.KindWriteFileExclusive, "/x"), "Write 3 bytes to new file /x"},
		{writeReq(protocol.KindWriteFileGuarded, "/x"), "Write 3 bytes, guarded, to /x"},
		{writeReq(protocol.KindAppendFile, "/var/log/x"), "Append 3 bytes to /var/log/x"},
		{writeReq(protocol.KindRemove, "/old"), "Remove /old"},
		{ops.Request{Kind: protocol.KindRemove, Args: protocol.DirArgs{Path: "/old", Recursive: &yes}}, "Remove recursively /old"},
		{writeReq(protocol.KindCreateDir, "/opt/new dir"), "Create directory /opt/new dir"},
		{writeReq(protocol.KindReadTextFile, "/etc/shadow"), "Read /etc/shadow"},
		{ops.Request{Kind: protocol.KindCreateTempFile, Args: protocol.TempFileArgs{Prefix: "p", Suffix: ".go"}}, "Create a temporary file named p*.go"},
		{ops.Request{Kind: protocol.KindStatBatch, Args: protocol.StatBatchArgs{Paths: []string{"/a", "/b"}}}, "Inspect 2 paths"},
	} {
		if got := approve.Summary(c.req, ws, 240); got != c.want {
			t.Errorf("Summary(%+v) = %q, want %q", c.req, got, c.want)
		}
	}
}

// A long summary is cut at a character boundary, never inside an escape,
// ends with the ellipsis and fills the limit as far as whole units allow.
func TestSummaryTruncation(t *testing.T) {
	long := "git push origin " + strings.Repeat("é", 200)
	got := approve.Summary(execReq(long), "/ws", 240)
	if len(got) > 240 || len(got) < 237 || !utf8.ValidString(got) || !strings.HasSuffix(got, approve.Ellipsis) ||
		!strings.HasPrefix(got, "Run: git push origin éé") {
		t.Fatalf("%d bytes: %q", len(got), got)
	}
	// Exactly at the limit: no ellipsis.
	exact := strings.Repeat("x", 240-len("Run: "))
	if got := approve.Summary(execReq(exact), "/ws", 240); got != "Run: "+exact {
		t.Fatalf("at the limit: %q", got)
	}
	if got := approve.Summary(execReq(exact+"y"), "/ws", 240); got != "Run: "+exact[:len(exact)-3]+approve.Ellipsis {
		t.Fatalf("one past the limit: %q", got)
	}
	// Escapes are whole units: a summary never ends inside \u202e.
	esc := strings.Repeat("\u202e", 100)
	for limit := 16; limit <= 240; limit++ {
		got := approve.Summary(execReq(esc), "/ws", limit)
		if len(got) > limit || !utf8.ValidString(got) {
			t.Fatalf("limit %d: %q", limit, got)
		}
		body := strings.TrimSuffix(strings.TrimPrefix(got, `Run: "`), approve.Ellipsis)
		if strings.Trim(body, `\u202e`) != "" || len(body)%len(`\u202e`) != 0 {
			t.Fatalf("limit %d: an escape was cut: %q", limit, got)
		}
	}
}

// Whatever the instruction holds, a summary is valid UTF-8 within its
// limit, without a control character, and never empty for a limit that
// leaves room.
func FuzzSummary(f *testing.F) {
	f.Add("git push", "/ws", "K", "v", 240)
	f.Add("a\x00\n\xff\u202e", "/tmp/\x01", "", "\t", 40)
	f.Fuzz(func(t *testing.T, cmd, cwd, k, v string, limit int) {
		limit = 3 + int(uint(limit)%300)
		for _, req := range []ops.Request{
			{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: cmd}, Cwd: cwd, ShellEnv: map[string]string{k: v}},
			{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: cmd}},
		} {
			got := approve.Summary(req, "/ws", limit)
			if len(got) > limit || !utf8.ValidString(got) || got == "" {
				t.Fatalf("limit %d: %q", limit, got)
			}
			for _, r := range got {
				if r < 0x20 || r >= 0x7f && r <= 0x9f {
					t.Fatalf("control character in %q", got)
				}
			}
		}
	})
}
