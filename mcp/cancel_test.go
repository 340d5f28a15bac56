package mcp_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/mcp"
)

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A client that cancels its tool call stops the command on the device:
// nothing the call started outlives it.
func TestCancellingACallStopsTheCommandOnTheDevice(t *testing.T) {
	eachFace(t, func(t *testing.T, l *liveLane, cs *sdk.ClientSession) {
		pidFile := filepath.Join(l.ws, "pid")
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "echo $$ > pid; exec sleep 60"}})
			errc <- err
		}()
		var pid int
		waitUntil(t, "the command to start", func() bool {
			b, err := os.ReadFile(pidFile)
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			return err == nil && pid > 0
		})
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled call returned %v", err)
		}
		waitUntil(t, "the command to be killed", func() bool { return syscall.Kill(pid, 0) != nil })
		os.Remove(pidFile)
	})
}

// With several devices and none named, every tool says so and names the
// way to choose; list_devices still lists them.
func TestSeveralDevicesAndNoneNamedIsAClearError(t *testing.T) {
	l := startLiveLane(t)
	second, _ := l.addDevice()
	for _, f := range faces {
		t.Run(f.name, func(t *testing.T) {
			cs := f.connect(l, "", "", nil)
			res := call(t, cs, "run_command", map[string]any{"command": "true"})
			if !res.IsError || !strings.HasPrefix(text(res), mcp.CodeNoDevice+": you have 2 devices: name one") {
				t.Fatalf("%s", text(res))
			}
			var r mcp.DevicesResult
			structured(t, call(t, cs, "list_devices", map[string]any{}), &r)
			if len(r.Devices) != 2 || r.Current != "" {
				t.Fatalf("devices %+v", r)
			}
			var run mcp.RunResult
			structured(t, call(t, f.connect(l, second, "", nil), "run_command", map[string]any{"command": "true"}), &run)
			if run.DeviceID != second {
				t.Fatalf("named %s, ran on %s", second, run.DeviceID)
			}
			res = call(t, f.connect(l, "dev_NOSUCH", "", nil), "run_command", map[string]any{"command": "true"})
			if !res.IsError || !strings.Contains(text(res), `you have no device "dev_NOSUCH"`) {
				t.Fatalf("%s", text(res))
			}
		})
	}
}

// A device named by its name: each face resolves it through the device
// list; a name two devices have lists their ids.
func TestADeviceNamedByItsName(t *testing.T) {
	l := startLiveLane(t)
	box := l.live.AddNamedDevice("box")
	for _, f := range faces {
		t.Run(f.name, func(t *testing.T) {
			var run mcp.RunResult
			structured(t, call(t, f.connect(l, "box", "", nil), "run_command", map[string]any{"command": "true"}), &run)
			if run.DeviceID != box.ID {
				t.Fatalf("named box (%s), ran on %s", box.ID, run.DeviceID)
			}
		})
	}
	other := l.live.AddNamedDevice("box")
	for _, f := range faces {
		t.Run(f.name+" ambiguous", func(t *testing.T) {
			res := call(t, f.connect(l, "box", "", nil), "run_command", map[string]any{"command": "true"})
			if !res.IsError || !strings.Contains(text(res), box.ID) || !strings.Contains(text(res), other.ID) {
				t.Fatalf("%s", text(res))
			}
		})
	}
}
