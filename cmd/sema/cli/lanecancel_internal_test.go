package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/protocol"
)

// 130 is the user's Ctrl-C alone: a cancel the lane made on its own (the
// outcome line's cancelledBy "lane") exits 254 and says so, whatever the
// outcome's arm, while the user's interrupted cancel stays 130.
func TestOnlyTheUsersCtrlCExits130(t *testing.T) {
	laneMsg := "the lane cancelled the command: its output outran the pending-delivery bound (§4: 2097152 bytes / 8192 chunks waiting for the caller)"
	cases := []struct {
		name string
		res  client.Result
		want int
		says string
	}{
		{"lane cancel", client.Result{LaneCancelled: true, Outcome: api.Outcome{ErrorCode: protocol.ErrAborted, Message: laneMsg}}, ExitLaneCancelled, "the lane cancelled the command"},
		{"lane cancel, then unknown", client.Result{LaneCancelled: true, Outcome: api.Outcome{ErrorCode: protocol.ErrOutcomeUnknown, Message: laneMsg}}, ExitLaneCancelled, "the lane cancelled the command"},
		{"Ctrl-C receipt", client.Result{Interrupted: true, Outcome: api.Outcome{OK: true, Kind: protocol.OutcomeCancelled, State: "killed"}}, ExitCancelled, "cancelled (killed)"},
		{"Ctrl-C aborted", client.Result{Interrupted: true, Outcome: api.Outcome{ErrorCode: protocol.ErrAborted, Message: "stopped"}}, ExitCancelled, "aborted"},
		{"aborted, not interrupted", client.Result{Outcome: api.Outcome{ErrorCode: protocol.ErrAborted, Message: "stopped"}}, ExitLaneFailure, "aborted"},
	}
	for _, c := range cases {
		err := failure(c.res, protocol.OutcomeExec)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != c.want || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want exit %d saying %q", c.name, err, c.want, c.says)
		}
	}
}
