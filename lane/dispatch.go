package lane

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/internal/probe"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// Errors of Dispatch: refusals before anything is queued.
var (
	ErrUnknownDevice = errors.New("lane: no such device")
)

// InvalidInstructionError is an Instruction that cannot be sent as given.
type InvalidInstructionError struct{ Detail string }

func (e *InvalidInstructionError) Error() string { return "lane: invalid instruction: " + e.Detail }

// protectiveFaces are the presence-typed write faces of §3.2.
var protectiveFaces = []protocol.InstructionKind{protocol.KindWriteFileExclusive, protocol.KindWriteFileGuarded}

// Dispatch sends an instruction to a device and returns its Call at once.
// The call always ends with exactly one settlement: a device that is not
// connected, or does not declare the kind, settles it
// terminal_never_started (target_unavailable, not_supported) without a
// silent queue; otherwise it waits for an in-flight slot (queued), is
// committed and sent once (dispatch_committed, R1), and settles terminal.
// An error means nothing was queued: the device is unknown, the
// instruction is invalid, or its root session is bound to another device
// (*SessionMismatchError, §9).
func (s *Server) Dispatch(ctx context.Context, deviceID string, in Instruction) (*Call, error) {
	return s.dispatch(ctx, deviceID, Requester{}, in, nil)
}

// dispatch is Dispatch for a requester (its identity, when not "", must
// own the device). contentDone, when not nil, is called
// exactly once when the lane has let go of in.Content (or ContentStream):
// at once on an error, else when the call's payload has been written (or
// failed to be), or when it settles without having been committed.
func (s *Server) dispatch(ctx context.Context, deviceID string, from Requester, in Instruction, contentDone func()) (call *Call, err error) {
	owner := from.IdentityID
	if from.ReceivedAt.IsZero() {
		from.ReceivedAt = s.cfg.Clock.Now()
	}
	if contentDone == nil {
		contentDone = func() {}
	}
	defer func() {
		if err != nil {
			contentDone()
		}
	}()
	frame, err := BuildFrame(in)
	if err != nil {
		return nil, err
	}
	if in.Timeout > s.cfg.MaxTimeout {
		return nil, &InvalidInstructionError{Detail: fmt.Sprintf("timeoutMs %d is over this lane's bound of %d (%v; sema server --max-timeout)",
			in.Timeout.Milliseconds(), s.cfg.MaxTimeout.Milliseconds(), s.cfg.MaxTimeout)}
	}
	dev, err := s.dispatchDevice(ctx, deviceID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && owner != "" && dev.OwnerID != owner) {
		return nil, ErrUnknownDevice
	}
	if err != nil {
		return nil, fmt.Errorf("lane: the device registry is unavailable: %w", err)
	}
	if in.RootSessionID != "" {
		// §9: bind or refuse, before the call exists. An embedder's
		// Dispatch (owner "") binds for the device's owner.
		sessionOwner := owner
		if sessionOwner == "" {
			sessionOwner = dev.OwnerID
		}
		if err := s.bindSession(ctx, sessionOwner, in.RootSessionID, dev); err != nil {
			return nil, err
		}
	}
	released := make(chan struct{})
	call = &Call{
		ID: frame.InstructionID, DeviceID: deviceID, Kind: in.Kind, srv: s, owner: owner, from: from,
		notify: make(chan struct{}, 1), done: make(chan struct{}),
		state: protocol.StateQueued, frame: frame, content: in.Content, upload: in.ContentStream,
		contentDone: sync.OnceFunc(func() { contentDone(); close(released) }), released: released,
		resultSeq: -1, ackedTo: -1, backlog: newBacklog(s.cfg.DeliveryEntries, s.cfg.DeliveryBytes), droppedFrom: -1,
	}
	d := s.device(deviceID)
	d.mu.Lock()
	defer d.mu.Unlock()
	s.callsMu.Lock()
	s.calls[call.ID] = call
	s.callsMu.Unlock()
	if refusal := s.admit(d, dev, in); refusal != nil {
		s.settle(d, call, protocol.StateTerminalNeverStarted, refusal)
		return call, nil
	}
	d.queue = append(d.queue, call)
	probe.Mark(probe.LaneDispatched) // before pump: the writer may write the frame at once
	s.pump(d)
	return call, nil
}

