package nexting

import (
	"bytes"
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// DefaultSimDeviceInfo is the Device Info of the simulator when none is
// given: approval/1 and status/1 with four status slots and the largest
// limits.
const DefaultSimDeviceInfo = `{"protocol":"nexting-device","spec":"0.2.0-experimental.2","wire":[1],` +
	`"profiles":["approval/1","status/1"],"model":"sema-sim","fw":"1","max_message_bytes":4096,` +
	`"max_summary_bytes":240,"statusSlots":4,"button_count":2,"approval_button_count":2}`

// Sim is the logic of a simulated nexting device — what `sema nexting sim`
// and end-to-end tests run on the device end of a connection: its Device
// Info, the Device state machine (approval/1 and status/1), a key press
// answering allow or deny, and fail-closed handling of everything it
// receives (error replies under Reply's amplification rule, never for an
// error). It is pure like Device: frames in, frames out, the caller's
// clock; not safe for concurrent use. SimConn drives it over a stream.
type Sim struct {
	info    []byte // compact Device Info
	parsed  *DeviceInfo
	neg     *Negotiated // the device's own profiles and limits
	dev     *Device
	lastErr ErrorMessage // the last error the host sent, if any
	refused int          // frames refused since the last Reset
}

// NewSim returns a simulator declaring the Device Info value info (nil
// means DefaultSimDeviceInfo). The value must be valid and may declare only
// approval/1 and status/1 among the known profiles: those are what the
// simulator implements.
func NewSim(info []byte) (*Sim, error) {
	if info == nil {
		info = []byte(DefaultSimDeviceInfo)
	}
	parsed, err := ParseDeviceInfo(info)
	if err != nil {
		return nil, err
	}
	profiles := []Profile{ProfileApproval}
	for _, p := range parsed.Profiles {
		switch Profile(p) {
		case ProfileApproval:
		case ProfileStatus:
			profiles = append(profiles, ProfileStatus)
		default:
			if Profile(p).Known() {
				return nil, fmt.Errorf("nexting: the simulator does not implement %s", p)
			}
		}
	}
	compact := jsontext.Value(bytes.Clone(info))
	if err := compact.Compact(); err != nil {
		return nil, fmt.Errorf("nexting: Device Info: %w", err)
	}
	own := HostConfig{
		Profiles:        profiles,
		MaxMessageBytes: int(min(parsed.MaxMessageBytes, MaxFrameBytes)),
		MaxSummaryBytes: parsed.MaxSummaryBytes,
	}
	neg, err := Negotiate(own, parsed)
	if err != nil {
		return nil, err
	}
	return &Sim{info: compact, parsed: parsed, neg: neg, dev: NewDevice(neg.StatusSlots())}, nil
}

// DeviceInfo returns the compact Device Info value (what a GATT read
// returns).
func (s *Sim) DeviceInfo() []byte { return bytes.Clone(s.info) }

// InfoLine returns the Device Info line a device writes first on a stream
// transport: the compact value and an LF.
func (s *Sim) InfoLine() []byte { return append(bytes.Clone(s.info), '\n') }

// Info returns the parsed Device Info.
func (s *Sim) Info() *DeviceInfo { return s.parsed }

// NewFramer returns a Framer with the device's own frame limit, for the
// transport that feeds Receive.
func (s *Sim) NewFramer() *Framer { return s.neg.NewFramer() }

// MaxMessageBytes is the device's frame limit (LF included).
func (s *Sim) MaxMessageBytes() int { return s.neg.MaxMessageBytes() }

// Receive handles one Result from the transport's Framer and returns the
// frames to send back (each with its LF).
func (s *Sim) Receive(now time.Time, r Result) [][]byte {
	if r.Err != nil {
		return s.refuse(r.Err)
	}
	m, err := s.neg.Decode(r.Frame)
	if err != nil {
		return s.refuse(err)
	}
	switch m := m.(type) {
	case Present:
		s.dev.Present(now, m)
	case Resolved:
		s.dev.Resolved(now, m)
	case Status:
		s.dev.SetStatus(m)
	case ErrorMessage:
		s.lastErr = m // never answered: errors do not bounce
	default:
		// An uplink type (answer) sent to the device: refused, never acted on.
		return s.refuse(wrongDirection(m, len(r.Frame)+1))
	}
	return nil
}

// Press is the person pressing allow or deny; it returns the answer frame
// when the device was Pending.
func (s *Sim) Press(now time.Time, c Choice) [][]byte {
	a, ok := s.dev.Press(now, c)
	if !ok {
		return nil
	}
	return [][]byte{s.encode(a)}
}

// Tick applies the local TTL and returns an answer to resend when due.
func (s *Sim) Tick(now time.Time) [][]byte {
	a, ok := s.dev.Tick(now)
	if !ok {
		return nil
	}
	return [][]byte{s.encode(a)}
}

// Deadline is when Tick must next be called.
func (s *Sim) Deadline() (time.Time, bool) { return s.dev.Deadline() }

// Reset is a disconnect or reboot: approval UI, retry state, status and the
// last error are cleared.
func (s *Sim) Reset() {
	s.dev.Reset()
	s.lastErr = ErrorMessage{}
	s.refused = 0
}

// SimView is what the simulated device shows.
type SimView struct {
	DeviceView
	LastError ErrorMessage // the last error the host reported; zero if none
	Refused   int          // frames refused since the last Reset
}

// View returns what the device shows at now.
func (s *Sim) View(now time.Time) SimView {
	return SimView{DeviceView: s.dev.View(now), LastError: s.lastErr, Refused: s.refused}
}

func (s *Sim) refuse(err error) [][]byte {
	s.refused++
	if m, ok := Reply(err); ok {
		return [][]byte{s.encode(m)}
	}
	return nil
}

func (s *Sim) encode(m Message) []byte {
	f, err := s.neg.Encode(m)
	if err != nil {
		// Only messages built from validated input reach here.
		panic(fmt.Sprintf("nexting: simulator built an invalid %s: %v", m.Type(), err))
	}
	return f
}

// wrongDirection is the refusal of a valid message that the receiving end
// never accepts (a downlink type from a device, an uplink type from a
// host).
func wrongDirection(m Message, size int) *Error {
	return &Error{Code: CodeBadMessage, Field: "t", Detail: "not accepted from this sender",
		Type: m.Type(), ID: messageID(m), Size: size}
}

// messageID is the request id a message carries, if any.
func messageID(m Message) string {
	switch m := m.(type) {
	case Present:
		return m.ID
	case Answer:
		return m.ID
	case Resolved:
		return m.ID
	case ErrorMessage:
		return m.ID
	case NavPresent:
		return m.ID
	case NavMove:
		return m.ID
	case NavSelect:
		return m.ID
	case NavResolved:
		return m.ID
	}
	return ""
}
