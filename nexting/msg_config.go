package nexting

import "strconv"

// config/1 (profiles sheet, "config/1"): an atomic, versioned device
// configuration and its result. Closed messages, closed entries.

// Config (host → device) proposes a complete configuration.
type Config struct {
	Rev     uint32
	Entries []ConfigEntry // 0–32, keys unique
}

// ConfigEntry is one key and its value.
type ConfigEntry struct {
	Key   string // 1–48 ASCII, [A-Za-z0-9][A-Za-z0-9._-]*
	Value ConfigValue
}

// ConfigKind says which arm of a ConfigValue is set.
type ConfigKind int

const (
	ConfigBool   ConfigKind = iota + 1 // a boolean
	ConfigInt                          // an integer in ±1000000
	ConfigString                       // 0–128 bytes, no control characters
)

// ConfigValue is a boolean, an integer or a string; objects, arrays,
// floats and null are not config values. Build one with BoolValue,
// IntValue or StringValue.
type ConfigValue struct {
	Kind ConfigKind
	Bool bool
	Int  int
	Str  string
}

func BoolValue(b bool) ConfigValue     { return ConfigValue{Kind: ConfigBool, Bool: b} }
func IntValue(i int) ConfigValue       { return ConfigValue{Kind: ConfigInt, Int: i} }
func StringValue(s string) ConfigValue { return ConfigValue{Kind: ConfigString, Str: s} }

// ConfigResult (device → host) reports whether a revision was applied.
type ConfigResult struct {
	Rev    uint32
	Status ConfigStatus
	Code   ConfigCode // required when Status is rejected, absent ("") when applied
}

func (Config) Type() Type       { return TypeConfig }
func (ConfigResult) Type() Type { return TypeConfigResult }

// validConfigKey: 1–48 ASCII characters of [A-Za-z0-9][A-Za-z0-9._-]*.
func validConfigKey(k string) bool {
	if len(k) == 0 || len(k) > maxConfigKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-')) {
			return false
		}
	}
	return true
}

func (m Config) validate() *Error {
	if e := checkCount("entries", len(m.Entries), 0, maxConfigEntries); e != nil {
		return e
	}
	for i, en := range m.Entries {
		if !validConfigKey(en.Key) {
			return badMessage(elemField("entries", i, "key"), "must be 1-48 ASCII characters of [A-Za-z0-9][A-Za-z0-9._-]*")
		}
		for _, prev := range m.Entries[:i] {
			if prev.Key == en.Key {
				return badMessage(elemField("entries", i, "key"), "duplicate key")
			}
		}
		f := elemField("entries", i, "value")
		switch en.Value.Kind {
		case ConfigBool:
		case ConfigInt:
			if e := checkRange(f, int64(en.Value.Int), -maxConfigAbs, maxConfigAbs); e != nil {
				return e
			}
		case ConfigString:
			if e := checkText(f, en.Value.Str, 0, maxConfigString, noControl); e != nil {
				return e
			}
		default:
			return badMessage(f, "must be a boolean, an integer or a string")
		}
	}
	return nil
}

func (m ConfigResult) validate() *Error {
	if e := checkEnum("status", m.Status.Valid()); e != nil {
		return e
	}
	switch {
	case m.Status == ConfigApplied && m.Code != "":
		return badMessage("code", "must be absent when status is applied")
	case m.Status == ConfigRejected && m.Code == "":
		return badMessage("code", "required when status is rejected")
	case m.Status == ConfigRejected:
		return checkEnum("code", m.Code.Valid())
	}
	return nil
}

func (m Config) appendJSON(w *writer) {
	w.begin(TypeConfig)
	w.uint("rev", uint64(m.Rev))
	w.list("entries", len(m.Entries), func(i int) {
		en := m.Entries[i]
		w.obj("key")
		w.quote(en.Key)
		w.key("value")
		switch en.Value.Kind {
		case ConfigBool:
			w.boolValue(en.Value.Bool)
		case ConfigInt:
			w.b = strconv.AppendInt(w.b, int64(en.Value.Int), 10)
		default:
			w.quote(en.Value.Str)
		}
		w.end()
	})
}

func (m ConfigResult) appendJSON(w *writer) {
	w.begin(TypeConfigResult)
	w.uint("rev", uint64(m.Rev))
	w.str("status", string(m.Status))
	if m.Code != "" {
		w.str("code", string(m.Code))
	}
}

var (
	configFields       = []string{"v", "t", "rev", "entries"}
	configEntryFields  = []string{"key", "value"}
	configResultFields = []string{"v", "t", "rev", "status", "code"}
)

func parseConfig(r *reader) Message {
	o := r.root
	r.closed(o, top, configFields)
	m := Config{Rev: r.u32(o, top, "rev")}
	first, n := r.array(o, top, "entries")
	if r.err != nil {
		return nil
	}
	if n > maxConfigEntries {
		r.fail(top.field("entries"), "must have 0-32 entries")
		return nil
	}
	m.Entries = make([]ConfigEntry, 0, n)
	for i, c := 0, first; c >= 0; i, c = i+1, r.next(c) {
		p := top.field("entries").elem(i)
		if !r.objectAt(c, p) {
			return nil
		}
		r.closed(c, p, configEntryFields)
		en := ConfigEntry{Key: r.str(c, p, "key")}
		v := r.need(c, p, "value")
		if r.err != nil {
			return nil
		}
		switch r.node(v).kind {
		case 't', 'f':
			en.Value = BoolValue(r.node(v).kind == 't')
		case '0':
			en.Value = IntValue(r.intAt(v, p.field("value")))
		case '"':
			en.Value = StringValue(r.strAt(v, p.field("value")))
		default:
			r.fail(p.field("value"), "must be a boolean, an integer or a string")
		}
		m.Entries = append(m.Entries, en)
	}
	return m
}

func parseConfigResult(r *reader) Message {
	o := r.root
	r.closed(o, top, configResultFields)
	m := ConfigResult{Rev: r.u32(o, top, "rev"), Status: ConfigStatus(r.str(o, top, "status"))}
	if c := r.get(o, "code"); c >= 0 {
		// Present but empty is not "absent": refuse it here, since "" means
		// absent in Go.
		m.Code = ConfigCode(r.strAt(c, top.field("code")))
		if r.err == nil && m.Code == "" {
			r.fail(top.field("code"), "not a member of the enum")
		}
	}
	return m
}
