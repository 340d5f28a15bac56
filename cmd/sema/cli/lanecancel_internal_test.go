package cli

import (
	"errors"
	"strings"
	"testing"
)

// 130 is the user's Ctrl-C alone: a cancel the lane made on its own (the
// outcome line's cancelledBy "lane") exits 254 and says so, whatever the
// outcome's arm, while the user's interrupted cancel stays 130.
func TestOnlyTheUsersCtrlCExits130(t *testing.T) {
	laneMsg := "the lane cancelled the command: its output outran the pending-delivery bound (§4: 2097152 bytes / 8192 chunks waiting for the caller)"
	cases := []struct {
		name string
		res  result
		want int
		says string
	}{
		{"lane cancel", result{LaneCancelled: true, Outcome: outcome{ErrorCode: "aborted", Message: laneMsg}}, ExitLaneCancelled, "the lane cancelled the command"},
		{"lane cancel, then unknown", result{LaneCancelled: true, Outcome: outcome{ErrorCode: "outcome_unknown", Message: laneMsg}}, ExitLaneCancelled, "the lane cancelled the command"},
		{"Ctrl-C receipt", result{Interrupted: true, Outcome: outcome{OK: true, Kind: "cancelled", State: "killed"}}, ExitCancelled, "cancelled (killed)"},
		{"Ctrl-C aborted", result{Interrupted: true, Outcome: outcome{ErrorCode: "aborted", Message: "stopped"}}, ExitCancelled, "aborted"},
		{"aborted, not interrupted", result{Outcome: outcome{ErrorCode: "aborted", Message: "stopped"}}, ExitLaneFailure, "aborted"},
	}
	for _, c := range cases {
		err := c.res.failure("exec")
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != c.want || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v (code %v), want exit %d saying %q", c.name, err, ee, c.want, c.says)
		}
	}
}
