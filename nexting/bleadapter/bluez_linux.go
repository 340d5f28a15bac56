package bleadapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
	"tinygo.org/x/bluetooth"

	"github.com/sema-agent/sema/nexting"
)

// Supported reports whether this build has a stack adapter: on Linux,
// BlueZ over the system D-Bus (pure Go, no cgo).
const Supported = true

// adapterPath is BlueZ's object for tinygo's DefaultAdapter on Linux, the
// first controller.
const adapterPath = "/org/bluez/hci0"

// teardownTimeout bounds each of this package's own D-Bus calls at
// teardown (StopNotify, RemoveMatch).
const teardownTimeout = 3 * time.Second

// slot admits one link at a time in the process, from Dial until the
// link is released: tinygo's DefaultAdapter is one shared value, and a new
// link must not start while BlueZ is still tearing down the last one.
var slot = make(chan struct{}, 1)

// Dial connects to the nexting peripheral at addr (see ParseAddress) and
// returns its Link. It refuses a device BlueZ has not paired and bonded
// with (ErrNotBonded) before connecting, so no traffic ever crosses an
// unencrypted link; then it connects (tinygo Adapter.Connect), waits for
// BlueZ's service discovery (Device.DiscoverServices), finds the nexting
// service and its three characteristics and checks their properties, and
// checks the bond again.
//
// ctx bounds the wait: tinygo's calls cannot be cancelled, so an attempt
// abandoned at ctx's end finishes in the background and disconnects what
// it connected; the next Dial waits for it. Without a system D-Bus, BlueZ
// or an adapter, the error wraps ErrNoAdapter and says which.
func Dial(ctx context.Context, addr string) (*Link, error) {
	addr, err := ParseAddress(addr)
	if err != nil {
		return nil, err
	}
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the previous Bluetooth link to close: %w", context.Cause(ctx))
	}
	type result struct {
		p   *bluez
		err error
	}
	res := make(chan result) // unbuffered: a result is either taken or abandoned
	abandoned := make(chan struct{})
	go func() {
		p, err := connect(ctx, addr)
		select {
		case res <- result{p, err}:
		case <-abandoned:
			if p != nil {
				_ = p.disconnect()
				p.release()
			} else {
				<-slot
			}
		}
	}()
	select {
	case r := <-res:
		if r.err != nil {
			<-slot
			return nil, r.err
		}
		return newLink(r.p), nil
	case <-ctx.Done():
		close(abandoned)
		return nil, fmt.Errorf("connecting to %s: %w", addr, context.Cause(ctx))
	}
}

// bluez is the peripheral over tinygo.org/x/bluetooth and BlueZ. tinygo
// does the adapter, the connection, service discovery, the downlink write
// with response (DeviceCharacteristic.Write: WriteValue type "request";
// WriteWithoutResponse is "command"), the Device Info read, the MTU
// (GetMTU) and the disconnection. This package does, on the same D-Bus
// connection, what tinygo does not offer or does unsafely: the bond check,
// the link watch (tinygo's connect handler is called on Linux only from
// Connect and from Device.Disconnect, never when the link drops), and the
// uplink subscription (see signalFilter).
type bluez struct {
	bus    *dbus.Conn
	addr   string
	filter signalFilter

	dev      bluetooth.Device
	downlink bluetooth.DeviceCharacteristic
	info     bluetooth.DeviceCharacteristic

	ctx    context.Context // ends at release: this package's calls
	cancel context.CancelFunc

	sigs     chan *dbus.Signal
	added    [][]dbus.MatchOption
	stop     chan struct{} // ends dispatch
	done     chan struct{} // closed when dispatch has returned
	drop     chan struct{}
	dropOnce sync.Once

	mu sync.Mutex
	fn func([]byte) // the uplink callback, nil when not subscribed
}

