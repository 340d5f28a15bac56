package client_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/lanetest"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/store"
)

// laneWithDevices is a real lane (real HTTP, real SQLite) whose one
// identity has n devices registered straight in the store; it returns the
// lane's URL, the identity's key and the device ids in the registry's order.
func laneWithDevices(t *testing.T, n int) (string, string, []string) {
	t.Helper()
	st := tempStore(t)
	idn, key, err := lane.CreateIdentity(t.Context(), st, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lanetest.RegisterDevices(t.Context(), st, idn.ID, n); err != nil {
		t.Fatal(err)
	}
	all, err := st.ListDevices(t.Context(), idn.ID, store.DevicePage{})
	if err != nil || len(all) != n {
		t.Fatalf("%d devices registered, %v", len(all), err)
	}
	ids := make([]string, n)
	for i, d := range all {
		ids[i] = d.ID
	}
	return serveLane(t, st), key, ids
}

func deviceIDs(devs []api.Device) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.DeviceID
	}
	return out
}

// Devices keeps returning every device: 1,200 are three pages of the
// lane's default 500, followed to the end, each device once, in order.
func TestDevicesFollowsNextToTheEnd(t *testing.T) {
	base, key, want := laneWithDevices(t, 1200)
	c := clientOf(t, base, key)
	first, err := c.DevicesPage(t.Context(), client.DevicesOptions{})
	if err != nil || len(first.Devices) != 500 || first.Next == "" {
		t.Fatalf("the first page: %d devices, next %q, %v; want 500 and a next", len(first.Devices), first.Next, err)
	}
	all, err := c.Devices(t.Context())
	if err != nil || !slices.Equal(deviceIDs(all), want) {
		t.Fatalf("Devices: %d devices, %v; want the registry's %d in order", len(all), err, len(want))
	}
	small, err := c.AllDevices(t.Context(), client.DevicesOptions{Limit: 7, After: want[1000]})
	if err != nil || !slices.Equal(deviceIDs(small), want[1001:]) {
		t.Fatalf("AllDevices after the 1001st by 7: %d devices, %v; want the last 199", len(small), err)
	}
	last, err := c.DevicesPage(t.Context(), client.DevicesOptions{Limit: 200, After: want[999]})
	if err != nil || len(last.Devices) != 200 || last.Next != "" {
		t.Fatalf("the last page: %d devices, next %q, %v; want 200 and no next", len(last.Devices), last.Next, err)
	}
	online, err := c.AllDevices(t.Context(), client.DevicesOptions{Online: true, Limit: 3})
	if err != nil || len(online) != 0 {
		t.Fatalf("online: %d devices, %v; want none (no executor is connected)", len(online), err)
	}
	_, err = c.DevicesPage(t.Context(), client.DevicesOptions{Limit: 1001})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 400 || ce.Code != api.CodeFieldInvalid {
		t.Fatalf("limit 1001: %v; want a 400 %s", err, api.CodeFieldInvalid)
	}
}
