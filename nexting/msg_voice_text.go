package nexting

// voice/1 and text/1 (profiles sheet). Closed messages: voice never carries
// audio or transcripts (vectors voice-v1 "audio bytes forbidden"), text
// never carries actions (text-v1 "unknown command field").

// VoiceEvent (device → host) controls the host-owned microphone.
type VoiceEvent struct {
	Event VoiceAction
	Seq   uint32
}

// VoiceState (host → device) shows the microphone lifecycle.
type VoiceState struct {
	State VoicePhase
	Label string // optional: "" is absent; else 1–64 bytes, no control characters
}

// Text (host → device) replaces one plain-text display channel; empty
// Content clears it.
type Text struct {
	Channel int    // 0–7
	Title   string // optional: "" is absent; else 1–64 bytes, no control characters
	Content string // 0–1024 bytes; LF and TAB are the only control characters allowed
}

func (VoiceEvent) Type() Type { return TypeVoiceEvent }
func (VoiceState) Type() Type { return TypeVoiceState }
func (Text) Type() Type       { return TypeText }

func (m VoiceEvent) validate() *Error { return checkEnum("event", m.Event.Valid()) }

func (m VoiceState) validate() *Error {
	if e := checkEnum("state", m.State.Valid()); e != nil {
		return e
	}
	if m.Label != "" {
		return checkText("label", m.Label, 1, maxLabelBytes, noControl)
	}
	return nil
}

func (m Text) validate() *Error {
	if e := checkRange("channel", int64(m.Channel), 0, maxTextChannel); e != nil {
		return e
	}
	if m.Title != "" {
		if e := checkText("title", m.Title, 1, maxLabelBytes, noControl); e != nil {
			return e
		}
	}
	return checkText("content", m.Content, 0, maxContentBytes, lfTab)
}

func (m VoiceEvent) appendJSON(w *writer) {
	w.begin(TypeVoiceEvent)
	w.str("event", string(m.Event))
	w.uint("seq", uint64(m.Seq))
}

func (m VoiceState) appendJSON(w *writer) {
	w.begin(TypeVoiceState)
	w.str("state", string(m.State))
	w.optStr("label", m.Label)
}

func (m Text) appendJSON(w *writer) {
	w.begin(TypeText)
	w.int("channel", int64(m.Channel))
	w.optStr("title", m.Title)
	w.str("content", m.Content)
}

var (
	voiceEventFields = []string{"v", "t", "event", "seq"}
	voiceStateFields = []string{"v", "t", "state", "label"}
	textFields       = []string{"v", "t", "channel", "title", "content"}
)

func parseVoiceEvent(r *reader) Message {
	o := r.root
	r.closed(o, top, voiceEventFields)
	return VoiceEvent{Event: VoiceAction(r.str(o, top, "event")), Seq: r.u32(o, top, "seq")}
}

func parseVoiceState(r *reader) Message {
	o := r.root
	r.closed(o, top, voiceStateFields)
	return VoiceState{State: VoicePhase(r.str(o, top, "state")), Label: r.optStr(o, top, "label")}
}

func parseText(r *reader) Message {
	o := r.root
	r.closed(o, top, textFields)
	return Text{Channel: r.int(o, top, "channel"), Title: r.optStr(o, top, "title"), Content: r.str(o, top, "content")}
}
