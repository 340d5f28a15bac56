package cli_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

// registerInto registers n devices of the lane's admin straight in the
// running server's SQLite registry, and returns every device id of the
// admin, oldest first.
func registerInto(t *testing.T, s *laneServer, n int) []string {
	t.Helper()
	st, err := sqlite.Open(t.Context(), s.data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	idns, err := st.ListIdentities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	admin := slices.IndexFunc(idns, func(i store.Identity) bool { return i.Admin })
	if admin < 0 {
		t.Fatalf("no admin among %+v", idns)
	}
	if _, err := lanetest.RegisterDevices(t.Context(), st, idns[admin].ID, n); err != nil {
		t.Fatal(err)
	}
	all, err := st.ListDevices(t.Context(), idns[admin].ID, store.DevicePage{})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(all))
	for i, d := range all {
		ids[i] = d.ID
	}
	return ids
}

// sema devices follows the lane's pages (500 each) to the end; --online
// lists only the connected devices.
func TestDevicesFollowsThePagesAndOnlineListsTheConnected(t *testing.T) {
	s := startServer(t, t.TempDir())
	if out, errOut, code := s.sema(t, nil, "devices", "--online"); code != 0 || out != "" || !strings.Contains(errOut, "No device is connected") {
		t.Fatalf("devices --online with none: exit %d: %q %q", code, out, errOut)
	}
	_, id, _ := enrollAndServe(t, s, t.TempDir())
	want := registerInto(t, s, 1200)
	if len(want) != 1201 || want[0] != id {
		t.Fatalf("%d devices, the oldest %s; want 1201, the served %s first", len(want), want[0], id)
	}

	out, errOut, code := s.sema(t, nil, "devices", "--json")
	var list api.DeviceList
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
		t.Fatalf("devices --json: exit %d, %v: %s", code, err, errOut)
	}
	got := make([]string, len(list.Devices))
	for i, d := range list.Devices {
		got[i] = d.DeviceID
	}
	if !slices.Equal(got, want) || list.Next != "" || strings.Contains(out, `"next"`) {
		t.Fatalf("devices --json: %d devices (next %q); want the registry's %d in order, no next", len(got), list.Next, len(want))
	}

	out, _, code = s.sema(t, nil, "devices")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 1+len(want) || !strings.HasPrefix(lines[0], "DEVICE") || !strings.HasPrefix(lines[len(lines)-1], want[len(want)-1]) {
		t.Fatalf("devices: exit %d, %d lines; want a header and %d rows, the newest last", code, len(lines), len(want))
	}

	out, _, code = s.sema(t, nil, "devices", "--online")
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 || !regexp.MustCompile(`^`+id+`\s+\S+\s+linux/\S+\s+online\s`).MatchString(lines[1]) {
		t.Fatalf("devices --online: exit %d:\n%s", code, out)
	}
}
