// Package bleadapter connects a host to a nexting approval device over
// Bluetooth LE: a nexting.BLELink on tinygo.org/x/bluetooth (v0.16.0),
// which on Linux talks to BlueZ over the system D-Bus in pure Go. It is its
// own package so that nexting itself — the codec device makers use — pulls
// in no Bluetooth stack and no D-Bus.
//
//	link, err := bleadapter.Dial(ctx, "AA:BB:CC:DD:EE:FF")
//	s, err := nexting.OpenBLE(ctx, link, nexting.SessionConfig{})
//
// Where to start:
//
//   - link.go: Link, the nexting.BLELink, over a small internal peripheral
//     interface; the disconnect, notification and MTU bookkeeping, which the
//     tests drive with a fake peripheral.
//   - bluez_linux.go: Dial and the peripheral over tinygo and BlueZ.
//     signals_linux.go: which D-Bus signals are believed.
//   - security.go: the bond check. address.go: ParseAddress.
//   - dial_other.go: every other platform: Supported is false, Dial
//     returns ErrUnsupported.
//
// Security. The spec allows approval traffic only on an encrypted, bonded
// link. BlueZ's D-Bus API does not say whether a live link is encrypted,
// so what Dial checks is BlueZ's record of the device (org.bluez.Device1):
// Paired, Bonded where BlueZ has that property, and not CablePairing —
// before connecting, again once connected, and for the life of the link
// (losing any of them ends it). It never pairs: pairing and bonding are
// done once with bluetoothctl. The encryption itself is BlueZ's: it
// connects to a paired LE device at security level medium, so the kernel
// encrypts the ATT channel with the stored key before any traffic, or the
// connection fails. Whether that key is authenticated (passkey or numeric
// comparison) or Just Works depends on how it was paired, which BlueZ does
// not report either. Signals are believed only from the bus name that
// owned org.bluez when the link was set up: the system bus lets any local
// process emit signals, and tinygo's EnableNotifications does not check
// the sender, so this package subscribes to the uplink itself.
// docs/nexting.md ("BLE host adapter") has the whole list.
package bleadapter
