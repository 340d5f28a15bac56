package nexting

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: every
// Stream, BLEConn, Session and SimConn must stop what it started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
