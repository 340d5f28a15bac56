package nexting

import (
	"fmt"
	"unicode/utf8"
)

// HostConfig is what the host itself implements.
type HostConfig struct {
	// Profiles the host implements; it must include approval/1. Unknown
	// names are ignored.
	Profiles []Profile
	// MaxMessageBytes is the host's own frame limit, MinFrameBytes…
	// MaxFrameBytes; 0 means MaxFrameBytes.
	MaxMessageBytes int
	// MaxSummaryBytes is the host's own present.sum limit, 1–240; 0 means
	// MaxSummaryBytes.
	MaxSummaryBytes int
}

// DefaultHostConfig implements all nine profiles with the largest limits.
func DefaultHostConfig() HostConfig {
	return HostConfig{Profiles: Profiles(), MaxMessageBytes: MaxFrameBytes, MaxSummaryBytes: MaxSummaryBytes}
}

// Negotiated is the outcome of Device Info negotiation: the profiles both
// ends know and the smaller of each limit. It is immutable; use it to
// frame, decode, check and encode every message of the connection.
type Negotiated struct {
	profiles        profileSet
	maxMessageBytes int
	maxSummaryBytes int
	statusSlots     int
}

// Negotiate computes what host and device share (short spec "Device Info
// contract", profiles sheet "Device Info"):
//
//   - profiles: the known profiles both list. approval/1 is required of
//     both (unsupported_profile otherwise). status/1 also needs the device's
//     statusSlots ≥ 1: missing or zero statusSlots means no status traffic.
//   - max message bytes: min(host, device, 4096) — official implementations
//     cap at 4096 even when Device Info advertises more.
//   - max summary bytes: min(host, device).
//
// dev must come from ParseDeviceInfo; a hand-built value is re-validated.
func Negotiate(host HostConfig, dev *DeviceInfo) (*Negotiated, error) {
	if dev == nil {
		return nil, badMessage("", "no Device Info")
	}
	if e := dev.check(); e != nil {
		return nil, e
	}
	hostMax, hostSum := host.MaxMessageBytes, host.MaxSummaryBytes
	if hostMax == 0 {
		hostMax = MaxFrameBytes
	}
	if hostSum == 0 {
		hostSum = MaxSummaryBytes
	}
	if hostMax < MinFrameBytes || hostMax > MaxFrameBytes {
		return nil, fmt.Errorf("nexting: host frame limit %d outside %d-%d", hostMax, MinFrameBytes, MaxFrameBytes)
	}
	if hostSum < 1 || hostSum > MaxSummaryBytes {
		return nil, fmt.Errorf("nexting: host summary limit %d outside 1-%d", hostSum, MaxSummaryBytes)
	}
	var hostSet profileSet
	for _, p := range host.Profiles {
		hostSet |= p.bit()
	}
	if !hostSet.has(ProfileApproval) {
		return nil, fmt.Errorf("nexting: host config must include %s", ProfileApproval)
	}
	n := &Negotiated{maxMessageBytes: hostMax, maxSummaryBytes: min(hostSum, dev.MaxSummaryBytes)}
	if dev.MaxMessageBytes < int64(n.maxMessageBytes) {
		n.maxMessageBytes = int(dev.MaxMessageBytes) // ≥ 512: check() bounded it
	}
	for _, p := range dev.Profiles {
		n.profiles |= Profile(p).bit() & hostSet
	}
	if n.profiles.has(ProfileStatus) && dev.StatusSlots >= 1 {
		n.statusSlots = dev.StatusSlots
	} else {
		n.profiles &^= ProfileStatus.bit()
	}
	return n, nil
}

// Has reports whether profile p was negotiated.
func (n *Negotiated) Has(p Profile) bool { return n.profiles.has(p) }

// Profiles lists the negotiated profiles in spec order.
func (n *Negotiated) Profiles() []Profile { return n.profiles.list() }

// MaxMessageBytes is the negotiated frame limit, LF included (512–4096).
func (n *Negotiated) MaxMessageBytes() int { return n.maxMessageBytes }

// MaxSummaryBytes is the negotiated present.sum limit (1–240).
func (n *Negotiated) MaxSummaryBytes() int { return n.maxSummaryBytes }

// StatusSlots is the device's statusSlots when status/1 was negotiated,
// else 0. A device renders its lowest slots and ignores higher ones, so
// this is informational: status frames are not refused for using more.
func (n *Negotiated) StatusSlots() int { return n.statusSlots }

// NewFramer returns a Framer with the negotiated frame limit.
func (n *Negotiated) NewFramer() *Framer {
	return &Framer{max: n.maxMessageBytes, buf: make([]byte, 0, 256)}
}

// Check refuses a message this connection may not carry: unsupported_profile
// for a type whose profile was not negotiated, bad_message for a present
// whose summary exceeds the negotiated max_summary_bytes.
func (n *Negotiated) Check(m Message) error {
	if e := n.check(m); e != nil {
		return e
	}
	return nil
}

func (n *Negotiated) check(m Message) *Error {
	if m == nil {
		return badMessage("", "nil message")
	}
	t := m.Type()
	if !n.profiles.has(t.Profile()) {
		return &Error{Code: CodeUnsupportedProfile, Field: "t", Detail: "profile " + string(t.Profile()) + " not negotiated", Type: t}
	}
	if p, ok := m.(Present); ok && len(p.Summary) > n.maxSummaryBytes {
		return &Error{Code: CodeBadMessage, Field: "sum", Detail: fmt.Sprintf("exceeds the negotiated %d bytes", n.maxSummaryBytes), Type: t, ID: p.ID}
	}
	if p, ok := m.(*Present); ok && p != nil {
		return n.check(*p)
	}
	return nil
}

// Decode decodes a delimiter-stripped frame under the negotiated limits:
// like the package-level Decode, plus message_too_large past the
// negotiated frame limit, unsupported_profile (checked before the fields)
// for a known type of a profile not negotiated, and the negotiated summary
// limit.
func (n *Negotiated) Decode(data []byte) (Message, error) {
	m, err := decode(data, n.maxMessageBytes, &n.profiles)
	if err != nil {
		return nil, err
	}
	if e := n.check(m); e != nil {
		e.Size = len(data) + 1
		return nil, e
	}
	return m, nil
}

// DecodeFrame is Decode for a frame with its trailing LF.
func (n *Negotiated) DecodeFrame(frame []byte) (Message, error) {
	if len(frame) == 0 || frame[len(frame)-1] != '\n' || len(frame) > n.maxMessageBytes {
		return decodeFrame(frame, n.maxMessageBytes, &n.profiles)
	}
	return n.Decode(frame[:len(frame)-1])
}

// Encode validates m, checks it against the negotiation and returns its
// canonical frame, refusing one over the negotiated frame limit.
func (n *Negotiated) Encode(m Message) ([]byte, error) { return n.AppendEncode(nil, m) }

// AppendEncode is Encode appending to dst.
func (n *Negotiated) AppendEncode(dst []byte, m Message) ([]byte, error) {
	if e := n.check(m); e != nil {
		return dst, e
	}
	return appendFrame(dst, m, n.maxMessageBytes)
}

// FitSummary returns the longest prefix of s that fits max bytes without
// splitting a UTF-8 sequence, for a host that shortens a prompt to the
// negotiated summary limit.
func FitSummary(s string, max int) string {
	if len(s) <= max {
		return s
	}
	if max <= 0 {
		return ""
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
