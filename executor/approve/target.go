package approve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/sema-agent/sema/nexting"
	"github.com/sema-agent/sema/nexting/bleadapter"
)

// Target is where the approval device is reached, as given to
// `sema device serve --approve`: unix:PATH (a stream socket the device, or
// `sema nexting sim`, listens on), serial:DEV[@BAUD] (a serial port, 8N1,
// 115200 baud unless given), or ble:ADDR (a Bluetooth LE device the host
// has paired and bonded with, by its address AA:BB:CC:DD:EE:FF; Linux with
// BlueZ only).
type Target struct {
	Scheme string // "unix", "serial" or "ble"
	Addr   string
}

// ErrNotAvailable is the cause of an Open or Dial to a target kind this
// build has no driver for: ble:ADDR on every platform but Linux.
var ErrNotAvailable = errors.New("not available in this build")

// ParseTarget parses unix:PATH, serial:DEV[@BAUD] or ble:ADDR. Paths must be
// absolute; ADDR must be a Bluetooth address, six hex bytes separated by
// colons (bleadapter.ParseAddress; kept upper case). A ble target parses on
// every platform; Available says whether this build can reach it.
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
		a, err := bleadapter.ParseAddress(addr)
		if err != nil {
			return Target{}, fmt.Errorf("approval device %q: %v", s, err)
		}
		t.Addr = a
	default:
		return Target{}, fmt.Errorf("approval device %q: unknown kind %q; want unix:PATH, serial:DEV or ble:ADDR", s, scheme)
	}
	return t, nil
}

func (t Target) String() string { return t.Scheme + ":" + t.Addr }

// ConnectTimeout is how long one connection attempt to t may take
// (Config.ConnectTimeout): 0, the gate's default, except for ble, where
// connecting and BlueZ's service discovery (which tinygo alone waits up to
// 10 s for) take longer than a socket.
func (t Target) ConnectTimeout() time.Duration {
	if t.Scheme == "ble" {
		return 30 * time.Second
	}
	return 0
}

// Available reports nil when this build can dial t, else why not.
func (t Target) Available() error {
	switch t.Scheme {
	case "unix", "serial":
		return nil
	case "ble":
		if !bleadapter.Supported {
			return fmt.Errorf("approval device %s: Bluetooth LE is %w (%v); use unix:PATH or serial:DEV", t, ErrNotAvailable, bleadapter.ErrUnsupported)
		}
		return nil
	}
	return fmt.Errorf("approval device %s: unknown kind", t)
}

// Open connects to the device and starts a host session on it
// (Config.Open). unix and serial are byte streams: Dial, then
// nexting.OpenStream, which reads the Device Info line first. ble is a
// GATT link: bleadapter.Dial (it refuses a device the host has not paired
// and bonded with), then nexting.OpenBLE, which reads the Device Info
// characteristic.
func (t Target) Open(ctx context.Context, cfg nexting.SessionConfig) (*nexting.Session, error) {
	if t.Scheme != "ble" {
		rw, err := t.Dial(ctx)
		if err != nil {
			return nil, err
		}
		return nexting.OpenStream(ctx, rw, cfg)
	}
	if err := t.Available(); err != nil {
		return nil, err
	}
	link, err := bleadapter.Dial(ctx, t.Addr)
	if err != nil {
		return nil, fmt.Errorf("approval device %s: %w", t, err)
	}
	s, err := nexting.OpenBLE(ctx, link, cfg)
	if err != nil {
		return nil, fmt.Errorf("approval device %s: %w", t, err)
	}
	return s, nil
}

// Dial connects to a byte-stream device (unix or serial); a ble target is
// not one (use Open). For unix it checks that the process on the other end
// runs as this user or as root (see checkPeer): whoever answers on that
// socket decides what runs.
func (t Target) Dial(ctx context.Context) (io.ReadWriteCloser, error) {
	if err := t.Available(); err != nil {
		return nil, err
	}
	switch t.Scheme {
	case "serial":
		return dialSerial(t)
	case "ble":
		return nil, fmt.Errorf("approval device %s: a Bluetooth LE device is a GATT link, not a byte stream; use Target.Open", t)
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
