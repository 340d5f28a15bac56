package nexting

import (
	"os/exec"
	"strings"
	"testing"
)

// nexting is what device makers build on: it must not pull in a Bluetooth
// stack or D-Bus. The BLE host adapter lives in nexting/bleadapter.
func TestNoBluetoothStackDependency(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"tinygo.org/", "github.com/godbus/", "github.com/sema-agent/sema/nexting/bleadapter"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("nexting depends on %s", dep)
			}
		}
	}
}
