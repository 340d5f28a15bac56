package bleadapter

import (
	"strings"
	"testing"
)

func TestParseAddress(t *testing.T) {
	for in, want := range map[string]string{
		"AA:BB:CC:DD:EE:FF": "AA:BB:CC:DD:EE:FF",
		"aa:bb:cc:dd:ee:ff": "AA:BB:CC:DD:EE:FF",
		"01:23:45:67:89:aB": "01:23:45:67:89:AB",
		"00:00:00:00:00:00": "00:00:00:00:00:00",
	} {
		if got, err := ParseAddress(in); err != nil || got != want {
			t.Errorf("ParseAddress(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, says := range map[string]string{
		"":                                     "six two-digit hex bytes",
		"AA:BB:CC:DD:EE":                       "six two-digit hex bytes",
		"AA:BB:CC:DD:EE:FF:00":                 "six two-digit hex bytes",
		"AABBCCDDEEFF":                         "six two-digit hex bytes",
		"AA:BB:CC:DD:EE:F":                     "six two-digit hex bytes",
		"AA-BB-CC-DD-EE-FF":                    "colon at position 3",
		"AA:BB:CC:DD:EEFF0":                    "colon at position 15",
		"AAB:BC:CD:DE:EF:F":                    "colon at position 3",
		"GA:BB:CC:DD:EE:FF":                    `'G' is not a hex digit`,
		"AA:BB:CC:DD:EE: F":                    `' ' is not a hex digit`,
		"hci0/dev_AA_BB_CC":                    "six two-digit hex bytes",
		"6eadc0de-0001-4a21-9c5e-1b7f3d9e42a0": "macOS",
	} {
		_, err := ParseAddress(in)
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("ParseAddress(%q): %v; want an error saying %q", in, err, says)
		}
	}
}

func TestDevicePath(t *testing.T) {
	if got := devicePath("/org/bluez/hci0", "AA:BB:CC:DD:EE:0F"); got != "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_0F" {
		t.Fatal(got)
	}
}
