package lane

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// This file is the surface the lane's doors (package httpapi, an embedding
// program) use beyond Dispatch: dispatch and cancel as a caller, revoke,
// the audit sink, the WebSocket endpoint and the effective configuration.

// Config returns the configuration the Server runs with, defaults filled.
func (s *Server) Config() Config { return s.cfg }

// Store returns the registry.
func (s *Server) Store() store.Store { return s.store }

// Audit queues an audit row; it never blocks the caller (see auditor). The
// metrics count it by its event and reason.
func (s *Server) Audit(ctx context.Context, e store.AuditEvent) { s.audit(ctx, e) }

// DispatchAs is Dispatch for the identity ownerID: the device must be
// one of ownerID's (else ErrUnknownDevice) and the root session is bound
// for it (§9). contentDone, when not nil, is called exactly once when the
// lane has let go of in.Content (or ContentStream): at once on an error,
// else when the call's payload has been written (or failed to be), or when
// it settles without having been committed.
func (s *Server) DispatchAs(ctx context.Context, deviceID, ownerID string, in Instruction, contentDone func()) (*Call, error) {
	return s.dispatch(ctx, deviceID, Requester{IdentityID: ownerID}, in, contentDone)
}

// Requester is who asked for an instruction, as its history row records
// it.
type Requester struct {
	IdentityID string // the caller's identity; "" for an in-process caller
	APIKeyID   string // the key it authenticated with; "" when none
	RemoteAddr string // the caller's address; "" when none
	// ReceivedAt is when the request arrived; zero: when it is dispatched.
	ReceivedAt time.Time
}

// DispatchFor is DispatchAs for a requester: its identity must own the
// device, and the instruction's history row names it, its key and its
// address.
func (s *Server) DispatchFor(ctx context.Context, deviceID string, from Requester, in Instruction, contentDone func()) (*Call, error) {
	return s.dispatch(ctx, deviceID, from, in, contentDone)
}

// OwnedDevice is deviceID's registry row when it is one of ownerID's
// devices, else ErrUnknownDevice; a registry failure is another error. It
// reads what a dispatch reads (nothing, for a device connected here while
// no device was revoked), so that a door can refuse a caller before it
// reads or holds a byte of the request's body.
func (s *Server) OwnedDevice(ctx context.Context, deviceID, ownerID string) (store.Device, error) {
	dev, err := s.dispatchDevice(ctx, deviceID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && dev.OwnerID != ownerID) {
		return store.Device{}, ErrUnknownDevice
	}
	return dev, err
}

// CancelResult is what CancelAs found of an instruction.
type CancelResult int

const (
	// CancelUnknown: this replica knows no instruction of that id.
	CancelUnknown CancelResult = iota
	// CancelNotYours: the instruction is known here, and not the caller's.
	CancelNotYours
	// CancelLive: the caller's call was live and is cancelled (§5).
	CancelLive
	// CancelSettled: the caller's instruction has settled already; a
	// cancel is a no-op.
	CancelSettled
)

// CancelAs cancels the instruction id for the identity callerID.
func (s *Server) CancelAs(ctx context.Context, callerID, id string) CancelResult {
	s.callsMu.Lock()
	call, live := s.calls[id]
	deviceID, remembered := s.memo.device(id)
	if !remembered {
		deviceID, remembered = s.neverStarted.device(id)
	}
	s.callsMu.Unlock()
	switch {
	case live && call.owner == callerID:
		call.Cancel()
		return CancelLive
	case live:
		return CancelNotYours
	case !remembered:
		return CancelUnknown
	}
	if d, err := s.store.Device(ctx, deviceID); err == nil && d.OwnerID == callerID {
		return CancelSettled
	}
	return CancelNotYours
}

// Go runs f in a goroutine of its own that Shutdown waits for, and
// reports whether it did: once Shutdown has begun, f is not run.
func (s *Server) Go(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.handlers.Add(1)
	go func() {
		defer s.handlers.Done()
		f()
	}()
	return true
}

// Revoke ends a revoked device's connection with bye revoked and writes
// off its work in flight (R13). The registry's row is the caller's to
// revoke first.
func (s *Server) Revoke(deviceID string) { s.kick(deviceID, protocol.ByeRevoked) }

// ServeWebSocket is the WebSocket endpoint executors connect to
// (Config.WSPath, §1.2).
func (s *Server) ServeWebSocket(w http.ResponseWriter, r *http.Request) { s.serveWebSocket(w, r) }

// RemoteAddr is the host of the request's remote address, as audit rows
// record it.
func RemoteAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// NewSecret returns prefix and 256 random bits, base64url: an enrollment
// token or an API key. Only its digest is ever stored.
func NewSecret(prefix string) string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}
