package bleadapter

import (
	"errors"
	"fmt"
	"sync"

	"github.com/sema-agent/sema/nexting"
)

// ErrDisconnected is returned by a Link's methods once the link is down
// (Disconnect, or the stack reported it gone).
var ErrDisconnected = errors.New("bleadapter: the BLE link is down")

// peripheral is what a Link needs from a BLE stack once it has connected
// to a nexting peripheral and found its three characteristics. bluez_linux.go
// implements it over tinygo.org/x/bluetooth and BlueZ's D-Bus API; the
// tests fill it with a fake. Its blocking calls need not return promptly
// after disconnect: the Link runs them so that its own methods do.
type peripheral interface {
	// mtu is the link's ATT MTU as the stack reports it (0 or an error
	// when it does not know).
	mtu() (int, error)
	// readInfo reads the whole Device Info value into buf and returns its
	// length, which exceeds len(buf) when buf was too short (then buf
	// holds a prefix): tinygo's DeviceCharacteristic.Read contract.
	readInfo(buf []byte) (int, error)
	// write writes one chunk to the downlink with response.
	write(chunk []byte) error
	// subscribe enables uplink notifications; fn is called once per
	// notification, in order, on the stack's goroutine, until unsubscribe.
	subscribe(fn func([]byte)) error
	// unsubscribe disables them. A call of fn may still be under way.
	unsubscribe() error
	// disconnect asks the stack to end the link.
	disconnect() error
	// dropped is closed when the stack reports the link gone.
	dropped() <-chan struct{}
	// release frees what the stack adapter holds; called once, last.
	release()
}

// Link is a connected, bonded GATT link to a nexting peripheral: a
// nexting.BLELink. Use it with nexting.OpenBLE. Its methods are safe for
// concurrent use. Once the link is down (Disconnect, or the stack reported
// it gone), every method returns at once: a stack call still under way is
// left to finish on its own goroutine and its result is dropped.
type Link struct {
	p peripheral

	mu         sync.Mutex // held while an uplink notification is delivered
	down       chan struct{}
	isDown     bool // guarded by mu; true once down is closed
	notify     func([]byte)
	subscribed bool

	once      sync.Once
	watchDone chan struct{}
	calls     sync.WaitGroup // stack calls in flight, possibly abandoned
}

var _ nexting.BLELink = (*Link)(nil)

// newLink wraps a connected peripheral and starts watching it.
func newLink(p peripheral) *Link {
	l := &Link{p: p, down: make(chan struct{}), watchDone: make(chan struct{})}
	go l.watch()
	return l
}

// watch turns the stack's report of a lost link into a shutdown.
func (l *Link) watch() {
	defer close(l.watchDone)
	select {
	case <-l.p.dropped():
		l.shutdown(false)
	case <-l.down:
	}
}

// MTU implements nexting.BLELink: the ATT MTU the stack reports, or
// nexting.MinATTMTU (chunks of 20 bytes, which fit any link) when the
// stack cannot tell — BlueZ before the MTU property, an error, a value
// below the minimum — or the link is down.
func (l *Link) MTU() int {
	var m int
	err := l.call(func() (err error) {
		m, err = l.p.mtu()
		return err
	})
	if err != nil || m < nexting.MinATTMTU {
		return nexting.MinATTMTU
	}
	return m
}

// ReadDeviceInfo implements nexting.BLELink. The stack reads the whole
// value (BlueZ follows a Read with Read Blob requests while the value
// fills the PDU); a value longer than nexting.MaxDeviceInfoBytes is an
// error, never cut.
func (l *Link) ReadDeviceInfo() ([]byte, error) {
	buf := make([]byte, nexting.MaxDeviceInfoBytes+1)
	var n int
	err := l.call(func() (err error) {
		n, err = l.p.readInfo(buf)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bleadapter: reading Device Info: %w", err)
	}
	if n > nexting.MaxDeviceInfoBytes {
		return nil, fmt.Errorf("bleadapter: the Device Info value is longer than %d bytes", nexting.MaxDeviceInfoBytes)
	}
	return buf[:n:n], nil
}

// WriteDownlink implements nexting.BLELink: one ATT Write Request; it
// returns once the peripheral acknowledged it, with the stack's error, or
// ErrDisconnected at once when the link goes down meanwhile.
func (l *Link) WriteDownlink(chunk []byte) error {
	if err := l.call(func() error { return l.p.write(chunk) }); err != nil {
		return fmt.Errorf("bleadapter: downlink write: %w", err)
	}
	return nil
}

// SubscribeUplink implements nexting.BLELink. notify is never called once
// Disconnected is closed, and must not call back into the Link: a
// notification being delivered holds up the shutdown until it returns.
// It may be called once.
func (l *Link) SubscribeUplink(notify func(chunk []byte)) error {
	l.mu.Lock()
	if l.subscribed {
		l.mu.Unlock()
		return errors.New("bleadapter: uplink already subscribed")
	}
	l.subscribed, l.notify = true, notify
	l.mu.Unlock()
	if err := l.call(func() error { return l.p.subscribe(l.deliver) }); err != nil {
		return fmt.Errorf("bleadapter: enabling uplink notifications: %w", err)
	}
	return nil
}

// deliver is the stack's notification callback.
func (l *Link) deliver(chunk []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.isDown {
		return
	}
	l.notify(chunk)
}

// Disconnect implements nexting.BLELink: it ends the link and returns once
// the stack was told (its error, the first time; nil after). Idempotent.
func (l *Link) Disconnect() error {
	err := l.shutdown(true)
	<-l.watchDone
	return err
}

// Disconnected implements nexting.BLELink.
func (l *Link) Disconnected() <-chan struct{} { return l.down }

// shutdown takes the link down once: no notification is delivered after
// it marked the link down, then the stack is told and released. local
// says whether Disconnect asked (only then is the stack's error returned).
func (l *Link) shutdown(local bool) error {
	var err error
	l.once.Do(func() {
		l.mu.Lock()
		l.isDown = true
		close(l.down)
		subscribed := l.subscribed
		l.mu.Unlock()
		if subscribed {
			_ = l.p.unsubscribe()
		}
		// Also after a drop: the stack may have reported the link unusable
		// (keys removed, notifications stopped) while it is still up.
		if derr := l.p.disconnect(); local && derr != nil {
			err = fmt.Errorf("bleadapter: disconnect: %w", derr)
		}
		l.p.release()
	})
	return err
}

// call runs one blocking stack call, returning its error, or
// ErrDisconnected as soon as the link is down.
func (l *Link) call(f func() error) error {
	select {
	case <-l.down:
		return ErrDisconnected
	default:
	}
	done := make(chan error, 1)
	l.calls.Add(1)
	go func() {
		defer l.calls.Done()
		done <- f()
	}()
	select {
	case err := <-done:
		return err
	case <-l.down:
		return ErrDisconnected
	}
}
