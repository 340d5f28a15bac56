package cli_test

import (
	"testing"

	"github.com/sema-agent/sema/internal/lanetest"
)

func issueToken(t *testing.T, base, apiKey string) string {
	t.Helper()
	token, err := lanetest.IssueToken(t.Context(), base, apiKey)
	if err != nil {
		t.Fatal(err)
	}
	return token
}
