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

	ble BLE // how a ble target is reached; nil: not in this build
}

// BLE is the host's Bluetooth LE, through which a ble:ADDR target is
// reached. cmd/ passes nexting/bleadapter's (bleadapter.Host), so that this
// package links no Bluetooth stack or D-Bus of its own.
type BLE interface {
	// ParseAddress checks a device address and returns it in the form the
	// host's stack uses.
	ParseAddress(s string) (string, error)
	// Available is nil when this build can reach a BLE device, else why not.
	Available() error
	// Dial connects to the device at addr, as ParseAddress returned it.
	Dial(ctx context.Context, addr string) (nexting.BLELink, error)
}

// ErrNotAvailable is the cause of an Open or Dial to a target kind this
// build has no driver for: ble:ADDR on every platform but Linux.
var ErrNotAvailable = errors.New("not available in this build")

// ParseTarget parses unix:PATH, serial:DEV[@BAUD] or ble:ADDR. Paths must be
// absolute; ADDR must be a Bluetooth address as ble.ParseAddress accepts it
// (bleadapter.Host: six hex bytes separated by colons, kept upper case). A
// ble target parses wherever ble is given; Available says whether this
// build can reach it. ble may be nil when no ble target is expected.
func ParseTarget(s string, ble BLE) (Target, error) {
	scheme, addr, ok := strings.Cut(s, ":")
	if !ok || addr == "" {
		return Target{}, fmt.Errorf("approval device %q: want unix:PATH, serial:DEV or ble:ADDR", s)
	}
	t := Target{Scheme: scheme, Addr: addr, ble: ble}
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
		if ble == nil {
			return Target{}, fmt.Errorf("approval device %q: Bluetooth LE is %w (no Bluetooth transport given); use unix:PATH or serial:DEV", s, ErrNotAvailable)
		}
		a, err := ble.ParseAddress(addr)
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
		if t.ble == nil {
			return fmt.Errorf("approval device %s: Bluetooth LE is %w (no Bluetooth transport given); use unix:PATH or serial:DEV", t, ErrNotAvailable)
		}
		if err := t.ble.Available(); err != nil {
			return fmt.Errorf("approval device %s: Bluetooth LE is %w (%v); use unix:PATH or serial:DEV", t, ErrNotAvailable, err)
		}
		return nil
	}
	return fmt.Errorf("approval device %s: unknown kind", t)
}

// Open connects to the device and starts a host session on it
// (Config.Open). unix and serial are byte streams: Dial, then
// nexting.OpenStream, which reads the Device Info line first. ble is a
// GATT link: the BLE's Dial (bleadapter's refuses a device the host has not
// paired and bonded with), then nexting.OpenBLE, which reads the Device
// Info characteristic.
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
	link, err := t.ble.Dial(ctx, t.Addr)
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
