package approve_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sema-agent/sema/executor/approve"
	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/internal/safetext"
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
		{ops.Request{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "make test"}, Cwd: "/srv/app"}, "Run: make test · in /srv/app"},
		{ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "ls"}, Cwd: "/opt/new dir"}, "Run: ls · in /opt/new dir"},
		{ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "ls"}, Cwd: ws}, "Run: ls"},
		{ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "git push"},
			ShellEnv: map[string]string{"GIT_DIR": "/x", "A": "two words"}}, `Run: git push · env A="two words" GIT_DIR=/x`},
		{ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "ls"}, ShellEnv: map[string]string{"E": ""}}, `Run: ls · env E=""`},
		{ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "make"}, Cwd: "/srv",
			ShellEnv: map[string]string{"LD_PRELOAD": "/tmp/x.so", "A=B": "c"}}, `Run: make · in /srv · env "A=B"=c LD_PRELOAD=/tmp/x.so`},
		// This package's marks cannot be forged by instruction text.
		{execReq("ls · in /home/me/ws"), `Run: "ls \u00b7 in /home/me/ws"`},
		{execReq("ls…"), `Run: "ls\u2026"`},
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

// The command comes first: an environment or a cwd longer than the
// display can no longer push it out of sight (this request was
// shown as `Run: A="routine read-only status check, safe to approve … …`).
func TestSummaryShowsTheCommandFirst(t *testing.T) {
	decoy := strings.Repeat("routine read-only status check, safe to approve ", 6)
	for name, c := range map[string]struct {
		req    ops.Request
		prefix string
	}{
		"env":      {ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "rm -rf ~"}, ShellEnv: map[string]string{"A": decoy}}, `Run: rm -rf ~ · env A="routine read-only`},
		"cwd":      {ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "rm -rf ~"}, Cwd: "/" + strings.Repeat("safe-dir/", 40)}, "Run: rm -rf ~ · in /safe-dir/"},
		"both":     {ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "rm -rf ~"}, Cwd: "/" + strings.Repeat("d/", 200), ShellEnv: map[string]string{"A": decoy}}, "Run: rm -rf ~ · in /d/d/"},
		"many env": {ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "rm -rf ~"}, ShellEnv: manyEnv(60)}, "Run: rm -rf ~ · env "},
	} {
		for _, limit := range []int{32, 64, 240} {
			got := approve.Summary(c.req, "/ws", limit)
			if len(got) > limit || !strings.HasPrefix(got, "Run: rm") || limit >= 64 && !strings.HasPrefix(got, "Run: rm -rf ~") {
				t.Errorf("%s at %d: %q", name, limit, got)
			}
			if limit == 240 && !strings.HasPrefix(got, c.prefix) || !strings.Contains(got, approve.Ellipsis) {
				t.Errorf("%s at %d: %q, want it to start %q and show the cut", name, limit, got, c.prefix)
			}
			if c.req.Cwd != "" && !strings.Contains(got, " · in ") || c.req.ShellEnv != nil && !strings.Contains(got, " · env ") {
				t.Errorf("%s at %d: the cwd or the environment is not mentioned: %q", name, limit, got)
			}
		}
	}
}

func manyEnv(n int) map[string]string {
	env := map[string]string{}
	for i := range n {
		env[fmt.Sprintf("VAR_%02d", i)] = "value"
	}
	return env
}

