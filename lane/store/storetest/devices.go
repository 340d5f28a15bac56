package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sema-agent/sema/lane/store"
)

// testDevicesArePagedInListOrder: pages taken with After and Limit are the
// owner's list, oldest first, each device exactly once, also across devices
// created in the same millisecond (ordered by id); a cursor that is not a
// device of the owner is ErrNotFound.
func testDevicesArePagedInListOrder(t *testing.T, s Backend) {
	alice, bob := newIdentity(t, s, "alice"), newIdentity(t, s, "bob")
	var bobs store.Device
	for i := range 7 {
		register(t, s, alice.ID)
		if i == 3 {
			bobs = register(t, s, bob.ID)
		}
	}
	all, err := s.ListDevices(ctx(t), alice.ID, store.DevicePage{})
	if err != nil || len(all) != 7 {
		t.Fatalf("alice's devices: %d, %v; want 7", len(all), err)
	}
	byAge := func(a, b store.Device) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	}
	if !slices.IsSortedFunc(all, byAge) {
		t.Fatalf("alice's devices are not oldest first: %v", deviceIDs(all))
	}
	assertPages(t, s, alice.ID, all)

	// The same millisecond for every device: the order is the ids'.
	if _, err := s.DB().ExecContext(ctx(t), `UPDATE devices SET created_ms = 1000 WHERE owner_id = '`+alice.ID+`'`); err != nil {
		t.Fatal(err)
	}
	tied, err := s.ListDevices(ctx(t), alice.ID, store.DevicePage{})
	if err != nil || !slices.IsSortedFunc(tied, func(a, b store.Device) int { return strings.Compare(a.ID, b.ID) }) {
		t.Fatalf("devices of one millisecond: %v, %v; want them by id", deviceIDs(tied), err)
	}
	assertPages(t, s, alice.ID, tied)

	for _, after := range []string{bobs.ID, "dev_01J8ZQ4T9X0000000000000000"} {
		if got, err := s.ListDevices(ctx(t), alice.ID, store.DevicePage{After: after, Limit: 3}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("after %s (not alice's): %v, %v; want ErrNotFound", after, deviceIDs(got), err)
		}
	}
}

// assertPages reads an owner's devices in pages of every size from 1 to
// len(want)+1 and checks they add up to want, in order.
func assertPages(t *testing.T, s Backend, ownerID string, want []store.Device) {
	t.Helper()
	for limit := 1; limit <= len(want)+1; limit++ {
		var got []store.Device
		after := ""
		for range len(want) + 2 {
			page, err := s.ListDevices(ctx(t), ownerID, store.DevicePage{After: after, Limit: limit})
			if err != nil || len(page) > limit {
				t.Fatalf("limit %d after %q: %d devices, %v", limit, after, len(page), err)
			}
			if len(page) == 0 {
				break
			}
			got, after = append(got, page...), page[len(page)-1].ID
		}
		if !slices.Equal(deviceIDs(got), deviceIDs(want)) {
			t.Fatalf("pages of %d: %v; want %v", limit, deviceIDs(got), deviceIDs(want))
		}
	}
}

func deviceIDs(ds []store.Device) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}
