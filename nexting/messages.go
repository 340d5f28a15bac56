package nexting

import "strconv"

// Message is one decoded wire message: one of the 21 value types of this
// package (Present, Answer, …, ConfigResult). Decode returns the value
// types, never pointers; a type switch reads them:
//
//	switch m := msg.(type) {
//	case nexting.Answer: …
//	}
//
// The interface is sealed: only this package's types implement it.
type Message interface {
	Type() Type
	validate() *Error
	appendJSON(w *writer)
}

// ---- approval/1 (short spec §2–5) ----

// Present (host → device) presents one approval. Its options are always
// exactly ["allow","deny"], so they have no field.
type Present struct {
	ID        string // 1–64 of [A-Za-z0-9._:-]
	Summary   string // "sum": 0–240 UTF-8 bytes, no U+0000
	TTLMillis int    // "ttl": 1–300000 ms from receipt
}

// Answer (device → host) reports one physical choice.
type Answer struct {
	ID     string
	Choice Choice // "ch"
}

// Resolved (host → device) finalizes one request.
type Resolved struct {
	ID     string
	Reason Reason // "r"
}

// ErrorMessage (either direction) reports a protocol failure.
type ErrorMessage struct {
	ID   string // optional: "" is absent
	Code Code
}

// ---- status/1 (short spec §6) ----

// Status (host → device) replaces every agent indicator; no agents clears
// them all.
type Status struct {
	Agents []Agent // 0–8, slots unique
}

// Agent is one status slot.
type Agent struct {
	Slot  int // 0–7
	State AgentState
	Label string // optional: "" is absent; else 1–64 bytes, no control characters
}

func (Present) Type() Type      { return TypePresent }
func (Answer) Type() Type       { return TypeAnswer }
func (Resolved) Type() Type     { return TypeResolved }
func (ErrorMessage) Type() Type { return TypeError }
func (Status) Type() Type       { return TypeStatus }

// options is present.opt, fixed by the spec.
var options = [2]string{string(ChoiceAllow), string(ChoiceDeny)}

func (m Present) validate() *Error {
	return firstErr(
		checkID("id", m.ID),
		checkText("sum", m.Summary, 0, MaxSummaryBytes, anyText),
		checkRange("ttl", int64(m.TTLMillis), 1, MaxTTLMillis))
}

func (m Answer) validate() *Error {
	return firstErr(checkID("id", m.ID), checkEnum("ch", m.Choice.Valid()))
}

func (m Resolved) validate() *Error {
	return firstErr(checkID("id", m.ID), checkEnum("r", m.Reason.Valid()))
}

func (m ErrorMessage) validate() *Error {
	if m.ID != "" {
		if e := checkID("id", m.ID); e != nil {
			return e
		}
	}
	return checkEnum("code", m.Code.Valid())
}

func (m Status) validate() *Error {
	if e := checkCount("agents", len(m.Agents), 0, maxStatusAgents); e != nil {
		return e
	}
	var seen uint8
	for i, a := range m.Agents {
		if e := checkRange(elemField("agents", i, "slot"), int64(a.Slot), 0, maxStatusSlot); e != nil {
			return e
		}
		if seen&(1<<a.Slot) != 0 {
			return badMessage(elemField("agents", i, "slot"), "duplicate slot")
		}
		seen |= 1 << a.Slot
		if !a.State.Valid() {
			return checkEnum(elemField("agents", i, "state"), false)
		}
		if a.Label != "" {
			if e := checkText(elemField("agents", i, "label"), a.Label, 1, maxLabelBytes, noControl); e != nil {
				return e
			}
		}
	}
	return nil
}

func (m Present) appendJSON(w *writer) {
	w.begin(TypePresent)
	w.str("id", m.ID)
	w.str("sum", m.Summary)
	w.key("opt")
	w.b = append(w.b, `["allow","deny"]`...)
	w.int("ttl", int64(m.TTLMillis))
}

func (m Answer) appendJSON(w *writer) {
	w.begin(TypeAnswer)
	w.str("id", m.ID)
	w.str("ch", string(m.Choice))
}

func (m Resolved) appendJSON(w *writer) {
	w.begin(TypeResolved)
	w.str("id", m.ID)
	w.str("r", string(m.Reason))
}

func (m ErrorMessage) appendJSON(w *writer) {
	w.begin(TypeError)
	w.optStr("id", m.ID)
	w.str("code", string(m.Code))
}

func (m Status) appendJSON(w *writer) {
	w.begin(TypeStatus)
	w.list("agents", len(m.Agents), func(i int) {
		a := m.Agents[i]
		w.obj("slot")
		w.b = strconv.AppendInt(w.b, int64(a.Slot), 10)
		w.str("state", string(a.State))
		w.optStr("label", a.Label)
		w.end()
	})
}

// The core five are open: valid, bounded unknown fields are ignored (short
// spec §1), so their parsers do not call closed.

func parsePresent(r *reader) Message {
	o := r.root
	m := Present{ID: r.str(o, top, "id"), Summary: r.str(o, top, "sum"), TTLMillis: r.int(o, top, "ttl")}
	first, n := r.array(o, top, "opt")
	if r.err == nil {
		ok := n == len(options)
		for i, c := 0, first; ok && c >= 0; i, c = i+1, r.next(c) {
			ok = r.node(c).kind == '"' && string(r.node(c).str) == options[i]
		}
		if !ok {
			r.fail(top.field("opt"), `must be exactly ["allow","deny"]`)
		}
	}
	return m
}

func parseAnswer(r *reader) Message {
	return Answer{ID: r.str(r.root, top, "id"), Choice: Choice(r.str(r.root, top, "ch"))}
}

func parseResolved(r *reader) Message {
	return Resolved{ID: r.str(r.root, top, "id"), Reason: Reason(r.str(r.root, top, "r"))}
}

func parseErrorMessage(r *reader) Message {
	return ErrorMessage{ID: r.optStr(r.root, top, "id"), Code: Code(r.str(r.root, top, "code"))}
}

func parseStatus(r *reader) Message {
	// Short spec §1: "id … absent on status".
	if r.get(r.root, "id") >= 0 {
		r.fail(top.field("id"), "must be absent on status")
	}
	first, n := r.array(r.root, top, "agents")
	if r.err != nil {
		return nil
	}
	if n > maxStatusAgents { // refuse before allocating for a long array
		r.fail(top.field("agents"), "must have 0-8 entries")
		return nil
	}
	m := Status{Agents: make([]Agent, 0, n)}
	for i, c := 0, first; c >= 0; i, c = i+1, r.next(c) {
		p := top.field("agents").elem(i)
		if !r.objectAt(c, p) {
			return nil
		}
		// Agent objects are open too: the schema does not close them.
		m.Agents = append(m.Agents, Agent{
			Slot:  r.int(c, p, "slot"),
			State: AgentState(r.str(c, p, "state")),
			Label: r.optStr(c, p, "label"),
		})
	}
	return m
}
