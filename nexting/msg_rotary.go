package nexting

import "strconv"

// rotary/1 (profiles sheet, "rotary/1"): a volatile rotary presentation,
// rotation deltas and press gestures. Closed messages, closed controls.

// RotaryMap (host → device) replaces the whole rotary presentation.
type RotaryMap struct {
	Rev      uint32
	Controls []RotaryControl // 0–16, slots unique
}

// RotaryControl is one presented rotary.
type RotaryControl struct {
	Slot  int    // 0–15
	Label string // 1–32 bytes, no control characters
	Value int    // Min ≤ Value ≤ Max, all within ±1000000
	Min   int
	Max   int
	Wrap  bool
}

// RotaryEvent (device → host) reports a rotation.
type RotaryEvent struct {
	Slot  int // 0–15
	Delta int // non-zero, -127…127
	Seq   uint32
}

// RotaryPress (device → host) reports a press gesture on a rotary.
type RotaryPress struct {
	Slot  int // 0–15
	Event Gesture
	Seq   uint32
}

func (RotaryMap) Type() Type   { return TypeRotaryMap }
func (RotaryEvent) Type() Type { return TypeRotaryEvent }
func (RotaryPress) Type() Type { return TypeRotaryPress }

func (m RotaryMap) validate() *Error {
	if e := checkCount("controls", len(m.Controls), 0, maxRotaryCtrls); e != nil {
		return e
	}
	var seen uint16
	for i, c := range m.Controls {
		if e := checkRange(elemField("controls", i, "slot"), int64(c.Slot), 0, maxRotarySlot); e != nil {
			return e
		}
		if seen&(1<<c.Slot) != 0 {
			return badMessage(elemField("controls", i, "slot"), "duplicate slot")
		}
		seen |= 1 << c.Slot
		if e := firstErr(
			checkText(elemField("controls", i, "label"), c.Label, 1, maxShortLabel, noControl),
			checkRange(elemField("controls", i, "value"), int64(c.Value), -maxRotaryAbs, maxRotaryAbs),
			checkRange(elemField("controls", i, "min"), int64(c.Min), -maxRotaryAbs, maxRotaryAbs),
			checkRange(elemField("controls", i, "max"), int64(c.Max), -maxRotaryAbs, maxRotaryAbs)); e != nil {
			return e
		}
		if c.Min > c.Max {
			return badMessage(elemField("controls", i, "min"), "must not exceed max")
		}
		if c.Value < c.Min || c.Value > c.Max {
			return badMessage(elemField("controls", i, "value"), "must be within min-max")
		}
	}
	return nil
}

func (m RotaryEvent) validate() *Error {
	if e := checkRange("slot", int64(m.Slot), 0, maxRotarySlot); e != nil {
		return e
	}
	if m.Delta == 0 {
		return badMessage("delta", "must not be zero")
	}
	return checkRange("delta", int64(m.Delta), -maxDelta, maxDelta)
}

func (m RotaryPress) validate() *Error {
	return firstErr(checkRange("slot", int64(m.Slot), 0, maxRotarySlot), checkEnum("event", m.Event.Valid()))
}

func (m RotaryMap) appendJSON(w *writer) {
	w.begin(TypeRotaryMap)
	w.uint("rev", uint64(m.Rev))
	w.list("controls", len(m.Controls), func(i int) {
		c := m.Controls[i]
		w.obj("slot")
		w.b = strconv.AppendInt(w.b, int64(c.Slot), 10)
		w.str("label", c.Label)
		w.int("value", int64(c.Value))
		w.int("min", int64(c.Min))
		w.int("max", int64(c.Max))
		w.bool("wrap", c.Wrap)
		w.end()
	})
}

func (m RotaryEvent) appendJSON(w *writer) {
	w.begin(TypeRotaryEvent)
	w.int("slot", int64(m.Slot))
	w.int("delta", int64(m.Delta))
	w.uint("seq", uint64(m.Seq))
}

func (m RotaryPress) appendJSON(w *writer) {
	w.begin(TypeRotaryPress)
	w.int("slot", int64(m.Slot))
	w.str("event", string(m.Event))
	w.uint("seq", uint64(m.Seq))
}

var (
	rotaryMapFields   = []string{"v", "t", "rev", "controls"}
	rotaryCtrlFields  = []string{"slot", "label", "value", "min", "max", "wrap"}
	rotaryEventFields = []string{"v", "t", "slot", "delta", "seq"}
	rotaryPressFields = []string{"v", "t", "slot", "event", "seq"}
)

func parseRotaryMap(r *reader) Message {
	o := r.root
	r.closed(o, top, rotaryMapFields)
	m := RotaryMap{Rev: r.u32(o, top, "rev")}
	first, n := r.array(o, top, "controls")
	if r.err != nil {
		return nil
	}
	if n > maxRotaryCtrls {
		r.fail(top.field("controls"), "must have 0-16 entries")
		return nil
	}
	m.Controls = make([]RotaryControl, 0, n)
	for i, c := 0, first; c >= 0; i, c = i+1, r.next(c) {
		p := top.field("controls").elem(i)
		if !r.objectAt(c, p) {
			return nil
		}
		r.closed(c, p, rotaryCtrlFields)
		m.Controls = append(m.Controls, RotaryControl{
			Slot:  r.int(c, p, "slot"),
			Label: r.str(c, p, "label"),
			Value: r.int(c, p, "value"),
			Min:   r.int(c, p, "min"),
			Max:   r.int(c, p, "max"),
			Wrap:  r.boolean(c, p, "wrap"),
		})
	}
	return m
}

func parseRotaryEvent(r *reader) Message {
	o := r.root
	r.closed(o, top, rotaryEventFields)
	return RotaryEvent{Slot: r.int(o, top, "slot"), Delta: r.int(o, top, "delta"), Seq: r.u32(o, top, "seq")}
}

func parseRotaryPress(r *reader) Message {
	o := r.root
	r.closed(o, top, rotaryPressFields)
	return RotaryPress{Slot: r.int(o, top, "slot"), Event: Gesture(r.str(o, top, "event")), Seq: r.u32(o, top, "seq")}
}
