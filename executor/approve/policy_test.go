package approve_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/executor/approve"
	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/protocol"
)

func TestParsePolicy(t *testing.T) {
	p, err := approve.ParsePolicy([]byte(`{
		"ttlSeconds": 30,
		"rules": [
			{"kinds": ["exec", "execStream"], "commands": ["git push*", "rm *"]},
			{"kinds": ["remove"], "paths": ["/etc/*"]},
			{"kinds": ["writeFile"], "outsideWorkspace": true}
		]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.TTL != 30*time.Second || len(p.Rules) != 3 || p.Rules[0].Commands[1] != "rm *" || !p.Rules[2].OutsideWorkspace {
		t.Fatalf("parsed %+v", p)
	}
	empty, err := approve.ParsePolicy([]byte(`{"rules":[]}`))
	if err != nil || len(empty.Rules) != 0 || empty.TTL != approve.DefaultTTL {
		t.Fatalf("empty rules: %+v %v", empty, err)
	}

	for _, bad := range []struct{ name, json, want string }{
		{"not json", `{`, "not a valid policy"},
		{"no rules", `{}`, `"rules" is required`},
		{"unknown member", `{"rules":[],"extra":1}`, "not a valid policy"},
		{"unknown rule member", `{"rules":[{"kinds":["exec"],"cmd":["x"]}]}`, "not a valid policy"},
		{"duplicate name", `{"rules":[],"rules":[]}`, "not a valid policy"},
		{"no kinds", `{"rules":[{}]}`, `"kinds" must name`},
		{"unknown kind", `{"rules":[{"kinds":["shell"]}]}`, `"shell" is not an instruction kind`},
		{"kind twice", `{"rules":[{"kinds":["exec","exec"]}]}`, "listed twice"},
		{"commands on a write", `{"rules":[{"kinds":["writeFile"],"commands":["x"]}]}`, `"commands" applies only`},
		{"paths on exec", `{"rules":[{"kinds":["exec"],"paths":["/x"]}]}`, `"paths" and "outsideWorkspace" apply only`},
		{"outside on exec", `{"rules":[{"kinds":["exec"],"outsideWorkspace":true}]}`, `"paths" and "outsideWorkspace" apply only`},
		{"empty list", `{"rules":[{"kinds":["exec"],"commands":[]}]}`, "empty pattern list"},
		{"empty pattern", `{"rules":[{"kinds":["exec"],"commands":[""]}]}`, "must not be empty"},
		{"control in pattern", `{"rules":[{"kinds":["exec"],"commands":["a\nb"]}]}`, "control character"},
		{"lone backslash", `{"rules":[{"kinds":["exec"],"commands":["a\\"]}]}`, "lone"},
		{"ttl zero", `{"rules":[],"ttlSeconds":0}`, "outside 1-300"},
		{"ttl too long", `{"rules":[],"ttlSeconds":301}`, "outside 1-300"},
		{"ttl fraction", `{"rules":[],"ttlSeconds":1.5}`, "not a valid policy"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			_, err := approve.ParsePolicy([]byte(bad.json))
			if err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Fatalf("err %v, want it to mention %q", err, bad.want)
			}
		})
	}
}

func TestLoadPolicy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(`{"rules":[{"kinds":["exec"]}]}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := approve.LoadPolicy(path); err != nil || len(p.Rules) != 1 {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := approve.LoadPolicy(path + ".missing"); err == nil {
		t.Fatal("a missing file loaded")
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pat, s string
		want   bool
	}{
		{"git push*", "git push", true},
		{"git push*", "git push origin main", true},
		{"git push*", "git pull", false},
		{"git push*", " git push", false},
		{"*rm -rf*", "cd / && rm -rf x", true},
		{"*", "", true},
		{"*", "anything / at all", true},
		{"a?c", "abc", true},
		{"a?c", "a€c", true},
		{"a?c", "ac", false},
		{"/etc/*", "/etc/a/b", true},
		{"/etc/*", "/etcx", false},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{`a\?`, "a?", true},
		{`\\`, `\`, true},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"**", "x", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"", "", true},
		{"", "x", false},
	} {
		if got := approve.Match(c.pat, c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pat, c.s, got, c.want)
		}
	}
	if approve.NormalizeCommand("  git \t push\n origin  ") != "git push origin" {
		t.Fatal("NormalizeCommand")
	}
}

func execReq(cmd string) ops.Request {
	return ops.Request{Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: cmd}, Timeout: time.Minute}
}

func writeReq(kind protocol.InstructionKind, path string) ops.Request {
	switch kind {
	case protocol.KindRemove, protocol.KindCreateDir:
		return ops.Request{Kind: kind, Args: protocol.DirArgs{Path: path}}
	case protocol.KindReadTextFile, protocol.KindReadBinaryFile, protocol.KindListDir, protocol.KindExists,
		protocol.KindCanonicalPath, protocol.KindFileInfo, protocol.KindReadLink:
		return ops.Request{Kind: kind, Args: protocol.PathArgs{Path: path}}
	case protocol.KindReadTextLines:
		return ops.Request{Kind: kind, Args: protocol.ReadLinesArgs{Path: path}}
	}
	return ops.Request{Kind: kind, Args: protocol.WriteArgs{Path: path, ContentLen: 3}}
}

func TestDefaultPolicy(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	p := approve.DefaultPolicy()
	for _, c := range []struct {
		name string
		req  ops.Request
		want bool
	}{
		{"exec", execReq("ls"), true},
		{"execStream", ops.Request{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "ls"}}, true},
		// The default gates reads of content outside the workspace as well as
		// writes; the governance reads stay ungated.
		{"read outside", writeReq(protocol.KindReadTextFile, "/etc/passwd"), true},
		{"read binary outside", writeReq(protocol.KindReadBinaryFile, outside+"/k"), true},
		{"read lines outside", writeReq(protocol.KindReadTextLines, "/etc/passwd"), true},
		{"list outside", writeReq(protocol.KindListDir, "/etc"), true},
		{"read through a link out", writeReq(protocol.KindReadTextFile, ws+"/escape/k"), true},
		{"read inside", writeReq(protocol.KindReadTextFile, ws+"/a.txt"), false},
		{"list inside", writeReq(protocol.KindListDir, ws+"/sub"), false},
		{"list the workspace root", writeReq(protocol.KindListDir, ws), false},
		{"read the workspace root", writeReq(protocol.KindReadTextFile, ws), false},
		{"list the workspace root's parent", writeReq(protocol.KindListDir, filepath.Dir(ws)), true},
		{"exists outside", writeReq(protocol.KindExists, "/etc/passwd"), false},
		{"canonicalPath outside", writeReq(protocol.KindCanonicalPath, "/etc/passwd"), false},
		{"fileInfo outside", writeReq(protocol.KindFileInfo, "/etc/passwd"), false},
		{"readLink outside", writeReq(protocol.KindReadLink, "/etc/passwd"), false},
		{"write inside", writeReq(protocol.KindWriteFile, ws+"/a.txt"), false},
		{"write inside, new dirs", writeReq(protocol.KindWriteFile, ws+"/new/dir/a.txt"), false},
		{"write inside sub", writeReq(protocol.KindWriteFile, ws+"/sub/a.txt"), false},
		{"write outside", writeReq(protocol.KindWriteFile, outside+"/a.txt"), true},
		{"write through a link out", writeReq(protocol.KindWriteFile, ws+"/escape/a.txt"), true},
		{"write sibling with the root as prefix", writeReq(protocol.KindWriteFile, ws+"x/a.txt"), true},
		{"exclusive outside", writeReq(protocol.KindWriteFileExclusive, "/tmp/x"), true},
		{"guarded outside", writeReq(protocol.KindWriteFileGuarded, "/tmp/x"), true},
		{"append outside", writeReq(protocol.KindAppendFile, "/tmp/x"), true},
		{"append inside", writeReq(protocol.KindAppendFile, ws+"/log"), false},
		{"remove the root", writeReq(protocol.KindRemove, ws), true},
		{"remove inside", writeReq(protocol.KindRemove, ws+"/sub"), false},
		{"remove the link itself", writeReq(protocol.KindRemove, ws+"/escape"), true},
		{"createDir outside", writeReq(protocol.KindCreateDir, "/opt/x"), true},
		{"createDir inside", writeReq(protocol.KindCreateDir, ws+"/d"), false},
		{"temp dir", ops.Request{Kind: protocol.KindCreateTempDir, Args: protocol.TempDirArgs{}}, false},
	} {
		if got := p.Needs(c.req, ws); got != c.want {
			t.Errorf("%s: Needs = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPolicyRules(t *testing.T) {
	p, err := approve.ParsePolicy([]byte(`{"rules":[
		{"kinds":["exec"],"commands":["git push*","*sudo *"]},
		{"kinds":["readTextFile"],"paths":["/home/*/.ssh/*"]},
		{"kinds":["writeFile"],"paths":["*.env"],"outsideWorkspace":true}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	for _, c := range []struct {
		name string
		req  ops.Request
		want bool
	}{
		{"git push", execReq("git push origin main"), true},
		{"git  push with extra spaces", execReq("  git   push"), true},
		{"git status", execReq("git status"), false},
		{"sudo inside", execReq("echo x && sudo rm y"), true},
		{"execStream not listed", ops.Request{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "git push"}}, false},
		{"ssh key read", writeReq(protocol.KindReadTextFile, "/home/me/.ssh/id_ed25519"), true},
		{"other read", writeReq(protocol.KindReadTextFile, "/home/me/notes"), false},
		{"env outside", writeReq(protocol.KindWriteFile, "/srv/app/.env"), true},
		{"env inside", writeReq(protocol.KindWriteFile, ws+"/.env"), false},
		{"other outside", writeReq(protocol.KindWriteFile, "/srv/app/x"), false},
	} {
		if got := p.Needs(c.req, ws); got != c.want {
			t.Errorf("%s: Needs = %v, want %v", c.name, got, c.want)
		}
	}
}

// The executor's temporary kinds' directory counts as inside the
// workspace: a piped stdin's upload and its removal ride on the command's
// one approval, while a write beside that directory still asks, and a
// symlink in it that leads out is outside.
func TestTheTempDirCountsAsInsideTheWorkspace(t *testing.T) {
	p := approve.DefaultPolicy()
	ws, tmp, outside := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, tmp+"/out"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		req  ops.Request
		want bool
	}{
		{"the stdin file's write", writeReq(protocol.KindWriteFileExclusive, tmp+"/sema-stdin-1"), false},
		{"its removal", writeReq(protocol.KindRemove, tmp+"/sema-stdin-1"), false},
		{"the command", execReq("cat"), true},
		{"a write beside the temp dir", writeReq(protocol.KindWriteFile, filepath.Dir(tmp)+"/x"), true},
		{"the temp dir itself removed", writeReq(protocol.KindRemove, tmp), true},
		{"through a link out of it", writeReq(protocol.KindWriteFile, tmp+"/out/x"), true},
	} {
		if got := p.Needs(c.req, ws, tmp); got != c.want {
			t.Errorf("%s: Needs = %v, want %v", c.name, got, c.want)
		}
	}
}
