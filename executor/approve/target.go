package approve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
)

// Target is where the approval device is reached, as given to
// `sema device serve --approve`: unix:PATH (a stream socket the device, or
// `sema nexting sim`, listens on), serial:DEV[@BAUD] (a serial port, 8N1,
// 115200 baud unless given), or ble:ADDR.
type Target struct {
	Scheme string // "unix", "serial" or "ble"
	Addr   string
}

// ErrNotAvailable is the cause of a Dial to a target kind this build has
// no driver for.
var ErrNotAvailable = errors.New("not available in this build")

// ParseTarget parses unix:PATH, serial:DEV[@BAUD] or ble:ADDR. Paths must be
// absolute. ble parses, but dialing it fails with ErrNotAvailable: this
// build carries no Bluetooth stack (docs/nexting.md, "What has and has not
// run").
func ParseTarget(s string) (Target, error) {
	scheme, addr, ok := strings.Cut(s, ":")
	if !ok || addr == "" {
		return Target{}, fmt.Errorf("approval device %q: want unix:PATH, serial:DEV or ble:ADDR", s)
	}
	t := Target{Scheme: scheme, Addr: addr}
	switch scheme {
	case "unix":
		if !strings.HasPrefix(addr, "/") {
			return Target{}, fmt.Errorf("approval device %q: the socket path must be absolute", s)
		}
	case "serial":
		dev, _, err := serialAddr(addr)
		if err != nil {
			return Target{}, fmt.Errorf("approval device %q: %v", s, err)
		}
		if !strings.HasPrefix(dev, "/") {
			return Target{}, fmt.Errorf("approval device %q: the serial device path must be absolute", s)
		}
	case "ble":
	default:
		return Target{}, fmt.Errorf("approval device %q: unknown kind %q; want unix:PATH, serial:DEV or ble:ADDR", s, scheme)
	}
	return t, nil
}

func (t Target) String() string { return t.Scheme + ":" + t.Addr }

// Available reports nil when this build can dial t, else why not.
func (t Target) Available() error {
	switch t.Scheme {
	case "unix", "serial":
		return nil
	case "ble":
		return fmt.Errorf("approval device %s: Bluetooth LE is %w (no Bluetooth stack is compiled in); use unix:PATH", t, ErrNotAvailable)
	}
	return fmt.Errorf("approval device %s: unknown kind", t)
}

// Dial connects to the device. For unix it checks that the process on the
// other end runs as this user or as root (see checkPeer): whoever answers
// on that socket decides what runs.
func (t Target) Dial(ctx context.Context) (io.ReadWriteCloser, error) {
	if err := t.Available(); err != nil {
		return nil, err
	}
	if t.Scheme == "serial" {
		return dialSerial(t)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", t.Addr)
	if err != nil {
		return nil, err
	}
	uc := c.(*net.UnixConn)
	if err := checkPeer(uc, t.Addr); err != nil {
		c.Close()
		return nil, fmt.Errorf("approval device %s: %w", t, err)
	}
	return uc, nil
}
