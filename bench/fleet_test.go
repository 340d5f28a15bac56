package bench

import (
	"context"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/httpapi"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

// The fleet's devices get in through the lane's pre-auth caps (a 503 at
// the upgrade is retried, as an executor does) and hold active
// connections: the lane sees every one of them online.
func TestTheFleetGetsEveryDeviceIn(t *testing.T) {
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := lane.New(lane.Config{Store: st, MaxPreAuth: 4, MaxPreAuthPerAddr: 2})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(httpapi.New(srv))
	defer hs.Close()
	defer srv.Shutdown(context.Background())
	fleet, err := RegisterFleet(t.Context(), st, 40)
	if err != nil {
		t.Fatal(err)
	}
	ctx, disconnect := context.WithCancel(t.Context())
	defer disconnect()
	got := ConnectFleet(ctx, strings.Replace(hs.URL, "http", "ws", 1)+"/v1/device/ws", fleet, []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	retried := 0
	for i, h := range got {
		if h.Err != nil {
			t.Fatalf("device %d: %v", i, h.Err)
		}
		retried += h.Retries
	}
	if retried == 0 {
		t.Error("40 devices at once through a pre-auth cap of 2 were never answered 503: the retry path went untested")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		online := 0
		for _, d := range fleet {
			if srv.Presence(d.ID).Online {
				online++
			}
		}
		if online == len(fleet) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d devices online", online, len(fleet))
		}
	}
}