// The command is whole when it fits beside the marks of a cut cwd and
// environment; one byte more and it is cut too, visibly.
func TestSummaryCommandWholeWhenItFits(t *testing.T) {
	long := strings.Repeat("x", 500)
	req := func(cmd string) ops.Request {
		return ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: cmd}, Cwd: "/" + long, ShellEnv: map[string]string{"K": long}}
	}
	fits := strings.Repeat("c", 240-len("Run: ")-len(" · in …")-len(" · env …"))
	got := approve.Summary(req(fits), "/ws", 240)
	if got != "Run: "+fits+" · in … · env …" {
		t.Fatalf("whole command: %q", got)
	}
	got = approve.Summary(req(fits+"d"), "/ws", 240)
	if len(got) > 240 || strings.Contains(got, fits) || !strings.Contains(got, " bytes cut]") || !strings.Contains(got, " · env K=") {
		t.Fatalf("a command one byte longer: %q", got)
	}
	// With room to spare, the cwd and the environment show their start and end.
	got = approve.Summary(req("make"), "/ws", 240)
	if !regexp.MustCompile(`^Run: make · in /x+…\[\d+ bytes cut\]…x+ · env K=x+…\[\d+ bytes cut\]…x+$`).MatchString(got) || len(got) > 240 {
		t.Fatalf("%q", got)
	}
}

// A command longer than the display keeps its start and its end: padding
// cannot push an appended command out of sight, and the mark says how much
// is not shown.
func TestSummaryLongCommandKeepsItsEnd(t *testing.T) {
	cmd := "echo " + strings.Repeat("a", 500) + "; rm -rf ~"
	for _, limit := range []int{64, 100, 240} {
		got := approve.Summary(execReq(cmd), "/ws", limit)
		m := regexp.MustCompile(`^Run: (.*)…\[(\d+) bytes cut\]…(.*)$`).FindStringSubmatch(got)
		if m == nil || len(got) > limit || len(got) < limit-3 || !strings.HasPrefix(m[1], "echo aa") || !strings.HasSuffix(m[3], "; rm -rf ~") {
			t.Fatalf("limit %d: %q", limit, got)
		}
		if n, _ := strconv.Atoi(m[2]); len(m[1])+n+len(m[3]) != len(cmd) {
			t.Errorf("limit %d: %s + %d + %s is not the command's %d bytes", limit, m[1], n, m[3], len(cmd))
		}
	}
	// Exactly at the limit: whole, no mark.
	exact := strings.Repeat("x", 240-len("Run: "))
	if got := approve.Summary(execReq(exact), "/ws", 240); got != "Run: "+exact {
		t.Fatalf("at the limit: %q", got)
	}
	if got := approve.Summary(execReq(exact+"y"), "/ws", 240); len(got) > 240 || !strings.HasSuffix(got, "xy") || !strings.Contains(got, "…[") {
		t.Fatalf("one past the limit: %q", got)
	}
	// Long paths of file kinds are cut the same way.
	p := "/" + strings.Repeat("dir/", 100) + "id_rsa"
	if got := approve.Summary(writeReq(protocol.KindReadTextFile, p), "/ws", 64); !strings.HasPrefix(got, "Read /dir/") || !strings.HasSuffix(got, "/id_rsa") {
		t.Fatalf("path: %q", got)
	}
}

// Escapes are whole units: at no limit does a cut fall inside \u202e, and
// the result is valid UTF-8 within the limit.
func TestSummaryNeverCutsAnEscape(t *testing.T) {
	esc := strings.Repeat("\u202e", 100)
	markRE := regexp.MustCompile(`…\[\d+ bytes cut\]…|…$`)
	for limit := 16; limit <= 240; limit++ {
		got := approve.Summary(execReq(esc), "/ws", limit)
		if len(got) > limit || !utf8.ValidString(got) || !strings.HasPrefix(got, "Run: ") {
			t.Fatalf("limit %d: %q", limit, got)
		}
		for _, piece := range markRE.Split(strings.TrimPrefix(got, "Run: "), -1) {
			body := strings.Trim(piece, `"`)
			if strings.ReplaceAll(body, `\u202e`, "") != "" {
				t.Fatalf("limit %d: an escape was cut: %q", limit, got)
			}
		}
	}
}

