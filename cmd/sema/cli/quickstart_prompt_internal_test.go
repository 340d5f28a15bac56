package cli

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// keys is a terminal in raw mode that the user types into.
type keys struct {
	io.Reader
	strings.Builder
}

func TestLineEditorKeepsHistoryAndTellsCtrlCFromCtrlD(t *testing.T) {
	e := newLineEditor()
	for _, tc := range []struct {
		typed, want string
		err         error
	}{
		{"echo one\r", "echo one", nil},
		{"echo twx\x7fo\r", "echo two", nil},    // backspace
		{"\x1b[A\x1b[A\r", "echo one", nil},     // Up twice: the history
		{"half a line\x03", "", errInterrupted}, // Ctrl-C drops the line
		{"\x04", "", io.EOF},                    // Ctrl-D on an empty line
	} {
		line, err := e.readLine(&keys{Reader: strings.NewReader(tc.typed)})
		if line != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%q: %q, %v; want %q, %v", tc.typed, line, err, tc.want, tc.err)
		}
	}
}
