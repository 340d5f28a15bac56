package approve

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sema-agent/sema/executor/ops"
	"github.com/sema-agent/sema/internal/safetext"
	"github.com/sema-agent/sema/protocol"
)

// Ellipsis marks where a summary was shortened. Instruction text never
// shows it as it is (it is escaped as \u2026), so every Ellipsis a person
// reads comes from this package.
const Ellipsis = "…"

// Separator sits between the command and its cwd and environment; like
// Ellipsis, it is escaped (\u00b7) in instruction text, so an instruction
// cannot forge the end of its own command.
const Separator = " · "

// Summary is the one line a person reads on the device before allowing
// req: what will run, exactly, in at most max bytes of UTF-8.
//
//	Run: git push origin main
//	Run: make · in /srv/app · env GOFLAGS=-race
//	Write 12 bytes to /etc/hosts
//	Remove recursively /home/me/old
//
// The command comes first, whole whenever the line fits; then the cwd (when
// it is not the workspace root) and the environment, sorted by name.
//
// Text from the instruction is shown as it is when it is clean
// (safetext.Clean: no control, format, bidi or invisible character, no
// invalid UTF-8), does not start with a double quote and holds neither
// Ellipsis nor the middle dot of Separator; otherwise it is shown as a
// double-quoted literal in which those characters, `"` and `\` are escapes.
// An environment name or value with a space, a quote or (names) an `=` is
// quoted as well, so NAME=value pairs cannot run into each other.
//
// A line longer than max is shortened so that nothing is cut silently.
// The command is whole when it fits beside " · in …" and " · env …" (the
// cwd and the environment then share what is left evenly); a longer command keeps
// at least half of the room, the cwd and the environment up to a quarter
// each. A shortened part keeps its start and its end around
// "…[N bytes cut]…", or where the room is too small for that its start and
// Ellipsis. The cwd and the environment are never dropped: when present,
// " · in" and " · env" are always shown. Cuts fall between whole
// characters or escapes, never inside one. A cut means something is not
// shown: the person cannot judge what they cannot read (docs/executor.md).
func Summary(req ops.Request, workspaceRoot string, max int) string {
	return describe(req, workspaceRoot).fit(max)
}

// summary is a line of parts: literal text of this package, never cut, and
// fields of instruction text, shortened when the line is too long. The
// first field is the primary one (the command, the path).
type summary []part

type part struct {
	field bool
	units []string              // characters or escapes; never split
	cut   func(room int) string // how the field shortens; nil: cutUnits
}

func (s *summary) lit(text string) { *s = append(*s, part{units: runeUnits(text)}) }

// val adds instruction text as a field; strict is the set of characters
// that also make it quoted (not escaped).
func (s *summary) val(text, strict string) {
	*s = append(*s, part{field: true, units: valUnits(text, strict)})
}

func describe(req ops.Request, root string) summary {
	var s summary
	a := req.Args
	switch req.Kind {
	case protocol.KindExec, protocol.KindExecStream:
		s.lit("Run: ")
		s.val(command(a), "")
		if req.Cwd != "" && req.Cwd != root {
			s.lit(Separator + "in ")
			s.val(req.Cwd, "")
		}
		if len(req.ShellEnv) > 0 {
			s.lit(Separator + "env ")
			s = append(s, envPart(req.ShellEnv))
		}
		return s
	case protocol.KindWriteFile, protocol.KindWriteFileExclusive, protocol.KindWriteFileGuarded, protocol.KindAppendFile:
		w, _ := a.(protocol.WriteArgs)
		verb := map[protocol.InstructionKind]string{
			protocol.KindWriteFile:          "Write %s to ",
			protocol.KindWriteFileExclusive: "Write %s to new file ",
			protocol.KindWriteFileGuarded:   "Write %s, guarded, to ",
			protocol.KindAppendFile:         "Append %s to ",
		}[req.Kind]
		s.lit(strings.Replace(verb, "%s", byteCount(w.ContentLen), 1))
	case protocol.KindRemove:
		if d, _ := a.(protocol.DirArgs); d.Recursive != nil && *d.Recursive {
			s.lit("Remove recursively ")
		} else {
			s.lit("Remove ")
		}
	case protocol.KindCreateDir:
		s.lit("Create directory ")
	case protocol.KindReadTextFile, protocol.KindReadBinaryFile:
		s.lit("Read ")
	case protocol.KindReadTextLines:
		s.lit("Read lines of ")
	case protocol.KindFileInfo:
		s.lit("Inspect ")
	case protocol.KindListDir:
		s.lit("List ")
	case protocol.KindCanonicalPath:
		s.lit("Resolve ")
	case protocol.KindExists:
		s.lit("Check whether this exists: ")
	case protocol.KindReadLink:
		s.lit("Read link ")
	case protocol.KindCreateTempDir:
		s.lit("Create a temporary directory")
		if t, _ := a.(protocol.TempDirArgs); t.Prefix != "" {
			s.lit(" named ")
			s.val(t.Prefix+"*", "")
		}
		return s
	case protocol.KindCreateTempFile:
		s.lit("Create a temporary file")
		if t, _ := a.(protocol.TempFileArgs); t.Prefix != "" || t.Suffix != "" {
			s.lit(" named ")
			s.val(t.Prefix+"*"+t.Suffix, "")
		}
		return s
	case protocol.KindStatBatch:
		st, _ := a.(protocol.StatBatchArgs)
		s.lit("Inspect " + strconv.Itoa(len(st.Paths)) + " paths")
		return s
	default:
		s.val(string(req.Kind), " ")
		s.lit(" ")
	}
	s.val(protocol.ArgsPath(a), "")
	return s
}

