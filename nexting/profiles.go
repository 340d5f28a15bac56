package nexting

// Profile is a negotiated profile name as Device Info lists it.
type Profile string

// The nine profiles of wire major 1 (short spec §6, profiles sheet).
const (
	ProfileApproval   Profile = "approval/1"
	ProfileStatus     Profile = "status/1"
	ProfileNavigation Profile = "navigation/1"
	ProfileKeys       Profile = "keys/1"
	ProfileRotary     Profile = "rotary/1"
	ProfileVoice      Profile = "voice/1"
	ProfileText       Profile = "text/1"
	ProfileUsage      Profile = "usage/1"
	ProfileConfig     Profile = "config/1"
)

var knownProfiles = [...]Profile{ProfileApproval, ProfileStatus, ProfileNavigation, ProfileKeys,
	ProfileRotary, ProfileVoice, ProfileText, ProfileUsage, ProfileConfig}

// Profiles lists the nine profiles this package knows.
func Profiles() []Profile { return append([]Profile(nil), knownProfiles[:]...) }

// Known reports whether p is one of the nine profiles.
func (p Profile) Known() bool { return p.bit() != 0 }

// profileSet is a set of known profiles, one bit each.
type profileSet uint16

func (p Profile) bit() profileSet {
	for i, k := range knownProfiles {
		if k == p {
			return 1 << i
		}
	}
	return 0
}

func (s profileSet) has(p Profile) bool { b := p.bit(); return b != 0 && s&b == b }

func (s profileSet) list() []Profile {
	var out []Profile
	for i, k := range knownProfiles {
		if s&(1<<i) != 0 {
			out = append(out, k)
		}
	}
	return out
}

// Type is a message's "t".
type Type string

// The 21 message types of the nine profiles. (The short spec's summary line
// says "20 message variants", but its own profile table and the published
// schema name 21: the five of §2–6 and sixteen interaction messages.)
const (
	TypePresent      Type = "present"
	TypeAnswer       Type = "answer"
	TypeResolved     Type = "resolved"
	TypeError        Type = "error"
	TypeStatus       Type = "status"
	TypeNavPresent   Type = "nav_present"
	TypeNavMove      Type = "nav_move"
	TypeNavSelect    Type = "nav_select"
	TypeNavResolved  Type = "nav_resolved"
	TypeKeymap       Type = "keymap"
	TypeKeyEvent     Type = "key_event"
	TypeRotaryMap    Type = "rotary_map"
	TypeRotaryEvent  Type = "rotary_event"
	TypeRotaryPress  Type = "rotary_press"
	TypeVoiceEvent   Type = "voice_event"
	TypeVoiceState   Type = "voice_state"
	TypeText         Type = "text"
	TypeUsage        Type = "usage"
	TypeUsageClear   Type = "usage_clear"
	TypeConfig       Type = "config"
	TypeConfigResult Type = "config_result"
)

// Sender says which end may send a message type.
type Sender int

const (
	FromHost   Sender = 1 << iota // host → device (downlink)
	FromDevice                    // device → host (uplink)
	FromEither = FromHost | FromDevice
)

type typeInfo struct {
	t       Type
	profile Profile
	sender  Sender
	parse   func(r *reader) Message
}

// types is the dispatch table: one row per message type, in spec order.
var types = [...]typeInfo{
	{TypePresent, ProfileApproval, FromHost, parsePresent},
	{TypeAnswer, ProfileApproval, FromDevice, parseAnswer},
	{TypeResolved, ProfileApproval, FromHost, parseResolved},
	{TypeError, ProfileApproval, FromEither, parseErrorMessage},
	{TypeStatus, ProfileStatus, FromHost, parseStatus},
	{TypeNavPresent, ProfileNavigation, FromHost, parseNavPresent},
	{TypeNavMove, ProfileNavigation, FromDevice, parseNavMove},
	{TypeNavSelect, ProfileNavigation, FromDevice, parseNavSelect},
	{TypeNavResolved, ProfileNavigation, FromHost, parseNavResolved},
	{TypeKeymap, ProfileKeys, FromHost, parseKeymap},
	{TypeKeyEvent, ProfileKeys, FromDevice, parseKeyEvent},
	{TypeRotaryMap, ProfileRotary, FromHost, parseRotaryMap},
	{TypeRotaryEvent, ProfileRotary, FromDevice, parseRotaryEvent},
	{TypeRotaryPress, ProfileRotary, FromDevice, parseRotaryPress},
	{TypeVoiceEvent, ProfileVoice, FromDevice, parseVoiceEvent},
	{TypeVoiceState, ProfileVoice, FromHost, parseVoiceState},
	{TypeText, ProfileText, FromHost, parseText},
	{TypeUsage, ProfileUsage, FromHost, parseUsage},
	{TypeUsageClear, ProfileUsage, FromHost, parseUsageClear},
	{TypeConfig, ProfileConfig, FromHost, parseConfig},
	{TypeConfigResult, ProfileConfig, FromDevice, parseConfigResult},
}

// Types lists the 21 message types in spec order.
func Types() []Type {
	out := make([]Type, len(types))
	for i := range types {
		out[i] = types[i].t
	}
	return out
}

// lookupType finds a type by its decoded "t" bytes without allocating.
func lookupType(t []byte) *typeInfo {
	for i := range types {
		if string(types[i].t) == string(t) {
			return &types[i]
		}
	}
	return nil
}

func (t Type) info() *typeInfo { return lookupType([]byte(t)) }

// Known reports whether t is one of the 21 types.
func (t Type) Known() bool { return t.info() != nil }

// Profile is the profile that carries t ("" for an unknown type).
func (t Type) Profile() Profile {
	if i := t.info(); i != nil {
		return i.profile
	}
	return ""
}

// Sender is the end that may send t (0 for an unknown type). The codec
// does not enforce direction; the session layer does.
func (t Type) Sender() Sender {
	if i := t.info(); i != nil {
		return i.sender
	}
	return 0
}
