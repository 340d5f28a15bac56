package storetest

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// waitUntil polls cond, bounded: reaching the bound fails the test.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The pool that writes is bounded, and a caller that finds it full
// waits for a connection as long as its own context allows: it never fails
// for want of one, and never opens another.
func testFullPoolWaits(t *testing.T, s Backend) {
	alice := newIdentity(t, s, "alice")
	d := register(t, s, alice.ID)
	db := s.DB()
	size := db.Stats().MaxOpenConnections
	if size == 0 {
		t.Fatal("the pool is unbounded")
	}
	var held []*sql.Conn
	for range size {
		c, err := db.Conn(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	waits := db.Stats().WaitCount
	patient := make(chan error, 1)
	go func() {
		_, err := s.AcquireLease(context.Background(), store.LeaseRequest{DeviceID: d.ID, Holder: "c1", Epoch: "E", TTL: time.Minute})
		patient <- err
	}()
	impatient, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := s.RenewLease(impatient, d.ID, "c1", time.Minute)
		gaveUp <- err
	}()
	waitUntil(t, "both callers wait for a connection", func() bool { return db.Stats().WaitCount >= waits+2 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiting caller whose context ended: err = %v, want context.Canceled", err)
	}
	for _, c := range held {
		c.Close()
	}
	if err := <-patient; err != nil {
		t.Fatalf("a caller that waited for the pool failed: %v", err)
	}
	if open := db.Stats().OpenConnections; open > size {
		t.Fatalf("%d connections open, over the pool's %d", open, size)
	}
}
