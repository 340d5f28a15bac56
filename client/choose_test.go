package client_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
)

func TestChooseDeviceTakesAnIDOrAUniqueName(t *testing.T) {
	const (
		a = "dev_01KBX0000000000000000000AA"
		b = "dev_01KBX0000000000000000000BB"
		c = "dev_01KBX0000000000000000000CC"
		d = "dev_01KBX0000000000000000000DD"
	)
	devs := []api.Device{
		{DeviceID: a, DisplayName: "laptop", Revoked: true},
		{DeviceID: b, DisplayName: "laptop"},
		{DeviceID: c, DisplayName: "ci"},
		{DeviceID: d, DisplayName: "ci"},
	}
	for _, tc := range []struct {
		want, got string
		ambiguous []string
	}{
		{want: a, got: a},        // an id, revoked or not
		{want: "laptop", got: b}, // the live one of the name before the revoked one
		{want: "ci", ambiguous: []string{c, d}},
		{want: "nope"},
		{want: ""}, // two live devices and none named
	} {
		dev, err := client.ChooseDevice(devs, tc.want)
		var ce *client.ChooseError
		switch {
		case tc.got != "" && (err != nil || dev.DeviceID != tc.got):
			t.Errorf("%q: %v %v, want %s", tc.want, dev.DeviceID, err, tc.got)
		case tc.got == "" && !errors.As(err, &ce):
			t.Errorf("%q: %v %v, want a ChooseError", tc.want, dev.DeviceID, err)
		case tc.got == "" && !slices.Equal(ce.Ambiguous, tc.ambiguous):
			t.Errorf("%q: ambiguous %v, want %v (%v)", tc.want, ce.Ambiguous, tc.ambiguous, err)
		}
	}
	// A revoked device is still found by its name when no live one has it.
	if dev, err := client.ChooseDevice(devs[:1], "laptop"); err != nil || dev.DeviceID != a {
		t.Errorf("a revoked device's name: %v %v", dev.DeviceID, err)
	}
	if !client.IsDeviceID(a) || client.IsDeviceID("laptop") || client.IsDeviceID("dev_laptop") {
		t.Error("IsDeviceID")
	}
}
