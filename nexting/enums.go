package nexting

// The closed enums of wire major 1. Every set is lower case and
// case-sensitive (short spec §1); Valid reports membership and the decoder
// and the encoder both refuse anything else.

// Choice is answer.ch.
type Choice string

const (
	ChoiceAllow Choice = "allow"
	ChoiceDeny  Choice = "deny"
)

func (c Choice) Valid() bool { return c == ChoiceAllow || c == ChoiceDeny }

// Reason is resolved.r.
type Reason string

const (
	ReasonAnswered  Reason = "answered"
	ReasonExpired   Reason = "expired"
	ReasonCancelled Reason = "cancelled"
	ReasonReplaced  Reason = "replaced"
)

func (r Reason) Valid() bool {
	switch r {
	case ReasonAnswered, ReasonExpired, ReasonCancelled, ReasonReplaced:
		return true
	}
	return false
}

// AgentState is status.agents[].state.
type AgentState string

const (
	AgentIdle       AgentState = "idle"
	AgentThinking   AgentState = "thinking"
	AgentWorking    AgentState = "working"
	AgentComplete   AgentState = "complete"
	AgentNeedsInput AgentState = "needs_input"
	AgentError      AgentState = "error"
)

func (s AgentState) Valid() bool {
	switch s {
	case AgentIdle, AgentThinking, AgentWorking, AgentComplete, AgentNeedsInput, AgentError:
		return true
	}
	return false
}

// Direction is nav_move.dir.
type Direction string

const (
	DirPrev  Direction = "prev"
	DirNext  Direction = "next"
	DirUp    Direction = "up"
	DirDown  Direction = "down"
	DirLeft  Direction = "left"
	DirRight Direction = "right"
)

func (d Direction) Valid() bool {
	switch d {
	case DirPrev, DirNext, DirUp, DirDown, DirLeft, DirRight:
		return true
	}
	return false
}

// NavReason is nav_resolved.r.
type NavReason string

const (
	NavSelected  NavReason = "selected"
	NavCancelled NavReason = "cancelled"
	NavExpired   NavReason = "expired"
	NavReplaced  NavReason = "replaced"
)

func (r NavReason) Valid() bool {
	switch r {
	case NavSelected, NavCancelled, NavExpired, NavReplaced:
		return true
	}
	return false
}

// Gesture is key_event.event and rotary_press.event.
type Gesture string

const (
	GesturePress   Gesture = "press"
	GestureRelease Gesture = "release"
	GestureHold    Gesture = "hold"
	GestureDouble  Gesture = "double"
)

func (g Gesture) Valid() bool {
	switch g {
	case GesturePress, GestureRelease, GestureHold, GestureDouble:
		return true
	}
	return false
}

// Light is keymap.keys[].light.
type Light string

const (
	LightOff   Light = "off"
	LightDim   Light = "dim"
	LightSolid Light = "solid"
	LightPulse Light = "pulse"
)

func (l Light) Valid() bool {
	switch l {
	case LightOff, LightDim, LightSolid, LightPulse:
		return true
	}
	return false
}

// VoiceAction is voice_event.event.
type VoiceAction string

const (
	VoiceStart  VoiceAction = "start"
	VoiceStop   VoiceAction = "stop"
	VoiceCancel VoiceAction = "cancel"
)

func (a VoiceAction) Valid() bool { return a == VoiceStart || a == VoiceStop || a == VoiceCancel }

// VoicePhase is voice_state.state.
type VoicePhase string

const (
	VoiceIdle         VoicePhase = "idle"
	VoiceListening    VoicePhase = "listening"
	VoiceTranscribing VoicePhase = "transcribing"
	VoiceSubmitted    VoicePhase = "submitted"
	VoiceError        VoicePhase = "error"
)

func (p VoicePhase) Valid() bool {
	switch p {
	case VoiceIdle, VoiceListening, VoiceTranscribing, VoiceSubmitted, VoiceError:
		return true
	}
	return false
}

// ConfigStatus is config_result.status.
type ConfigStatus string

const (
	ConfigApplied  ConfigStatus = "applied"
	ConfigRejected ConfigStatus = "rejected"
)

func (s ConfigStatus) Valid() bool { return s == ConfigApplied || s == ConfigRejected }

// ConfigCode is config_result.code (only with status rejected).
type ConfigCode string

const (
	ConfigUnknownKey   ConfigCode = "unknown_key"
	ConfigInvalidValue ConfigCode = "invalid_value"
	ConfigStorageError ConfigCode = "storage_error"
	ConfigUnsupported  ConfigCode = "unsupported"
)

func (c ConfigCode) Valid() bool {
	switch c {
	case ConfigUnknownKey, ConfigInvalidValue, ConfigStorageError, ConfigUnsupported:
		return true
	}
	return false
}
