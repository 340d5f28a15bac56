package cli_test

import (
	"slices"
	"strings"
	"testing"
)

// How the README's lines are read: its shell blocks, the lines that run
// sema, shell comments cut, placeholders replaced as whole words.

// readmeLine is one line of a README shell block that runs sema.
type readmeLine struct {
	n    int    // its line number in README.md
	text string // as the README has it, without its comment
}

// shellFences are the info strings of the fenced blocks read as shell.
var shellFences = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true}

// readmeSemaLines returns the lines of readme's shell blocks that run sema
// (or `go run ./cmd/sema`), comments cut.
func readmeSemaLines(readme string) []readmeLine {
	var out []readmeLine
	inBlock, shell := false, false
	for i, line := range strings.Split(readme, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence, ok := strings.CutPrefix(trimmed, "```"); ok {
			if !inBlock {
				shell = shellFences[strings.TrimSpace(fence)]
			}
			inBlock = !inBlock
			continue
		}
		if !inBlock || !shell {
			continue
		}
		if text := cutShellComment(trimmed); runsSema(text) {
			out = append(out, readmeLine{n: i + 1, text: text})
		}
	}
	return out
}

// cutShellComment drops a comment: from a # that begins a word, outside
// quotes, to the end of the line.
func cutShellComment(line string) string {
	var quote rune
	prev := ' '
	for i, c := range line {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (prev == ' ' || prev == '\t'):
			return strings.TrimSpace(line[:i])
		}
		prev = c
	}
	return strings.TrimSpace(line)
}

// runsSema says whether a shell line has sema as one of its words.
func runsSema(line string) bool {
	words := strings.FieldsFunc(line, func(c rune) bool { return strings.ContainsRune(" \t;|&<>()", c) })
	return slices.ContainsFunc(words, func(w string) bool { return w == "sema" || strings.HasSuffix(w, "/cmd/sema") })
}

// replaceWord replaces old where it stands as a whole shell word (or
// phrase): after the start or a blank, before the end, a blank or an
// operator (a newline counts as a blank, for the output a step wants).
func replaceWord(line, old, repl string) string {
	var b strings.Builder
	from := 0
	for {
		i := strings.Index(line[from:], old)
		if i < 0 {
			break
		}
		i += from
		end := i + len(old)
		before := i == 0 || strings.IndexByte(" \t\n", line[i-1]) >= 0
		after := end == len(line) || strings.IndexByte(" \t\n;|&)", line[end]) >= 0
		b.WriteString(line[from:i])
		if before && after {
			b.WriteString(repl)
		} else {
			b.WriteString(old)
		}
		from = end
	}
	b.WriteString(line[from:])
	return b.String()
}

// The README's lines are found and cut as a shell reads them.
func TestReadmeSemaLines(t *testing.T) {
	readme := "text sema run x\n```sh\nsema run a   # a comment\n# sema in a comment\nprintf '#x' | sema run wc -c\nmake test\n" +
		"go run ./cmd/sema quickstart\n```\n```json\n{\"sema\": 1}\n```\n```\nsema fs ls # c\n```\n"
	got := readmeSemaLines(readme)
	want := []readmeLine{{3, "sema run a"}, {5, "printf '#x' | sema run wc -c"}, {7, "go run ./cmd/sema quickstart"}, {13, "sema fs ls"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, c := range []struct{ line, old, repl, want string }{
		{"sema devices rename laptop work-laptop", "laptop", "vm", "sema devices rename vm work-laptop"},
		{"sema devices revoke dev_…; sema x dev_…", "dev_…", "dev_1", "sema devices revoke dev_1; sema x dev_1"},
		{"sema fs get notes.txt [LOCAL|-]", "[LOCAL|-]", "-", "sema fs get notes.txt -"},
		{"sema run dev_…x", "dev_…", "dev_1", "sema run dev_…x"},
	} {
		if got := replaceWord(c.line, c.old, c.repl); got != c.want {
			t.Errorf("replaceWord(%q, %q): %q, want %q", c.line, c.old, got, c.want)
		}
	}
}