func byteCount(n int64) string {
	if n == 1 {
		return "1 byte"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// envPart renders the environment as NAME=value pairs in name order. It
// shortens the values before the names — a name (LD_PRELOAD, BASH_ENV,
// PATH) says more about what will run than its value: each value gets an
// even share of the room the names leave, and only when the names with an
// Ellipsis for each value do not fit are the names cut too.
func envPart(env map[string]string) part {
	names := slices.Sorted(maps.Keys(env))
	nameUnits := make([][]string, len(names))
	valueUnits := make([][]string, len(names))
	join := func(value func(i int) []string) []string {
		var u []string
		for i := range names {
			if i > 0 {
				u = append(u, " ")
			}
			u = append(u, nameUnits[i]...)
			u = append(u, "=")
			u = append(u, value(i)...)
		}
		return u
	}
	for i, name := range names {
		nameUnits[i] = valUnits(name, ` "=`)
		valueUnits[i] = valUnits(env[name], ` "`)
	}
	whole := join(func(i int) []string { return valueUnits[i] })
	return part{field: true, units: whole, cut: func(room int) string {
		bare := join(func(int) []string { return []string{Ellipsis} })
		left := room - unitsLen(bare) + len(Ellipsis)*len(names)
		if left < len(Ellipsis)*len(names) {
			return cutUnits(bare, room)
		}
		order := make([]int, len(names)) // the smaller need is met first
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return unitsLen(valueUnits[a]) - unitsLen(valueUnits[b]) })
		shown := make([][]string, len(names))
		for k, i := range order {
			share := min(unitsLen(valueUnits[i]), left/(len(order)-k))
			shown[i] = []string{cutUnits(valueUnits[i], share)}
			left -= len(shown[i][0])
		}
		return strings.Join(join(func(i int) []string { return shown[i] }), "")
	}}
}

func runeUnits(s string) []string {
	u := make([]string, 0, len(s))
	for i, r := range s {
		u = append(u, s[i:i+utf8.RuneLen(r)])
	}
	return u
}

// reserved are the characters this package's own marks are made of.
const reserved = "…·"

