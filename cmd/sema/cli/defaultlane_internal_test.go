package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/device"
)

// A newcomer's first command often goes to the default lane, where no
// server listens: the message says that it was the default and how to
// name the lane. Any other unreachable lane, or any other error, gets no
// such note.
func TestUnreachableDefaultLaneSaysHowToNameTheLane(t *testing.T) {
	refused := errors.New("connection refused")
	cases := []struct {
		err  error
		note bool
	}{
		{&client.UnreachableError{URL: DefaultServer, Err: refused}, true},
		{fmt.Errorf("reading: %w", &client.UnreachableError{URL: DefaultServer + "/", Err: refused}), true},
		{&device.UnreachableError{URL: DefaultServer, Err: refused}, true},
		{&client.UnreachableError{URL: "http://lane.example:8420", Err: refused}, false},
		{&client.UnreachableError{URL: DefaultServer, Err: refused, Sent: true}, false}, // it answered once: it is there
		{errors.New("auth.forbidden"), false},
	}
	for _, tc := range cases {
		note := defaultLaneNote(tc.err)
		if (note != "") != tc.note || (tc.note && (!strings.Contains(note, "--server") || !strings.Contains(note, "sema login"))) {
			t.Errorf("%v: note %q, want one: %v", tc.err, note, tc.note)
		}
	}
}