// connect sets a link up; on error it has undone what it did (the slot
// stays taken: the caller frees it).
func connect(ctx context.Context, addr string) (*bluez, error) {
	bus, err := dbus.SystemBus()
	if err != nil {
		return nil, fmt.Errorf("%w: the system D-Bus is not reachable (BlueZ runs on it): %w", ErrNoAdapter, err)
	}
	a := bluetooth.DefaultAdapter
	if err := a.Enable(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoAdapter, err)
	}
	var owner string
	if err := bus.BusObject().CallWithContext(ctx, busName+".GetNameOwner", 0, bluezName).Store(&owner); err != nil {
		return nil, fmt.Errorf("%w: BlueZ is not on the system D-Bus: %w", ErrNoAdapter, err)
	}
	mac, err := bluetooth.ParseMAC(addr)
	if err != nil {
		return nil, err
	}
	p := &bluez{bus: bus, addr: addr, drop: make(chan struct{}),
		filter: signalFilter{owner: owner, dev: dbus.ObjectPath(devicePath(adapterPath, addr))}}
	st, _, err := p.deviceState(ctx)
	if err == nil {
		err = st.check(addr)
	}
	if err != nil {
		return nil, err
	}
	p.dev, err = a.Connect(bluetooth.Address{MACAddress: bluetooth.MACAddress{MAC: mac}}, bluetooth.ConnectionParams{})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if err = p.discover(ctx); err == nil {
		err = p.watch(ctx)
	}
	if err == nil { // watching: a drop from now on is signalled
		var connected bool
		if st, connected, err = p.deviceState(ctx); err == nil {
			if err = st.check(addr); err == nil && !connected {
				err = fmt.Errorf("device %s disconnected while the link was set up", addr)
			}
		}
	}
	if err != nil {
		_ = p.disconnect()
		p.cleanup()
		return nil, err
	}
	return p, nil
}

// deviceState reads BlueZ's record of the device: its bond and whether it
// is connected.
func (p *bluez) deviceState(ctx context.Context) (bondState, bool, error) {
	var props map[string]dbus.Variant
	err := p.bus.Object(bluezName, p.filter.dev).CallWithContext(ctx, ifaceProps+".GetAll", 0, ifaceDevice).Store(&props)
	var de dbus.Error
	if errors.As(err, &de) && (de.Name == "org.freedesktop.DBus.Error.UnknownObject" ||
		de.Name == "org.freedesktop.DBus.Error.UnknownMethod" || de.Name == "org.freedesktop.DBus.Error.InvalidArgs") {
		return bondState{}, false, nil
	}
	if err != nil {
		return bondState{}, false, fmt.Errorf("reading BlueZ's record of device %s: %w", p.addr, err)
	}
	b := bondState{known: true}
	b.paired, _ = props["Paired"].Value().(bool)
	if v, ok := props["Bonded"].Value().(bool); ok {
		b.bonded = &v
	}
	b.cablePairing, _ = props["CablePairing"].Value().(bool)
	connected, _ := props["Connected"].Value().(bool)
	return b, connected, nil
}

// characteristic roles: UUID and the GATT property each must have.
var roles = []struct {
	name, uuid, prop string
}{
	{"downlink", nexting.BLEDownlinkUUID, "write"},
	{"uplink", nexting.BLEUplinkUUID, "notify"},
	{"Device Info", nexting.BLEDeviceInfoUUID, "read"},
}

