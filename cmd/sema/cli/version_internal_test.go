package cli

import (
	"testing"

	semaversion "github.com/sema-agent/sema/internal/version"
)

func TestVersionLineSaysWhatTheBuildKnows(t *testing.T) {
	for _, tc := range []struct {
		info semaversion.Info
		want string
	}{
		{semaversion.Info{Version: "dev", Go: "go1.26.8"}, "sema dev go1.26.8"},
		{semaversion.Info{Version: "v0.3.0", Commit: "17fa4d43df272cc09750363240b05d7cb1f1be03", Date: "2026-12-06T14:01:43Z", Go: "go1.26.8"},
			"sema v0.3.0 (commit 17fa4d43df27, 2026-12-06T14:01:43Z) go1.26.8"},
		{semaversion.Info{Version: "dev", Commit: "17fa4d43df27", Modified: true, Go: "go1.26.8"}, "sema dev (commit 17fa4d43df27+modified) go1.26.8"},
	} {
		if got := versionLine(tc.info); got != tc.want {
			t.Errorf("versionLine(%+v) = %q, want %q", tc.info, got, tc.want)
		}
	}
}