// Bidi controls and invisible format characters never reach the display,
// wherever they are in the instruction: each is shown as its escape.
func TestSummaryEscapesBidiAndInvisibleCharacters(t *testing.T) {
	for _, r := range []rune{
		0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c,
		0x200b, 0x200c, 0x200d, 0x2060, 0xfeff, 0x00ad, 0x3164, 0x115f, 0x034f, 0xfe0f, 0xe0001, 0x2028, 0x00a0, 0x1b, 0x9b, 0x7f,
	} {
		x := "a" + string(r) + "b"
		esc := fmt.Sprintf(`"a%sb"`, strings.Trim(strconv.QuoteToASCII(string(r)), `"`))
		if r == 0x7f || r == 0x1b {
			esc = fmt.Sprintf(`"a\x%02xb"`, r)
		}
		for name, req := range map[string]ops.Request{
			"command":   execReq(x),
			"cwd":       {Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "ls"}, Cwd: x},
			"env name":  {Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "ls"}, ShellEnv: map[string]string{x: "v"}},
			"env value": {Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "ls"}, ShellEnv: map[string]string{"K": x}},
			"path":      writeReq(protocol.KindRemove, x),
		} {
			got := approve.Summary(req, "/ws", 240)
			if strings.ContainsRune(got, r) || !strings.Contains(got, esc) {
				t.Errorf("U+%04X in the %s: %q, want it to show %s", r, name, got, esc)
			}
		}
	}
}

// An environment is shortened in its values before its names: a padded
// value cannot hide LD_PRELOAD.
func TestSummaryShowsEnvironmentNamesBeforeValues(t *testing.T) {
	pad := strings.Repeat("harmless ", 60)
	req := ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "make"},
		ShellEnv: map[string]string{"A": pad, "LD_PRELOAD": "/tmp/evil.so:" + pad, "Z": pad}}
	got := approve.Summary(req, "/ws", 240)
	for _, want := range []string{"Run: make · env ", `A="harmless`, ` LD_PRELOAD="/tmp/evil.so:`, ` Z="harmless`} {
		if !strings.Contains(got, want) || len(got) > 240 {
			t.Errorf("%q does not show %q", got, want)
		}
	}
	// Too many names for the room: they are cut, visibly, never silently.
	got = approve.Summary(ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: "make"}, ShellEnv: manyEnv(60)}, "/ws", 240)
	if !strings.HasPrefix(got, "Run: make · env VAR_00=… VAR_01=…") || !strings.Contains(got, " bytes cut]") || !strings.HasSuffix(got, "VAR_59=…") {
		t.Errorf("%q", got)
	}
}

// Whatever the instruction holds, a summary is valid UTF-8 within its
// limit, shows no unsafe character, starts with what will run, and names
// the cwd and the environment when there are any; the separator appears
// only as this package writes it.
func FuzzSummary(f *testing.F) {
	f.Add("git push", "/ws", "K", "v", 240)
	f.Add("a\x00\n\xff\u202e", "/tmp/\x01", "", "\t", 40)
	f.Add("rm -rf ~", "/x · env A=1", "A", "routine read-only status check, safe to approve …", 240)
	f.Fuzz(func(t *testing.T, cmd, cwd, k, v string, limit int) {
		limit = 3 + int(uint(limit)%300)
		exec := ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: cmd}, Cwd: cwd, ShellEnv: map[string]string{k: v}}
		for _, req := range []ops.Request{exec, {Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: cmd}}} {
			got := approve.Summary(req, "/ws", limit)
			if len(got) > limit || !utf8.ValidString(got) || got == "" || !safetext.Clean(got) {
				t.Fatalf("limit %d: %q", limit, got)
			}
		}
		got := approve.Summary(exec, "/ws", limit)
		if limit < approve.MinSummaryBytes {
			return
		}
		seps := 1
		if cwd != "" && cwd != "/ws" {
			seps++
			if !strings.Contains(got, approve.Separator+"in ") {
				t.Fatalf("the cwd is not named: %q", got)
			}
		}
		if !strings.HasPrefix(got, "Run: ") || !strings.Contains(got, approve.Separator+"env ") || strings.Count(got, "·") != seps {
			t.Fatalf("limit %d: %q", limit, got)
		}
	})
}
