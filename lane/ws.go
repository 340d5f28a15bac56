package lane

import (
	"context"
	"net/http"
	"slices"

	"github.com/coder/websocket"

	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// serveWebSocket is the upgrade at wsPath (§1.2): 503 while draining or when
// the pre-auth caps are full; then the connection runs in a goroutine of its
// own (upgrade.go).
func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	remote := remoteAddr(r)
	reason, evicted := s.enterPreAuth(remote)
	if evicted != nil {
		evicted.evict()
	}
	if reason != "" {
		s.audit(r.Context(), store.AuditEvent{Event: string(EventUpgradeRefused), Reason: reason, RemoteAddr: remote})
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the lane is draining or at its pre-auth connection cap", http.StatusServiceUnavailable)
		return
	}
	// enterPreAuth counted this socket in s.handlers under s.mu, with its
	// draining check: Shutdown's Wait cannot miss it.
	hj, ok := w.(http.Hijacker)
	if !ok {
		s.exitPreAuth(remote)
		s.handlers.Done()
		http.Error(w, "this connection cannot be upgraded to a WebSocket", http.StatusInternalServerError)
		return
	}
	ws, err := websocket.Accept(smallBuffers{w, hj}, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		s.exitPreAuth(remote)
		s.handlers.Done()
		return // Accept has answered the request
	}
	// Until the handshake completes the read limit is the pre-auth cap
	// (§2.1), so an unauthenticated socket makes the lane hold at most 4 KiB
	// of a message, not the 1 MiB of the transport cap: a longer message is
	// refused at its 4097th byte (close 1009, audited frame_too_large, as
	// stage 1 would once it was whole). attach raises it to the transport
	// cap, stage 0 (§2.4), before helloAck is queued.
	ws.SetReadLimit(protocol.MaxPreAuthFrameBytes)
	c := newConn(s, ws, remote)
	c.inPreAuth = true
	s.listPreAuth(c)
	// The socket runs in a goroutine of its own, so that this handler
	// returns and net/http lets go of the request, its buffers and its
	// stack: an idle device holds only what its connection needs.
	go func() {
		defer s.handlers.Done()
		c.serve()
	}()
}

func remoteAddr(r *http.Request) string { return RemoteAddr(r) }

// enterPreAuth takes a pre-auth slot, or says why not: "draining",
// "preauth_cap" or "preauth_cap_per_addr". A taken slot also counts the
// caller in s.handlers (it calls Done): the Add happens under s.mu with the
// draining check, so it is never concurrent with Shutdown's Wait on a zero
// count, and Shutdown never returns while an upgrade it let in still runs.
// At the global cap the slot may be one taken from a silent socket of
// another address (preAuthVictimLocked), returned for the caller to close.
func (s *Server) enterPreAuth(remote string) (refused string, evicted *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.draining:
		return "draining", nil
	case s.preAuthBy[remote] >= s.cfg.MaxPreAuthPerAddr:
		return "preauth_cap_per_addr", nil
	case s.preAuth >= s.cfg.MaxPreAuth:
		if evicted = s.preAuthVictimLocked(remote); evicted == nil {
			return "preauth_cap", nil
		}
	}
	s.preAuth++
	s.preAuthBy[remote]++
	s.handlers.Add(1)
	return "", evicted
}

// preAuthVictimLocked makes room at the global pre-auth cap for a socket
// from remote, so that sockets that never say hello cannot keep devices
// out (§1.2's caps bound the lane, they must not lock it): it takes the
// slot of the oldest socket still waiting for its hello of the address
// holding the most pre-auth sockets, when that address holds at least two
// more than remote would (so addresses flooding the cap evenly cannot push
// each other out), and returns it to be closed. Nil when there is none
// (s.mu held).
func (s *Server) preAuthVictimLocked(remote string) *conn {
	most, mostAddr := 0, ""
	for addr, n := range s.preAuthBy {
		if n > most && addr != remote {
			most, mostAddr = n, addr
		}
	}
	if most < s.preAuthBy[remote]+2 {
		return nil
	}
	for _, c := range s.preAuthConns[mostAddr] {
		if c.state() == connHandshaking && c.preAuthLeft.CompareAndSwap(false, true) {
			s.exitPreAuthLocked(c)
			return c
		}
	}
	return nil
}

