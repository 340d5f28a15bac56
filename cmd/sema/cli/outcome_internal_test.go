package cli

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
)

// 255 means the command may have run; 125 that nothing ran. A replica that
// failed after a forwarded request reached it, or a connection that broke
// after the request was sent, is 255: a script that retries on 125 must
// never run the command twice.
func TestCallErrorSaysMayHaveRunOnlyWhenItMay(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"outcome_unknown from the holder", &client.Error{Status: 502, Code: api.CodeOutcomeUnknown, Message: "m"}, ExitLaneFailure},
		{"broken after the request was sent", &client.UnreachableError{URL: "u", Err: io.ErrUnexpectedEOF, Sent: true}, ExitLaneFailure},
		{"a broken stream", &client.StreamError{InstructionID: "ins_1", Err: io.ErrUnexpectedEOF}, ExitLaneFailure},
		{"the holder unreachable, nothing dispatched", &client.Error{Status: 503, Code: api.CodeUnavailable, Message: "m"}, ExitNeverStarted},
		{"nothing listening", &client.UnreachableError{URL: "u", Err: errors.New("connection refused")}, ExitNeverStarted},
		{"a refusal", &client.Error{Status: 404, Code: api.CodeDeviceNotFound, Message: "m"}, ExitNeverStarted},
	} {
		var ee *ExitError
		if err := callError(fmt.Errorf("wrapped: %w", tc.err)); !errors.As(err, &ee) || ee.Code != tc.want {
			t.Errorf("%s: %v; want exit %d", tc.name, err, tc.want)
		}
	}
}
