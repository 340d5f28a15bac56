package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/protocol"
)

// What people read must not stutter: no word twice in a row ("404 404"),
// no remark in parentheses that repeats what came before it ("never
// started (it never started)"), no count before a plural that may be 1
// ("1 devices": words.Count says it right).
var (
	word      = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	remark    = regexp.MustCompile(`\(([^()]+)\)`)
	countNoun = regexp.MustCompile(`%d ([a-z]+)`)
)

// notPlural are words after a %d that end in s and are no plural noun.
var notPlural = map[string]bool{"is": true, "was": true, "has": true, "as": true, "its": true, "this": true, "does": true, "goes": true}

// garbled says what stutters in msg, or "".
func garbled(msg string) string {
	fields := strings.Fields(msg)
	for i := 1; i < len(fields); i++ {
		if fields[i] == fields[i-1] && word.MatchString(fields[i]) {
			return "the word " + strconv.Quote(fields[i]) + " twice"
		}
	}
	for _, m := range remark.FindAllStringSubmatchIndex(msg, -1) {
		inner := msg[m[2]:m[3]]
		for _, lead := range []string{"it ", "they ", "the ", "that "} {
			inner = strings.TrimPrefix(inner, lead)
		}
		if len(strings.Fields(inner)) >= 2 && strings.Contains(msg[:m[0]], inner) {
			return "the remark " + strconv.Quote(msg[m[0]:m[1]]) + " repeats what came before it"
		}
	}
	return ""
}

// userText is every string literal of the packages whose text people
// read: the CLI, the client, the MCP face.
func userText(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, dir := range []string{".", "../../../client", "../../../mcp"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						out[s] = fset.Position(lit.Pos()).String()
					}
				}
				return true
			})
		}
	}
	return out
}

func TestMessageTemplatesDoNotStutter(t *testing.T) {
	texts := userText(t)
	if len(texts) < 100 {
		t.Fatalf("read only %d literals", len(texts))
	}
	for s, where := range texts {
		if why := garbled(s); why != "" {
			t.Errorf("%s: %q: %s", where, s, why)
		}
		for _, m := range countNoun.FindAllStringSubmatch(s, -1) {
			if w := m[1]; strings.HasSuffix(w, "s") && !notPlural[w] {
				t.Errorf("%s: %q: %%d %s reads \"1 %s\" for one: use words.Count", where, s, w, w)
			}
		}
	}
}

// Messages put together from the lane's and the device's own words do
// not say a thing twice.
func TestComposedMessagesDoNotStutter(t *testing.T) {
	for _, msg := range []string{
		// The device's refusals mostly say that nothing ran themselves.
		"the working directory /w/x does not exist; the command never started",
		"approval required: denied on unix:/run/nx.sock; the instruction was not run",
		"the device is offline",
	} {
		for _, state := range []protocol.InstructionState{protocol.StateTerminalNeverStarted, protocol.StateTerminal} {
			res := client.Result{State: state, Outcome: api.Outcome{ErrorCode: protocol.ErrNotFound, Message: msg}}
			err := refusedToStart(failure(res, protocol.OutcomeExec))
			if err == nil || !strings.Contains(err.Error(), "never started") && !strings.Contains(err.Error(), "was not run") {
				t.Errorf("%q (%s): %v does not say it never started", msg, state, err)
			}
			if why := garbled(err.Error()); why != "" {
				t.Errorf("%q: %s", err, why)
			}
		}
	}
	for _, e := range []*client.Error{{Status: 404, Message: "404 page not found"}, {Status: 502, Message: "Bad Gateway"}} {
		if why := garbled(e.Error()); why != "" || !strings.Contains(e.Error(), strconv.Itoa(e.Status)) {
			t.Errorf("%q: %s", e, why)
		}
	}
	if why := garbled(callError(&client.Error{Status: 404, Message: "404 page not found"}).Error()); why != "" {
		t.Error(why)
	}
}
