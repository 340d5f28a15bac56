package bleadapter

import (
	"errors"
	"fmt"
)

// ErrNotBonded is the cause of a Dial to a device the host has not paired
// and bonded with: the spec allows approval traffic only on an encrypted,
// bonded link, and this package never pairs by itself.
var ErrNotBonded = errors.New("not paired and bonded with this host")

// pairHint says how to bond once, with BlueZ's own tool.
const pairHint = "pair and bond it once with bluetoothctl (scan le; pair ADDR; trust ADDR), then try again"

// bondState is what BlueZ records about a device's keys: the Paired,
// Bonded and CablePairing properties of org.bluez.Device1.
type bondState struct {
	known        bool  // BlueZ has an object for the device at all
	paired       bool  // keys were exchanged (encryption is possible)
	bonded       *bool // the keys are stored; nil where BlueZ has no Bonded property (older releases)
	cablePairing bool  // "BlueZ will establish a connection without enforcing encryption"
}

// check refuses a device whose link BlueZ would not encrypt with stored
// keys. BlueZ connects to a paired LE device at security level medium (the
// ATT channel is encrypted with the stored long-term key before use, or
// the connection fails); that is what makes the link encrypted, and it is
// not observable through BlueZ's D-Bus API, so this is the check the host
// can make.
func (b bondState) check(addr string) error {
	switch {
	case !b.known:
		return fmt.Errorf("device %s: %w: BlueZ does not know it; %s", addr, ErrNotBonded, pairHint)
	case b.cablePairing:
		return fmt.Errorf("device %s: %w: it is cable-paired, and BlueZ does not enforce encryption for such devices", addr, ErrNotBonded)
	case !b.paired:
		return fmt.Errorf("device %s: %w: BlueZ knows it but it is not paired, so the link would not be encrypted; %s", addr, ErrNotBonded, pairHint)
	case b.bonded != nil && !*b.bonded:
		return fmt.Errorf("device %s: %w: it is paired but not bonded (BlueZ stored no keys); %s", addr, ErrNotBonded, pairHint)
	}
	return nil
}
