package approve

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/protocol"
)

// Ellipsis ends a summary that had to be shortened.
const Ellipsis = "…"

// Summary is the one line a person reads on the device before allowing
// req: what will run, exactly, in at most max bytes of UTF-8.
//
//	Run: git push origin main
//	Run in /srv/app: GIT_DIR=/x git push
//	Write 12 bytes to /etc/hosts
//	Remove recursively /home/me/old
//
// Text from the instruction (a command, a path, an environment variable) is
// shown as it is when every character of it is printable (unicode.IsPrint:
// letters, marks, numbers, punctuation, symbols and the ASCII space) and it
// does not start with a double quote; otherwise it is shown as a
// double-quoted Go string literal (strconv.Quote: control characters,
// invisible format characters such as U+202E, other spaces and invalid
// UTF-8 become visible escapes), so nothing that will run is hidden or
// disguised by how it is displayed. An environment value with a space or a
// quote is quoted as well. A summary longer than max is cut at a character
// boundary, never inside an escape, and ends with Ellipsis.
func Summary(req ops.Request, workspaceRoot string, max int) string {
	var l line
	describe(&l, req, workspaceRoot)
	return l.fit(max)
}

func describe(l *line, req ops.Request, root string) {
	a := req.Args
	switch req.Kind {
	case protocol.KindExec, protocol.KindExecStream:
		if req.Cwd != "" && req.Cwd != root {
			l.lit("Run in ")
			l.val(req.Cwd, false)
			l.lit(": ")
		} else {
			l.lit("Run: ")
		}
		for _, name := range slices.Sorted(maps.Keys(req.ShellEnv)) {
			l.val(name, true)
			l.lit("=")
			l.val(req.ShellEnv[name], true)
			l.lit(" ")
		}
		l.val(command(a), false)
		return
	case protocol.KindWriteFile, protocol.KindWriteFileExclusive, protocol.KindWriteFileGuarded, protocol.KindAppendFile:
		w, _ := a.(protocol.WriteArgs)
		verb := map[protocol.InstructionKind]string{
			protocol.KindWriteFile:          "Write %s to ",
			protocol.KindWriteFileExclusive: "Write %s to new file ",
			protocol.KindWriteFileGuarded:   "Write %s, guarded, to ",
			protocol.KindAppendFile:         "Append %s to ",
		}[req.Kind]
		l.lit(strings.Replace(verb, "%s", byteCount(w.ContentLen), 1))
	case protocol.KindRemove:
		if d, _ := a.(protocol.DirArgs); d.Recursive != nil && *d.Recursive {
			l.lit("Remove recursively ")
		} else {
			l.lit("Remove ")
		}
	case protocol.KindCreateDir:
		l.lit("Create directory ")
	case protocol.KindReadTextFile, protocol.KindReadBinaryFile:
		l.lit("Read ")
	case protocol.KindReadTextLines:
		l.lit("Read lines of ")
	case protocol.KindFileInfo:
		l.lit("Inspect ")
	case protocol.KindListDir:
		l.lit("List ")
	case protocol.KindCanonicalPath:
		l.lit("Resolve ")
	case protocol.KindExists:
		l.lit("Check whether this exists: ")
	case protocol.KindReadLink:
		l.lit("Read link ")
	case protocol.KindCreateTempDir:
		l.lit("Create a temporary directory")
		if t, _ := a.(protocol.TempDirArgs); t.Prefix != "" {
			l.lit(" named ")
			l.val(t.Prefix, false)
			l.lit("*")
		}
		return
	case protocol.KindCreateTempFile:
		l.lit("Create a temporary file")
		if t, _ := a.(protocol.TempFileArgs); t.Prefix != "" || t.Suffix != "" {
			l.lit(" named ")
			l.val(t.Prefix+"*"+t.Suffix, false)
		}
		return
	case protocol.KindStatBatch:
		s, _ := a.(protocol.StatBatchArgs)
		l.lit("Inspect " + strconv.Itoa(len(s.Paths)) + " paths")
		return
	default:
		l.val(string(req.Kind), false)
		l.lit(" ")
	}
	l.val(protocol.ArgsPath(a), false)
}

func byteCount(n int64) string {
	if n == 1 {
		return "1 byte"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// line collects a summary as units that are never split: one character of
// plain text, or one escape of a quoted value.
type line struct {
	units []string
	n     int
}

func (l *line) add(u string) {
	l.units = append(l.units, u)
	l.n += len(u)
}

// lit adds text of this package's own (printable).
func (l *line) lit(s string) {
	for _, r := range s {
		l.add(string(r))
	}
}

// val adds text from the instruction: as it is when that cannot mislead,
// else quoted. strict also quotes text with a space or a double quote
// (a word inside a larger line: an environment name or value).
func (l *line) val(s string, strict bool) {
	if plain(s, strict) {
		l.lit(s)
		return
	}
	l.add(`"`)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			l.add(`\x` + strconv.FormatUint(uint64(s[i])>>4, 16) + strconv.FormatUint(uint64(s[i])&0xf, 16))
		} else {
			q := strconv.QuoteRune(r) // 'x', '\n', '\u202e', '"'
			q = q[1 : len(q)-1]
			switch q {
			case `"`:
				q = `\"`
			case `\'`:
				q = `'`
			}
			l.add(q)
		}
		i += n
	}
	l.add(`"`)
}

func plain(s string, strict bool) bool {
	if s == "" || s[0] == '"' || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || strict && (r == ' ' || r == '"') {
			return false
		}
	}
	return true
}

// fit joins the units, shortened to at most max bytes with Ellipsis.
func (l *line) fit(max int) string {
	var b strings.Builder
	if l.n <= max {
		for _, u := range l.units {
			b.WriteString(u)
		}
		return b.String()
	}
	room := max - len(Ellipsis)
	if room < 0 {
		return ""
	}
	for _, u := range l.units {
		if b.Len()+len(u) > room {
			break
		}
		b.WriteString(u)
	}
	b.WriteString(Ellipsis)
	return b.String()
}