// valUnits renders instruction text: as it is when that cannot mislead,
// else quoted with escapes.
func valUnits(s, strict string) []string {
	if plain(s, strict) {
		return runeUnits(s)
	}
	u := []string{`"`}
	after := rune(0)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			u, after = append(u, safetext.EscapeByte(s[i])), 0
		case r == '"' || r == '\\':
			u, after = append(u, `\`+string(r)), 0
		case safetext.Unsafe(after, r) || strings.ContainsRune(reserved, r):
			u, after = append(u, safetext.Escape(r)), 0
		default:
			u, after = append(u, s[i:i+n]), r
		}
		i += n
	}
	return append(u, `"`)
}

func plain(s, strict string) bool {
	return s != "" && s[0] != '"' && safetext.Clean(s) && !strings.ContainsAny(s, reserved+strict)
}

func (s summary) len() int {
	n := 0
	for _, p := range s {
		n += unitsLen(p.units)
	}
	return n
}

func unitsLen(u []string) int {
	n := 0
	for _, x := range u {
		n += len(x)
	}
	return n
}

// fit joins the line, shortened to at most max bytes as Summary says.
func (s summary) fit(max int) string {
	if s.len() <= max {
		return s.join(nil)
	}
	literal, primary, secondary := 0, -1, 0
	for i, p := range s {
		switch {
		case !p.field:
			literal += unitsLen(p.units)
		case primary < 0:
			primary = i
		default:
			secondary++
		}
	}
	room := max - literal
	if primary < 0 || room < len(Ellipsis)*(1+secondary) {
		var all []string // too small to show every part: the start of the line
		for _, p := range s {
			all = append(all, p.units...)
		}
		return headCut(all, max)
	}
	return s.join(s.rooms(room, primary))
}

// rooms shares room among the fields. The primary (the command) is whole
// when it fits beside an Ellipsis for each secondary field (the cwd, the
// environment), which then share what is left evenly. Otherwise each
// secondary gets what it needs up to a quarter of the room, and the
// primary the rest.
func (s summary) rooms(room, primary int) map[int]int {
	rooms := map[int]int{}
	need := func(i int) int { return unitsLen(s[i].units) }
	var secondaries []int
	for i, p := range s {
		if p.field && i != primary {
			secondaries = append(secondaries, i)
		}
	}
	if left := room - need(primary); left >= len(Ellipsis)*len(secondaries) {
		rooms[primary] = need(primary)
		// Share fairly: the smaller need is met first, its rest goes on.
		slices.SortFunc(secondaries, func(a, b int) int { return need(a) - need(b) })
		for k, i := range secondaries {
			rooms[i] = min(need(i), left/(len(secondaries)-k))
			left -= rooms[i]
		}
		return rooms
	}
	left := room
	for _, i := range secondaries {
		rooms[i] = min(need(i), max(room/4, len(Ellipsis)))
		left -= rooms[i]
	}
	rooms[primary] = left
	return rooms
}

// join writes the line with each field in rooms shortened to its room.
func (s summary) join(rooms map[int]int) string {
	var b strings.Builder
	for i, p := range s {
		if r, cut := rooms[i]; cut {
			if p.cut != nil {
				b.WriteString(p.cut(r))
			} else {
				b.WriteString(cutUnits(p.units, r))
			}
			continue
		}
		for _, u := range p.units {
			b.WriteString(u)
		}
	}
	return b.String()
}

// cutUnits shortens a field to room bytes: its start and end around
// "…[N bytes cut]…", or its start and Ellipsis when that mark leaves no
// room for both.
func cutUnits(u []string, room int) string {
	total := unitsLen(u)
	if total <= room {
		return strings.Join(u, "")
	}
	widest := mark(total) // the mark for any N ≤ total is at most this long
	keep := room - len(widest)
	if keep < len(widest) { // too little room for the count: the start and Ellipsis
		return headCut(u, room)
	}
	head, headLen := 0, 0
	for head < len(u) && headLen+len(u[head]) <= (keep+1)/2 {
		headLen += len(u[head])
		head++
	}
	tail, tailLen := len(u), 0
	for tail > head && headLen+tailLen+len(u[tail-1]) <= keep {
		tail--
		tailLen += len(u[tail])
	}
	return strings.Join(u[:head], "") + mark(total-headLen-tailLen) + strings.Join(u[tail:], "")
}

func mark(cut int) string { return Ellipsis + "[" + strconv.Itoa(cut) + " bytes cut]" + Ellipsis }

// headCut is the start of the units, whole units only, ending with
// Ellipsis, in at most max bytes.
func headCut(u []string, max int) string {
	if unitsLen(u) <= max {
		return strings.Join(u, "")
	}
	room := max - len(Ellipsis)
	if room < 0 {
		return ""
	}
	var b strings.Builder
	for _, x := range u {
		if b.Len()+len(x) > room {
			break
		}
		b.WriteString(x)
	}
	b.WriteString(Ellipsis)
	return b.String()
}
