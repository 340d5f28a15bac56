package bleadapter

import (
	"errors"
	"strings"
	"testing"
)

// Only a device BlueZ has paired and (where it says so) bonded, and not
// cable-paired, is accepted; each refusal says why and how to pair.
func TestBondCheck(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		st   bondState
		says string // "" when accepted
	}{
		{bondState{known: true, paired: true, bonded: &yes}, ""},
		{bondState{known: true, paired: true}, ""}, // BlueZ without the Bonded property
		{bondState{}, "BlueZ does not know it; pair and bond it once with bluetoothctl"},
		{bondState{known: true}, "not paired, so the link would not be encrypted; pair"},
		{bondState{known: true, bonded: &yes}, "not paired"},
		{bondState{known: true, paired: true, bonded: &no}, "paired but not bonded"},
		{bondState{known: true, paired: true, bonded: &yes, cablePairing: true}, "cable-paired"},
	} {
		err := c.st.check("AA:BB:CC:DD:EE:FF")
		switch {
		case c.says == "" && err != nil:
			t.Errorf("%+v refused: %v", c.st, err)
		case c.says != "" && (!errors.Is(err, ErrNotBonded) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "AA:BB:CC:DD:EE:FF")):
			t.Errorf("%+v: %v; want ErrNotBonded saying %q", c.st, err, c.says)
		}
	}
}
