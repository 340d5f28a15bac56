package nexting

import "strconv"

// keys/1 (profiles sheet, "keys/1"): a volatile key presentation and
// replay-protected key events. Closed messages, closed key entries.

// Keymap (host → device) replaces the whole key presentation.
type Keymap struct {
	Rev  uint32
	Keys []Key // 0–64, slots unique
}

// Key is one presented key.
type Key struct {
	Slot    int    // 0–63
	Label   string // 1–32 bytes, no control characters
	Enabled bool
	Light   Light
	RGB     *RGB // optional
}

// RGB is a key colour, three integers 0–255.
type RGB [3]uint8

// KeyEvent (device → host) reports one gesture on a key.
type KeyEvent struct {
	Slot  int // 0–63
	Event Gesture
	Seq   uint32
}

func (Keymap) Type() Type   { return TypeKeymap }
func (KeyEvent) Type() Type { return TypeKeyEvent }

func (m Keymap) validate() *Error {
	if e := checkCount("keys", len(m.Keys), 0, maxKeys); e != nil {
		return e
	}
	var seen uint64
	for i, k := range m.Keys {
		if e := checkRange(elemField("keys", i, "slot"), int64(k.Slot), 0, maxKeySlot); e != nil {
			return e
		}
		if seen&(1<<k.Slot) != 0 {
			return badMessage(elemField("keys", i, "slot"), "duplicate slot")
		}
		seen |= 1 << k.Slot
		if e := firstErr(
			checkText(elemField("keys", i, "label"), k.Label, 1, maxShortLabel, noControl),
			checkEnum(elemField("keys", i, "light"), k.Light.Valid())); e != nil {
			return e
		}
	}
	return nil
}

func (m KeyEvent) validate() *Error {
	return firstErr(checkRange("slot", int64(m.Slot), 0, maxKeySlot), checkEnum("event", m.Event.Valid()))
}

func (m Keymap) appendJSON(w *writer) {
	w.begin(TypeKeymap)
	w.uint("rev", uint64(m.Rev))
	w.list("keys", len(m.Keys), func(i int) {
		k := m.Keys[i]
		w.obj("slot")
		w.b = strconv.AppendInt(w.b, int64(k.Slot), 10)
		w.str("label", k.Label)
		w.bool("enabled", k.Enabled)
		w.str("light", string(k.Light))
		if k.RGB != nil {
			w.list("rgb", 3, func(j int) { w.b = strconv.AppendUint(w.b, uint64(k.RGB[j]), 10) })
		}
		w.end()
	})
}

func (m KeyEvent) appendJSON(w *writer) {
	w.begin(TypeKeyEvent)
	w.int("slot", int64(m.Slot))
	w.str("event", string(m.Event))
	w.uint("seq", uint64(m.Seq))
}

var (
	keymapFields   = []string{"v", "t", "rev", "keys"}
	keyFields      = []string{"slot", "label", "enabled", "light", "rgb"}
	keyEventFields = []string{"v", "t", "slot", "event", "seq"}
)

func parseKeymap(r *reader) Message {
	o := r.root
	r.closed(o, top, keymapFields)
	m := Keymap{Rev: r.u32(o, top, "rev")}
	first, n := r.array(o, top, "keys")
	if r.err != nil {
		return nil
	}
	if n > maxKeys {
		r.fail(top.field("keys"), "must have 0-64 entries")
		return nil
	}
	m.Keys = make([]Key, 0, n)
	for i, c := 0, first; c >= 0; i, c = i+1, r.next(c) {
		p := top.field("keys").elem(i)
		if !r.objectAt(c, p) {
			return nil
		}
		r.closed(c, p, keyFields)
		k := Key{
			Slot:    r.int(c, p, "slot"),
			Label:   r.str(c, p, "label"),
			Enabled: r.boolean(c, p, "enabled"),
			Light:   Light(r.str(c, p, "light")),
		}
		if rgb := r.get(c, "rgb"); rgb >= 0 {
			k.RGB = r.rgb(rgb, p.field("rgb"))
		}
		m.Keys = append(m.Keys, k)
	}
	return m
}

// rgb reads exactly three integers 0–255.
func (r *reader) rgb(n int32, p path) *RGB {
	if !r.isKind(n, p, '[', "an array") {
		return nil
	}
	if r.node(n).n != 3 {
		r.fail(p, "must be exactly three integers 0-255")
		return nil
	}
	var out RGB
	for i, c := 0, r.node(n).first; c >= 0; i, c = i+1, r.next(c) {
		v := r.int64At(c, p.elem(i))
		if r.err == nil && (v < 0 || v > 255) {
			r.fail(p.elem(i), "must be 0-255")
		}
		out[i] = uint8(v)
	}
	return &out
}

func parseKeyEvent(r *reader) Message {
	o := r.root
	r.closed(o, top, keyEventFields)
	return KeyEvent{Slot: r.int(o, top, "slot"), Event: Gesture(r.str(o, top, "event")), Seq: r.u32(o, top, "seq")}
}
