package lane

import (
	"context"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/sema-agent/sema/lane/store"
)

// §9: a root session is bound to one device. The first instruction that
// carries a rootSessionId binds it to its device; the same device again is
// idempotent; another device is refused before anything is queued, and
// changing devices is the explicit rebind (POST
// /v1/sessions/{rootSessionId}/rebind). Bindings belong to an identity as
// devices do.

// MaxRootSessionID bounds a rootSessionId: it is a key of the registry.
const MaxRootSessionID = 256

// SessionMismatchError refuses an instruction whose root session is bound
// to another device (§9). Nothing was queued.
type SessionMismatchError struct {
	RootSessionID string
	BoundDeviceID string // the device the session is bound to
	DeviceID      string // the device the instruction named
}

func (e *SessionMismatchError) Error() string {
	return fmt.Sprintf("root session %q is bound to device %s, not %s; rebind it explicitly (POST /v1/sessions/{rootSessionId}/rebind) to change devices",
		clip(e.RootSessionID), e.BoundDeviceID, e.DeviceID)
}

// SessionLimitError refuses an instruction or rebind that would bind one
// more root session than its identity may hold. Nothing was queued.
type SessionLimitError struct {
	RootSessionID string
	Max           int
}

func (e *SessionLimitError) Error() string {
	return fmt.Sprintf("root session %q cannot be bound: your identity holds %d root session bindings, this lane's most (sema server --max-sessions-per-identity); unbind one (DELETE /v1/sessions/{rootSessionId}) or wait for idle ones to expire",
		clip(e.RootSessionID), e.Max)
}

// CheckRootSessionID returns what is wrong with a rootSessionId, or "".
func CheckRootSessionID(id string) string {
	switch {
	case len(id) > MaxRootSessionID:
		return fmt.Sprintf("must be at most %d bytes, got %d", MaxRootSessionID, len(id))
	case !utf8.ValidString(id):
		return "must be valid UTF-8"
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return "must not contain control characters"
		}
	}
	return ""
}

// bindSession binds (or checks) the instruction's root session for owner
// on dev, before anything is queued. A revoked device gets no new binding
// (nothing can ever run there), but naming it for a session bound
// elsewhere is still a mismatch.
func (s *Server) bindSession(ctx context.Context, owner, rootSessionID string, dev store.Device) error {
	var (
		b   store.Session
		err error
	)
	if dev.Revoked() {
		b, err = s.store.Session(ctx, owner, rootSessionID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
	} else {
		b, err = s.store.BindSession(ctx, owner, rootSessionID, dev.ID, s.cfg.MaxSessionsPerIdentity)
	}
	if errors.Is(err, store.ErrSessionLimit) {
		return &SessionLimitError{RootSessionID: rootSessionID, Max: s.cfg.MaxSessionsPerIdentity}
	}
	if err != nil {
		return fmt.Errorf("lane: the device registry is unavailable: %w", err)
	}
	if b.DeviceID != dev.ID {
		return &SessionMismatchError{RootSessionID: rootSessionID, BoundDeviceID: b.DeviceID, DeviceID: dev.ID}
	}
	return nil
}

// clip shortens what a caller typed for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
