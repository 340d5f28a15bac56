package bleadapter

import (
	"errors"
	"testing"
)

// Host is the package's functions behind one value: its address check and
// its availability are the package's.
func TestHostIsThePackage(t *testing.T) {
	var h Host
	if a, err := h.ParseAddress("aa:bb:cc:dd:ee:ff"); err != nil || a != "AA:BB:CC:DD:EE:FF" {
		t.Fatalf("ParseAddress: %q, %v", a, err)
	}
	if _, err := h.ParseAddress("hci0"); err == nil {
		t.Fatal("ParseAddress accepted hci0")
	}
	if err := h.Available(); (err == nil) != Supported || (err != nil && !errors.Is(err, ErrUnsupported)) {
		t.Fatalf("Available: %v with Supported %v", err, Supported)
	}
}
