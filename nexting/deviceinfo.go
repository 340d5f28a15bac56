package nexting

import "math"

// DeviceInfo is the device's capability declaration, read from its GATT
// characteristic before any traffic (short spec "Device Info contract",
// profiles sheet "Device Info"). Optional fields are zero, nil or "" when
// absent.
type DeviceInfo struct {
	Protocol string   // always "nexting-device"
	Spec     string   // the spec version the device implements
	Wire     []int    // 1–4 unique wire majors 1–65535, including 1
	Profiles []string // 1–16 unique names, including approval/1; unknown names are kept
	Model    string
	FW       string // "fw"

	MaxMessageBytes int64 // 512–4294967295 as declared; Negotiate caps it
	MaxSummaryBytes int   // 1–240

	StatusSlots int // "statusSlots" 0–8; 0 when absent. Positive only with status/1

	DeviceID     string // "device_id": a canonical UUID; never a credential
	Manufacturer string
	DisplayName  string // "display_name"
	SerialNumber string // "serial_number"

	ButtonCount         *int // 0–1024
	ApprovalButtonCount *int // 0–1024, ≤ ButtonCount when both are present
	CustomButtonCount   *int // 0–1024, ≤ ButtonCount when both are present
	RotaryCount         *int // 0–64
	RotaryPressCount    *int // 0–64, ≤ RotaryCount when both are present
	BatteryService      bool // "battery_service"; false when absent

	Display *Display
	Haptics []string // 1–8 unique names of 1–32 bytes when present

	// Vendor is the inert vendor section, nil when absent or dropped.
	// VendorErr says why an invalid section was dropped (the rest of Device
	// Info stays valid).
	Vendor    *Vendor
	VendorErr error
}

// Display is the optional display capability.
type Display struct {
	Type   string // 1–32 printable bytes
	Width  int    // 1–4096
	Height int    // 1–4096
}

// Supports reports whether the device lists profile p. Static capability
// fields never imply a profile.
func (d *DeviceInfo) Supports(p Profile) bool {
	for _, s := range d.Profiles {
		if s == string(p) {
			return true
		}
	}
	return false
}

// ParseDeviceInfo parses and validates a Device Info value: one UTF-8 JSON
// object, not newline-framed, at most 4096 bytes and eight nesting levels.
// Any invalid required or known optional field rejects the whole value
// (duplicate names, a decoded U+0000, control characters in descriptors,
// non-canonical integers and invalid UTF-8 included); unknown fields are
// ignored; an invalid vendor section is dropped (VendorErr). Codes:
// message_too_large for an oversize value, unsupported_version when wire
// lacks 1, unsupported_profile when profiles lacks approval/1, bad_message
// otherwise.
//
// Unlike a frame, Device Info may contain insignificant whitespace: it is
// not framed, and published firmware templates are pretty-printed.
func ParseDeviceInfo(data []byte) (*DeviceInfo, error) {
	if len(data) > MaxDeviceInfoBytes {
		e := &Error{Code: CodeMessageTooLarge, Detail: "Device Info exceeds 4096 bytes", Size: len(data)}
		return nil, e
	}
	d := getDoc()
	defer putDoc(d)
	if e := d.parse(data, false); e != nil {
		return nil, e
	}
	r := &reader{d: d}
	info := readDeviceInfo(r)
	if r.err != nil {
		return nil, r.err
	}
	if e := info.check(); e != nil {
		return nil, e
	}
	if v := d.member(0, "vendor"); v >= 0 {
		info.Vendor, info.VendorErr = parseVendor(d, v)
	}
	return info, nil
}

