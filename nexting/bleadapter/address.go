package bleadapter

import (
	"fmt"
	"strings"
)

// ParseAddress checks a Bluetooth device address and returns it in the
// form BlueZ uses: six two-digit hexadecimal bytes separated by colons,
// upper case ("AA:BB:CC:DD:EE:FF"; either case is accepted). It is the
// identity address BlueZ lists for a paired device (`bluetoothctl devices
// Paired`), also for a device that advertises with resolvable private
// addresses.
//
// macOS's CoreBluetooth names a peripheral by a per-host UUID instead of
// its address; there is no macOS adapter in this package, so a UUID is
// refused with a message saying so.
func ParseAddress(s string) (string, error) {
	if looksLikeUUID(s) {
		return "", fmt.Errorf("Bluetooth address %q is a UUID (a macOS CoreBluetooth identifier); want the device's address, six hex bytes like AA:BB:CC:DD:EE:FF (Bluetooth LE needs Linux and BlueZ)", s)
	}
	if len(s) != 17 {
		return "", fmt.Errorf("Bluetooth address %q: want six two-digit hex bytes separated by colons, like AA:BB:CC:DD:EE:FF", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i%3 == 2 {
			if c != ':' {
				return "", fmt.Errorf("Bluetooth address %q: want a colon at position %d (six two-digit hex bytes, like AA:BB:CC:DD:EE:FF)", s, i+1)
			}
			continue
		}
		if !isHex(c) {
			return "", fmt.Errorf("Bluetooth address %q: %q is not a hex digit (want six two-digit hex bytes, like AA:BB:CC:DD:EE:FF)", s, c)
		}
	}
	return strings.ToUpper(s), nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// looksLikeUUID reports the 8-4-4-4-12 hex form.
func looksLikeUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
}

// devicePath is BlueZ's D-Bus object path of the device at addr (in
// ParseAddress form) under the adapter at adapterPath.
func devicePath(adapterPath, addr string) string {
	return adapterPath + "/dev_" + strings.ReplaceAll(addr, ":", "_")
}