// dispatchDevice is the device's registry row for a dispatch. A registry
// that one process serves counts its device revocations: while the count
// has not moved since a connected device's handshake read its row, what a
// dispatch reads of that row still holds (the owner never changes; being
// revoked is the one change), and nothing is read. Replicas read the row
// every time, since another replica may have revoked the device a moment
// ago.
func (s *Server) dispatchDevice(ctx context.Context, deviceID string) (store.Device, error) {
	if now, counted := s.revocationCount(); counted {
		s.mu.Lock()
		d := s.devices[deviceID]
		s.mu.Unlock()
		if d != nil {
			d.mu.Lock()
			c := d.conn
			fresh := c != nil && c.state().takesWork() && c.recorded && c.recordAt == now
			d.mu.Unlock()
			if fresh {
				return c.record, nil
			}
		}
	}
	return s.store.Device(ctx, deviceID)
}

// revocationCount is the registry's count of device revocations, when it
// keeps one (a registry this process serves alone).
func (s *Server) revocationCount() (uint64, bool) {
	if s.revocations == nil {
		return 0, false
	}
	return s.revocations()
}

// admit decides whether a call may be queued (d.mu held): the outcome that
// refuses it before the commit, or nil.
func (s *Server) admit(d *deviceState, dev store.Device, in Instruction) protocol.Outcome {
	c := d.conn
	switch {
	case dev.Revoked():
		return laneFailure(protocol.ErrTargetUnavailable, "device %s is revoked", dev.ID)
	case s.isDraining():
		return laneFailure(protocol.ErrTargetUnavailable, "this lane replica is shutting down")
	case c == nil || !c.state().takesWork():
		return laneFailure(protocol.ErrTargetUnavailable, "device %s is not connected", dev.ID)
	case !c.supports[in.Kind]:
		return laneFailure(protocol.ErrNotSupported, "device %s does not implement %s", dev.ID, in.Kind)
	}
	if in.EnvironmentSupports != nil && (in.Kind == protocol.KindWriteFile || in.Kind == protocol.KindAppendFile) {
		for _, face := range protectiveFaces {
			if c.supports[face] && !slices.Contains(in.EnvironmentSupports, face) {
				// §3.2: gaining a protective face mid-task is a silent-downgrade hazard.
				return laneFailure(protocol.ErrNotSupported,
					"device %s gained %s after this task's environment was built; refusing a non-atomic %s", dev.ID, face, in.Kind)
			}
		}
	}
	return nil
}

// BuildFrame checks an Instruction and makes its frame (gen and issuedSeq
// are stamped at the commit).
func BuildFrame(in Instruction) (protocol.Instruction, error) {
	bad := func(format string, args ...any) (protocol.Instruction, error) {
		return protocol.Instruction{}, &InvalidInstructionError{Detail: fmt.Sprintf(format, args...)}
	}
	if !in.Kind.Valid() {
		return bad("kind %q is not an instruction kind", in.Kind)
	}
	if in.Timeout <= 0 || in.Timeout.Milliseconds() > protocol.MaxSafeInteger {
		return bad("timeout must be positive")
	}
	if problem := CheckRootSessionID(in.RootSessionID); problem != "" {
		return bad("rootSessionId %s", problem)
	}
	args := in.Args
	if in.Kind.IsWrite() {
		w, ok := args.(protocol.WriteArgs)
		if !ok {
			return bad("%s takes WriteArgs", in.Kind)
		}
		switch {
		case in.ContentStream == nil:
			w.ContentLen, w.SHA256 = int64(len(in.Content)), protocol.Digest(sha256.Sum256(in.Content))
		case in.Content != nil:
			return bad("a write carries Content or ContentStream, not both")
		case in.ContentLen < 0 || in.ContentLen > protocol.MaxSafeInteger:
			return bad("contentLen %d is out of range", in.ContentLen)
		default:
			// Streamed: the declared values, verified by the device (§3.4).
			w.ContentLen, w.SHA256 = in.ContentLen, in.ContentSHA256
		}
		args = w
	} else if in.Content != nil || in.ContentStream != nil {
		return bad("only the write family carries content")
	}
	frame := protocol.Instruction{
		InstructionID: ids.New(ids.Instruction),
		RootSessionID: in.RootSessionID,
		Kind:          in.Kind,
		Args:          args,
		Cwd:           in.Cwd,
		ShellEnv:      in.ShellEnv,
		TimeoutMs:     in.Timeout.Milliseconds(),
	}
	// The encoder holds the frame to the executor's decoder: paths,
	// fields and args are checked here, before anything is queued.
	if _, err := frame.MarshalJSON(); err != nil {
		return bad("%v", err)
	}
	return frame, nil
}