func readDeviceInfo(r *reader) *DeviceInfo {
	o := r.root
	info := &DeviceInfo{
		Protocol:        r.str(o, top, "protocol"),
		Spec:            r.str(o, top, "spec"),
		Model:           r.str(o, top, "model"),
		FW:              r.str(o, top, "fw"),
		MaxMessageBytes: r.int64At(r.need(o, top, "max_message_bytes"), top.field("max_message_bytes")),
		MaxSummaryBytes: r.int(o, top, "max_summary_bytes"),
		DeviceID:        r.optStr(o, top, "device_id"),
		Manufacturer:    r.optStr(o, top, "manufacturer"),
		DisplayName:     r.optStr(o, top, "display_name"),
		SerialNumber:    r.optStr(o, top, "serial_number"),
	}
	if r.err != nil {
		return nil
	}
	first, n := r.array(o, top, "wire")
	for i, c := 0, first; c >= 0 && i < 5; i, c = i+1, r.next(c) {
		info.Wire = append(info.Wire, r.intAt(c, top.field("wire").elem(i)))
	}
	if r.err == nil && n > 4 {
		r.fail(top.field("wire"), "must have 1-4 entries")
	}
	info.Profiles = r.stringList(o, "profiles", 17)
	if n := r.get(o, "statusSlots"); n >= 0 {
		info.StatusSlots = r.intAt(n, top.field("statusSlots"))
	}
	info.ButtonCount = r.optInt(o, "button_count")
	info.ApprovalButtonCount = r.optInt(o, "approval_button_count")
	info.CustomButtonCount = r.optInt(o, "custom_button_count")
	info.RotaryCount = r.optInt(o, "rotary_count")
	info.RotaryPressCount = r.optInt(o, "rotary_press_count")
	if n := r.get(o, "battery_service"); n >= 0 {
		info.BatteryService = r.boolean(o, top, "battery_service")
	}
	if n := r.get(o, "display"); n >= 0 && r.objectAt(n, top.field("display")) {
		p := top.field("display") // unknown fields inside display are ignored
		info.Display = &Display{Type: r.str(n, p, "type"), Width: r.int(n, p, "width"), Height: r.int(n, p, "height")}
	}
	if r.get(o, "haptics") >= 0 {
		info.Haptics = append([]string{}, r.stringList(o, "haptics", 9)...) // non-nil: present
	}
	if r.err != nil {
		return nil
	}
	return info
}

func (r *reader) optInt(o int32, name string) *int {
	n := r.get(o, name)
	if n < 0 {
		return nil
	}
	v := r.intAt(n, top.field(name))
	return &v
}

// stringList reads an array of strings, reading at most limit entries (the
// validator refuses limit or more; reading stops there so a long array
// costs nothing).
func (r *reader) stringList(o int32, name string, limit int) []string {
	first, _ := r.array(o, top, name)
	var out []string
	for i, c := 0, first; c >= 0 && i < limit; i, c = i+1, r.next(c) {
		out = append(out, r.strAt(c, top.field(name).elem(i)))
	}
	return out
}

// check validates a DeviceInfo against the table of the profiles sheet.
func (info *DeviceInfo) check() *Error {
	if info.Protocol != "nexting-device" {
		return badMessage("protocol", `must be "nexting-device"`)
	}
	e := firstErr(
		checkDescriptor("spec", info.Spec, 64),
		checkDescriptor("model", info.Model, 64),
		checkDescriptor("fw", info.FW, 64),
		checkRange("max_message_bytes", info.MaxMessageBytes, MinFrameBytes, math.MaxUint32),
		checkRange("max_summary_bytes", int64(info.MaxSummaryBytes), 1, MaxSummaryBytes))
	if e != nil {
		return e
	}
	if e := checkWire(info.Wire); e != nil {
		return e
	}
	if e := checkNames("profiles", info.Profiles, 1, 16, 32); e != nil {
		return e
	}
	if !info.Supports(ProfileApproval) {
		return &Error{Code: CodeUnsupportedProfile, Field: "profiles", Detail: "must include approval/1"}
	}
	if e := checkRange("statusSlots", int64(info.StatusSlots), 0, 8); e != nil {
		return e
	}
	if info.StatusSlots > 0 && !info.Supports(ProfileStatus) {
		return badMessage("statusSlots", "positive only with status/1 in profiles")
	}
	return info.checkOptional()
}

