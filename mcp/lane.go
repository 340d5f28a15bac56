package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/words"
)

// Lane is what the tools need of the lane: the caller's devices, and one
// instruction followed to its outcome. *client.Client is one (for `sema
// mcp`); the lane's own /v1/mcp face passes one that dispatches in process.
type Lane interface {
	Devices(ctx context.Context) ([]api.Device, error)
	Instruct(ctx context.Context, deviceID string, in api.InstructionRequest, sink client.Sink) (client.Result, error)
}

// target resolves, once, the device the tools act on: the one named, else
// the caller's only device that is not revoked. A failed resolution is not
// remembered: the next call tries again (a device may be enrolled since).
type target struct {
	lane Lane
	want string

	mu  sync.Mutex
	dev *api.Device
}

// errNoDevice is a resolution that cannot succeed as asked.
type errNoDevice struct{ msg string }

func (e *errNoDevice) Error() string { return e.msg }

// named is the device when the connection names one by its id: the id
// only, without asking the lane (which refuses an unknown id itself), for
// the calls that need nothing else of it. A name is resolved by device.
func (t *target) named() (api.Device, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dev != nil {
		return *t.dev, true
	}
	return api.Device{DeviceID: t.want}, client.IsDeviceID(t.want)
}

func (t *target) device(ctx context.Context) (api.Device, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dev != nil {
		return *t.dev, nil
	}
	devs, err := t.lane.Devices(ctx)
	if err != nil {
		return api.Device{}, fmt.Errorf("listing your devices: %w", err)
	}
	d, err := client.ChooseDevice(devs, t.want)
	var choose *client.ChooseError
	if errors.As(err, &choose) {
		return api.Device{}, &errNoDevice{msg: chooseHint(choose)}
	}
	if err != nil {
		return api.Device{}, err
	}
	t.dev = &d
	return d, nil
}

func chooseHint(e *client.ChooseError) string {
	switch {
	case len(e.Ambiguous) > 0:
		return e.Error()
	case e.Wanted != "":
		return fmt.Sprintf("you have no device %q (the list_devices tool lists yours)", e.Wanted)
	case e.Live == 0:
		return "you have no enrolled device: enroll one (`sema token` prints the line that does it)"
	}
	return fmt.Sprintf("you have %s: name one (`sema mcp --device ID`, or ?device=ID on /v1/mcp; the list_devices tool lists them)", words.Count(e.Live, "device", "devices"))
}

// devicePath makes p absolute on the device: the lane takes absolute,
// normalized POSIX paths, so a relative one is joined to the device's
// workspace root, never expanded (no ~).
func devicePath(dev api.Device, p string) (string, error) {
	if p == "" {
		return "", errors.New("path is empty")
	}
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	return client.DevicePath(dev, p), nil
}
