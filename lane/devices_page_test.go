package lane

import (
	"bytes"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
)

// listPages follows GET /v1/devices from query to the end and returns every
// page; it fails the test on a page with next but no device, or beyond
// bound pages.
func (l *wsLane) listPages(query url.Values, bound int) []api.DeviceList {
	l.t.Helper()
	var pages []api.DeviceList
	for range bound {
		r := l.do("GET", "/v1/devices?"+query.Encode(), l.ownerKey, "")
		page := pinShape[api.DeviceList](l.t.(*testing.T), "device page", r.Body)
		if r.Status != 200 {
			l.t.Fatalf("GET /v1/devices?%s: %d %s", query.Encode(), r.Status, r.Body)
		}
		if page.Next == "" && bytes.Contains(r.Body, []byte(`"next"`)) {
			l.t.Fatalf("the last page names an empty next: %s", r.Body)
		}
		pages = append(pages, page)
		if page.Next == "" {
			return pages
		}
		if len(page.Devices) == 0 {
			l.t.Fatalf("a page with next but no device: %s", r.Body)
		}
		query.Set("after", page.Next)
	}
	l.t.Fatalf("the device list did not end within %d pages", bound)
	return nil
}

func pageIDs(pages []api.DeviceList) (out []string, sizes []int) {
	for _, p := range pages {
		sizes = append(sizes, len(p.Devices))
		for _, d := range p.Devices {
			out = append(out, d.DeviceID)
		}
	}
	return out, sizes
}

func (l *wsLane) registryIDs() []string {
	l.t.Helper()
	all, err := l.store.ListDevices(l.t.Context(), l.owner.ID, store.DevicePage{})
	if err != nil {
		l.t.Fatal(err)
	}
	out := make([]string, len(all))
	for i, d := range all {
		out[i] = d.ID
	}
	return out
}

// The device list: ?limit= (default 500), &after= a cursor, a next in the answer
// while a page follows and never at the end, oldest first as the registry.
func TestDeviceListIsPagedOldestFirstAndNextIsAbsentAtTheEnd(t *testing.T) {
	l := newWSLane(t)
	registerDevices(t, l.store, l.owner.ID, 4)
	registerFleet(t, l.store, 2) // another identity's: never listed
	registerDevices(t, l.store, l.owner.ID, 3)
	want := l.registryIDs()
	tests := []struct {
		limit int
		sizes []int
	}{
		{1, []int{1, 1, 1, 1, 1, 1, 1}},
		{3, []int{3, 3, 1}},
		{7, []int{7}}, // exactly one page: no next, no empty page after it
		{8, []int{7}},
		{1000, []int{7}},
	}
	for _, tt := range tests {
		got, sizes := pageIDs(l.listPages(url.Values{"limit": {strconv.Itoa(tt.limit)}}, 10))
		if !slices.Equal(got, want) || !slices.Equal(sizes, tt.sizes) {
			t.Errorf("limit %d: pages of %v holding %v; want pages of %v holding %v", tt.limit, sizes, got, tt.sizes, want)
		}
	}
}

func TestDeviceListDefaultsTo500APage(t *testing.T) {
	l := newWSLane(t)
	registerDevices(t, l.store, l.owner.ID, api.DefaultDevicePage+1)
	got, sizes := pageIDs(l.listPages(url.Values{}, 3))
	if !slices.Equal(sizes, []int{api.DefaultDevicePage, 1}) || !slices.Equal(got, l.registryIDs()) {
		t.Fatalf("pages of %v; want %d then 1, the registry's order", sizes, api.DefaultDevicePage)
	}
}

// ?online=true lists only the devices connected to this replica; paged
// over the registry, its next is absent once no connected device follows.
func TestDeviceListOnlineTrueListsOnlyConnectedDevices(t *testing.T) {
	l := newWSLane(t)
	fleet := registerDevices(t, l.store, l.owner.ID, 6)
	all := l.registryIDs()
	var online []string
	for _, i := range []int{1, 3} {
		j := slices.IndexFunc(fleet, func(d fleetDevice) bool { return d.id == all[i] })
		fd := l.fake(fleet[j])
		fd.establish()
		online = append(online, fd.id)
	}
	for _, limit := range []string{"1", "2", "500"} {
		pages := l.listPages(url.Values{"online": {"true"}, "limit": {limit}}, 5)
		got, _ := pageIDs(pages)
		if !slices.Equal(got, online) {
			t.Errorf("online, limit %s: %v; want %v", limit, got, online)
		}
		for _, p := range pages {
			for _, d := range p.Devices {
				if !d.Online || d.Gen == "" || d.ConnectedSince == "" {
					t.Errorf("online, limit %s: %+v is listed without its presence", limit, d)
				}
			}
		}
		if n, _ := strconv.Atoi(limit); n == 1 && len(pages) != 2 {
			t.Errorf("online, limit 1: %d pages, want 2 (no empty page after the last connected device)", len(pages))
		}
	}
	everyone, _ := pageIDs(l.listPages(url.Values{}, 2))
	if !slices.Equal(everyone, all) {
		t.Errorf("without online: %v; want every device %v", everyone, all)
	}
}

// Bad values are a 400 naming the parameter, never a silent default.
func TestDeviceListRefusesBadQueries(t *testing.T) {
	l := newWSLane(t)
	others := registerFleet(t, l.store, 1)
	tests := []struct {
		query, code, mentions string
	}{
		{"limit=0", api.CodeFieldInvalid, "limit"},
		{"limit=1001", api.CodeFieldInvalid, "limit"},
		{"limit=-1", api.CodeFieldInvalid, "limit"},
		{"limit=01", api.CodeFieldInvalid, "limit"},
		{"limit=", api.CodeFieldInvalid, "limit"},
		{"limit=ten", api.CodeFieldInvalid, "limit"},
		{"limit=99999999999999999999", api.CodeFieldInvalid, "limit"},
		{"after=", api.CodeFieldInvalid, "after"},
		{"after=garbage", api.CodeFieldInvalid, "after"},
		{"after=dev_01j8zq4t9x0000000000000000", api.CodeFieldInvalid, "after"},
		{"after=dev_01J8ZQ4T9X0000000000000000", api.CodeFieldInvalid, "after"}, // well formed, no such device
		{"after=" + others[0].id, api.CodeFieldInvalid, "after"},                // another identity's device
		{"online=false", api.CodeFieldInvalid, "online"},
		{"online=1", api.CodeFieldInvalid, "online"},
		{"online=TRUE", api.CodeFieldInvalid, "online"},
		{"online=", api.CodeFieldInvalid, "online"},
		{"page=2", api.CodeBodyShape, "page"},
		{"limit=1&limit=2", api.CodeBodyShape, "limit"},
		{"limit=1;after=x", api.CodeBodyShape, "malformed"},
		{"after=%zz", api.CodeBodyShape, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			wantError(t, l.do("GET", "/v1/devices?"+tt.query, l.ownerKey, ""), 400, tt.code, tt.mentions)
		})
	}
}