func (info *DeviceInfo) checkOptional() *Error {
	if info.DeviceID != "" && !canonicalUUID(info.DeviceID) {
		return badMessage("device_id", "must be a canonical UUID")
	}
	for _, f := range []struct {
		name string
		v    string
	}{{"manufacturer", info.Manufacturer}, {"display_name", info.DisplayName}, {"serial_number", info.SerialNumber}} {
		if f.v != "" {
			if e := checkDescriptor(f.name, f.v, 64); e != nil {
				return e
			}
		}
	}
	for _, c := range []struct {
		name string
		v    *int
		max  int64
	}{
		{"button_count", info.ButtonCount, 1024}, {"approval_button_count", info.ApprovalButtonCount, 1024},
		{"custom_button_count", info.CustomButtonCount, 1024}, {"rotary_count", info.RotaryCount, 64},
		{"rotary_press_count", info.RotaryPressCount, 64},
	} {
		if c.v != nil {
			if e := checkRange(c.name, int64(*c.v), 0, c.max); e != nil {
				return e
			}
		}
	}
	if exceeds(info.ApprovalButtonCount, info.ButtonCount) {
		return badMessage("approval_button_count", "must not exceed button_count")
	}
	if exceeds(info.CustomButtonCount, info.ButtonCount) {
		return badMessage("custom_button_count", "must not exceed button_count")
	}
	if exceeds(info.RotaryPressCount, info.RotaryCount) {
		return badMessage("rotary_press_count", "must not exceed rotary_count")
	}
	if d := info.Display; d != nil {
		if e := firstErr(
			checkDescriptor("display.type", d.Type, 32),
			checkRange("display.width", int64(d.Width), 1, 4096),
			checkRange("display.height", int64(d.Height), 1, 4096)); e != nil {
			return e
		}
	}
	if info.Haptics != nil {
		return checkNames("haptics", info.Haptics, 1, 8, 32)
	}
	return nil
}

func exceeds(part, total *int) bool { return part != nil && total != nil && *part > *total }

// checkDescriptor: a non-empty printable string of at most max UTF-8 bytes.
// "Printable" is read as "no control character" (see isControl).
func checkDescriptor(field, s string, max int) *Error {
	return checkText(field, s, 1, max, noControl)
}

// checkNames: an array of min–max unique descriptors of at most maxBytes.
func checkNames(field string, names []string, min, max, maxBytes int) *Error {
	if e := checkCount(field, len(names), min, max); e != nil {
		return e
	}
	for i, s := range names {
		if e := checkDescriptor(elemField(field, i, ""), s, maxBytes); e != nil {
			return e
		}
		for _, prev := range names[:i] {
			if prev == s {
				return badMessage(elemField(field, i, ""), "duplicate entry")
			}
		}
	}
	return nil
}

func checkWire(wire []int) *Error {
	if e := checkCount("wire", len(wire), 1, 4); e != nil {
		return e
	}
	has1 := false
	for i, v := range wire {
		if e := checkRange(elemField("wire", i, ""), int64(v), 1, 65535); e != nil {
			return e
		}
		for _, prev := range wire[:i] {
			if prev == v {
				return badMessage(elemField("wire", i, ""), "duplicate entry")
			}
		}
		has1 = has1 || v == WireVersion
	}
	if !has1 {
		return &Error{Code: CodeUnsupportedVersion, Field: "wire", Detail: "must include wire major 1"}
	}
	return nil
}

// canonicalUUID matches 8-4-4-4-12 hex digits with version 1–5 and the
// RFC 4122 variant (published schema pattern; either letter case).
func canonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !isHex(c):
			return false
		}
	}
	return s[14] >= '1' && s[14] <= '5' && bytesContain("89abAB", s[19])
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func bytesContain(set string, c byte) bool {
	for i := 0; i < len(set); i++ {
		if set[i] == c {
			return true
		}
	}
	return false
}
