package protocol

import (
	"bufio"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// specTables reads every <!-- closed-set: NAME --> table of the spec copy in
// testdata: NAME → rows, each row its cells with backticks removed.
func specTables(t *testing.T) map[string][][]string {
	t.Helper()
	f, err := os.Open("testdata/device-executor-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	marker := regexp.MustCompile(`^<!-- closed-set: ([A-Z_]+) -->$`)
	tables := map[string][][]string{}
	var current string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := marker.FindStringSubmatch(line); m != nil {
			current = m[1]
			tables[current] = nil
			continue
		}
		if current == "" {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(tables[current]) > 0 {
				current = "" // the table ended
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(strings.ReplaceAll(cells[i], "`", ""))
		}
		tables[current] = append(tables[current], cells)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for name, rows := range tables {
		if len(rows) < 3 {
			t.Fatalf("closed set %s: table not found under its marker", name)
		}
		tables[name] = rows[2:] // drop the header and the separator
	}
	return tables
}

func firstColumn(rows [][]string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r[0])
	}
	return out
}

func asStrings[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// Every closed set of the spec has a Go list with exactly its members, in the
// spec's order, and a Parse that refuses anything else.
func TestEveryClosedSetMatchesTheSpecTable(t *testing.T) {
	tables := specTables(t)
	type set struct {
		members []string
		parse   func(string) error
	}
	p := func(f func(string) error) func(string) error { return f }
	sets := map[string]set{
		"DEVICE_HELLO_REJECT_CODES": {asStrings(HelloRejectCodes()), p(func(s string) error { _, err := ParseHelloRejectCode(s); return err })},
		"DEVICE_FRAME_TYPES":        {asStrings(DeviceFrameTypes()), p(func(s string) error { _, err := ParseDeviceFrameType(s); return err })},
		"DEVICE_SERVER_FRAME_TYPES": {asStrings(ServerFrameTypes()), p(func(s string) error { _, err := ParseServerFrameType(s); return err })},
		"DEVICE_FRAME_REJECT_REASONS": {asStrings(FrameRejectReasons()), p(func(s string) error {
			_, err := ParseFrameRejectReason(s)
			return err
		})},
		"DEVICE_FRAME_GATE_REJECT_REASONS": {asStrings(GateRejectReasons()), p(func(s string) error {
			_, err := ParseGateRejectReason(s)
			return err
		})},
		"DEVICE_INSTRUCTION_KINDS":   {asStrings(InstructionKinds()), p(func(s string) error { _, err := ParseInstructionKind(s); return err })},
		"DEVICE_OUTCOME_ERROR_CODES": {asStrings(ErrorCodes()), p(func(s string) error { _, err := ParseErrorCode(s); return err })},
		"DEVICE_CHUNK_KINDS":         {asStrings(ChunkKinds()), p(func(s string) error { _, err := ParseChunkKind(s); return err })},
		"DEVICE_INSTRUCTION_STATES":  {asStrings(InstructionStates()), p(func(s string) error { _, err := ParseInstructionState(s); return err })},
		"DEVICE_BYE_REASONS":         {asStrings(ByeReasons()), p(func(s string) error { _, err := ParseByeReason(s); return err })},
		"DEVICE_GOODBYE_REASONS":     {asStrings(GoodbyeReasons()), p(func(s string) error { _, err := ParseGoodbyeReason(s); return err })},
		"DEVICE_CANCEL_STATES":       {asStrings(CancelStates()), p(func(s string) error { _, err := ParseCancelState(s); return err })},
	}
	valueTables := map[string]bool{"DEVICE_CONSTANTS": true, "DEVICE_WS_LIMITS": true}
	for name := range tables {
		if _, ok := sets[name]; !ok && !valueTables[name] {
			t.Errorf("the spec has closed set %s, and this package has no list for it", name)
		}
	}
	for name, s := range sets {
		rows, ok := tables[name]
		if !ok {
			t.Errorf("closed set %s is not in the spec", name)
			continue
		}
		want := firstColumn(rows)
		if !slices.Equal(s.members, want) {
			t.Errorf("%s:\n got %q\nwant %q", name, s.members, want)
		}
		for _, m := range want {
			if err := s.parse(m); err != nil {
				t.Errorf("%s: Parse(%q) = %v, want a member", name, m, err)
			}
		}
		for _, bad := range []string{"", "nope", strings.ToUpper(want[0]), want[0] + " ", " " + want[0]} {
			err := s.parse(bad)
			var um *UnknownMemberError
			if !errors.As(err, &um) || um.Set != name || um.Value != bad {
				t.Errorf("%s: Parse(%q) = %v, want an UnknownMemberError naming the set", name, bad, err)
			}
		}
	}
}

// DEVICE_CONSTANTS and DEVICE_WS_LIMITS: every key with the spec's value.
func TestConstantsAndLimitsMatchTheSpecTables(t *testing.T) {
	tables := specTables(t)
	got := map[string]string{
		"DEVICE_WS_PATH":              WSPath,
		"DEVICE_PROTOCOL_VERSION":     strconv.Itoa(ProtocolVersion),
		"DEVICE_MIN_PROTOCOL_VERSION": strconv.Itoa(MinProtocolVersion),
		"DEVICE_HELLO_DOMAIN_TAG":     HelloDomainTag,
		"maxFrameBytes":               strconv.Itoa(MaxFrameBytes),
		"maxPreAuthFrameBytes":        strconv.Itoa(MaxPreAuthFrameBytes),
		"handshakeDeadlineMs":         strconv.FormatInt(HandshakeDeadline.Milliseconds(), 10),
		"defaultPayloadPartBytes":     strconv.Itoa(DefaultPayloadPartBytes),
	}
	seen := 0
	for _, name := range []string{"DEVICE_CONSTANTS", "DEVICE_WS_LIMITS"} {
		for _, row := range tables[name] {
			seen++
			v, ok := got[row[0]]
			if !ok {
				t.Errorf("%s: the spec's %s has no Go constant", name, row[0])
				continue
			}
			if v != row[1] {
				t.Errorf("%s: %s = %q, the spec says %q", name, row[0], v, row[1])
			}
		}
	}
	if seen != len(got) {
		t.Errorf("the spec has %d constants and limits, this test knows %d", seen, len(got))
	}
}

// The sets closed by the spec's text rather than by a marked table.
func TestTextualClosedSets(t *testing.T) {
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"outcome kinds (§3.3)", asStrings(OutcomeKinds()), []string{"exec", "read", "stat", "write", "void", "cancelled"}},
		{"payload parts (§2.3)", asStrings(PayloadParts()), []string{"begin", "chunk", "commit"}},
		{"WireFileInfo kinds (§3.3)", asStrings(FileKinds()), []string{"file", "dir", "symlink", "other"}},
		{"platformOs (§1.1)", asStrings(PlatformOSes()), []string{"darwin", "linux"}},
	}
	for _, tt := range tests {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	if _, err := ParsePlatformOS("windows"); err == nil {
		t.Error(`ParsePlatformOS("windows") succeeded; §1.1 says there is no third value`)
	}
}

// The lists are copies: a caller cannot change a closed set.
func TestClosedSetListsAreCopies(t *testing.T) {
	kinds := InstructionKinds()
	kinds[0] = "rm -rf"
	if InstructionKind("rm -rf").Valid() || !KindExec.Valid() {
		t.Fatal("mutating the returned list changed the closed set")
	}
}

func TestKindFamilies(t *testing.T) {
	var writes, execs []InstructionKind
	for _, k := range InstructionKinds() {
		if k.IsWrite() {
			writes = append(writes, k)
		}
		if k.IsExec() {
			execs = append(execs, k)
		}
	}
	// §3.4: the four kinds whose content travels as a payload sub-sequence.
	if want := []InstructionKind{KindWriteFile, KindWriteFileExclusive, KindWriteFileGuarded, KindAppendFile}; !slices.Equal(writes, want) {
		t.Errorf("write family = %q, want %q", writes, want)
	}
	if want := []InstructionKind{KindExec, KindExecStream}; !slices.Equal(execs, want) {
		t.Errorf("exec family = %q, want %q", execs, want)
	}
}
