package bleadapter

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: a Link's
// watcher and its stack calls must end (the fake releases blocked calls).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