// evict closes a socket whose pre-auth slot went to a newcomer, as its
// handshake deadline would (unless that or its hello came first).
func (c *conn) evict() {
	if from, next, _ := c.to(evDeadline); next != from {
		c.srv.audit(c.ctx, store.AuditEvent{Event: string(EventUpgradeRefused), Reason: "preauth_evicted", RemoteAddr: c.remote})
		c.close()
	}
}

// listPreAuth lists a socket that holds a pre-auth slot by its address.
func (s *Server) listPreAuth(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !c.preAuthLeft.Load() {
		s.preAuthConns[c.remote] = append(s.preAuthConns[c.remote], c)
	}
}

func (s *Server) exitPreAuth(remote string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exitPreAuthCountLocked(remote)
}

// exitPreAuthLocked releases c's slot and unlists it (s.mu held).
func (s *Server) exitPreAuthLocked(c *conn) {
	s.exitPreAuthCountLocked(c.remote)
	list := s.preAuthConns[c.remote]
	if i := slices.Index(list, c); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(s.preAuthConns, c.remote)
	} else {
		s.preAuthConns[c.remote] = list
	}
}

func (s *Server) exitPreAuthCountLocked(remote string) {
	s.preAuth--
	if s.preAuthBy[remote]--; s.preAuthBy[remote] <= 0 {
		delete(s.preAuthBy, remote)
	}
}

// leavePreAuth releases a connection's pre-auth slot, once.
func (s *Server) leavePreAuth(c *conn) {
	if c.preAuthLeft.CompareAndSwap(false, true) && c.inPreAuth {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.exitPreAuthLocked(c)
	}
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// kick drops a device's connection with a bye and settles its work (revoked:
// R13, "in-flight work is being written off as outcome-unknown").
func (s *Server) kick(deviceID string, reason protocol.ByeReason) {
	s.mu.Lock()
	d, ok := s.devices[deviceID]
	s.mu.Unlock()
	if !ok {
		return
	}
	d.mu.Lock()
	if d.conn != nil {
		s.drop(d, d.conn, reason)
	}
	held := d.stopGrace()
	what := "the device was " + string(reason)
	if reason == protocol.ByeDraining {
		what = "this lane replica was shutting down" // the lane drained, not the device
	}
	s.settleAll(d,
		laneFailure(protocol.ErrOutcomeUnknown, "%s while the instruction was in flight; it may have run", what),
		laneFailure(protocol.ErrTargetUnavailable, "%s", what))
	d.mu.Unlock()
	if held != "" {
		s.releaseLease(d.id, held)
	}
}

// Shutdown drains the replica, as a deploy expects: new sockets get 503,
// new hellos helloReject draining and new instructions are refused (this
// replica is shutting down); work in flight may finish for up to
// Config.DrainGrace, its devices still connected; then every connection
// gets bye draining and what is still in flight settles outcome_unknown,
// saying it was the lane that shut down (R2: "a shutting-down replica
// settles its in-flight work as outcome-unknown"); then every lease this
// replica holds is released in one statement, also when ctx ran out first.
// With an advertise URL, the replica's row is marked draining first and
// removed last (replica.go). It returns when every connection has ended,
// or with ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.markReplicaDraining()
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.letWorkFinish(ctx)
	s.mu.Lock()
	devices := make([]string, 0, len(s.devices))
	for id := range s.devices {
		devices = append(devices, id)
	}
	s.mu.Unlock()
	for _, id := range devices {
		s.kick(id, protocol.ByeDraining)
	}
	done := make(chan struct{})
	go func() {
		s.handlers.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.renewer.close()
	s.janitor.close()
	s.leases.wait()
	s.releaseLeases()
	s.removeReplica()
	if s.forwarder != nil {
		s.forwarder.Close()
	}
	// Every call has settled: the history's last rows are queued.
	s.shutdownMu.Do(func() { s.history.close(); s.audits.Close() })
	return err
}

// letWorkFinish waits, up to Config.DrainGrace or ctx's end, until no call
// is in flight on this replica.
func (s *Server) letWorkFinish(ctx context.Context) {
	if s.cfg.DrainGrace < 0 {
		return
	}
	s.drainWatch.Store(true)
	s.callsMu.Lock()
	if len(s.calls) == 0 {
		s.drainedOnce.Do(func() { close(s.drained) })
	}
	s.callsMu.Unlock()
	t := s.cfg.Clock.NewTimer(s.cfg.DrainGrace)
	defer t.Stop()
	select {
	case <-s.drained:
	case <-t.C():
	case <-ctx.Done():
	}
}