// discover finds the nexting service and its characteristics: through
// tinygo (which waits for BlueZ's discovery) for the downlink and Device
// Info, and in BlueZ's object tree for the uplink's path and everyone's
// properties.
func (p *bluez) discover(ctx context.Context) error {
	uuids := make([]bluetooth.UUID, 1+len(roles))
	for i, u := range append([]string{nexting.BLEServiceUUID}, roles[0].uuid, roles[1].uuid, roles[2].uuid) {
		var err error
		if uuids[i], err = bluetooth.ParseUUID(u); err != nil {
			return err
		}
	}
	svcs, err := p.dev.DiscoverServices(uuids[:1])
	if err != nil {
		return fmt.Errorf("device %s: the nexting service %s: %w", p.addr, nexting.BLEServiceUUID, err)
	}
	chars, err := svcs[0].DiscoverCharacteristics(uuids[1:])
	if err != nil {
		return fmt.Errorf("device %s: the characteristics of the nexting service: %w", p.addr, err)
	}
	p.downlink, p.info = chars[0], chars[2]

	var objs map[dbus.ObjectPath]map[string]map[string]dbus.Variant
	if err := p.bus.Object(bluezName, "/").CallWithContext(ctx, ifaceObjMgr+".GetManagedObjects", 0).Store(&objs); err != nil {
		return fmt.Errorf("reading BlueZ's objects: %w", err)
	}
	var svc []dbus.ObjectPath
	for path, ifaces := range objs {
		s, ok := ifaces[ifaceGattSv]
		if u, _ := s["UUID"].Value().(string); ok && within(path, p.filter.dev) && strings.EqualFold(u, nexting.BLEServiceUUID) {
			svc = append(svc, path)
		}
	}
	if len(svc) != 1 {
		return fmt.Errorf("device %s has %d nexting services (%s); want one", p.addr, len(svc), nexting.BLEServiceUUID)
	}
	for _, r := range roles {
		var found []dbus.ObjectPath
		var flags []string
		for path, ifaces := range objs {
			c, ok := ifaces[ifaceGattCh]
			sp, _ := c["Service"].Value().(dbus.ObjectPath)
			u, _ := c["UUID"].Value().(string)
			if ok && sp == svc[0] && strings.EqualFold(u, r.uuid) {
				found = append(found, path)
				flags, _ = c["Flags"].Value().([]string)
			}
		}
		if len(found) != 1 {
			return fmt.Errorf("device %s: the nexting service has %d %s characteristics (%s); want one", p.addr, len(found), r.name, r.uuid)
		}
		if !slices.Contains(flags, r.prop) {
			return fmt.Errorf("device %s: the %s characteristic does not allow %q (it has %v)", p.addr, r.name, r.prop, flags)
		}
		if r.uuid == nexting.BLEUplinkUUID {
			p.filter.uplink = found[0]
		}
	}
	return nil
}

// watch routes the link's signals to dispatch.
func (p *bluez) watch(ctx context.Context) error {
	// Large enough that godbus never falls back to delivering on extra
	// goroutines, which would reorder notifications: dispatch never blocks.
	p.sigs = make(chan *dbus.Signal, 256)
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	p.bus.Signal(p.sigs)
	go p.dispatch()
	for _, r := range p.filter.rules() {
		if err := p.bus.AddMatchSignalContext(ctx, r...); err != nil {
			return fmt.Errorf("watching device %s on D-Bus: %w", p.addr, err)
		}
		p.added = append(p.added, r)
	}
	return nil
}

func (p *bluez) dispatch() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case sig, ok := <-p.sigs:
			if !ok { // the bus connection closed
				p.markDropped()
				return
			}
			value, down := p.filter.classify(sig)
			if value != nil {
				p.mu.Lock()
				fn := p.fn
				p.mu.Unlock()
				if fn != nil {
					fn(value)
				}
			}
			if down {
				p.markDropped()
			}
		}
	}
}

func (p *bluez) markDropped() { p.dropOnce.Do(func() { close(p.drop) }) }

func (p *bluez) mtu() (int, error) {
	m, err := p.downlink.GetMTU()
	return int(m), err
}

func (p *bluez) readInfo(buf []byte) (int, error) { return p.info.Read(buf) }

func (p *bluez) write(chunk []byte) error {
	_, err := p.downlink.Write(chunk)
	return err
}

func (p *bluez) subscribe(fn func([]byte)) error {
	p.mu.Lock()
	p.fn = fn
	p.mu.Unlock()
	return p.bus.Object(bluezName, p.filter.uplink).CallWithContext(p.ctx, ifaceGattCh+".StartNotify", 0).Err
}

func (p *bluez) unsubscribe() error {
	p.mu.Lock()
	p.fn = nil
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(p.ctx, teardownTimeout)
	defer cancel()
	return p.bus.Object(bluezName, p.filter.uplink).CallWithContext(ctx, ifaceGattCh+".StopNotify", 0).Err
}

// disconnect is tinygo's Device.Disconnect: BlueZ's Device1.Disconnect,
// which answers once the link is down.
func (p *bluez) disconnect() error { return p.dev.Disconnect() }

func (p *bluez) dropped() <-chan struct{} { return p.drop }

func (p *bluez) release() {
	p.cleanup()
	<-slot
}

// cleanup stops the watch and this package's calls.
func (p *bluez) cleanup() {
	if p.sigs != nil {
		p.bus.RemoveSignal(p.sigs) // waits for godbus's pending deliveries
		ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
		for _, r := range p.added {
			_ = p.bus.RemoveMatchSignalContext(ctx, r...)
		}
		cancel()
		close(p.stop)
		<-p.done
	}
	p.cancel()
}
