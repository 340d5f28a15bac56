package nexting

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// devInfo builds a compact Device Info from the required fields, with
// fields replaced (raw JSON), removed ("-") or added.
func devInfo(fields ...string) string {
	keys := []string{"protocol", "spec", "wire", "profiles", "model", "fw", "max_message_bytes", "max_summary_bytes"}
	vals := map[string]string{
		"protocol": `"nexting-device"`, "spec": `"0.2.0"`, "wire": `[1]`, "profiles": `["approval/1"]`,
		"model": `"m"`, "fw": `"1"`, "max_message_bytes": `4096`, "max_summary_bytes": `240`,
	}
	for i := 0; i+1 < len(fields); i += 2 {
		k, v := fields[i], fields[i+1]
		if _, known := vals[k]; !known {
			keys = append(keys, k)
		}
		vals[k] = v
	}
	var parts []string
	for _, k := range keys {
		if vals[k] != "-" {
			parts = append(parts, `"`+k+`":`+vals[k])
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func mustDevice(t testing.TB, fields ...string) *DeviceInfo {
	t.Helper()
	info, err := ParseDeviceInfo([]byte(devInfo(fields...)))
	if err != nil {
		t.Fatalf("%v\n%s", err, devInfo(fields...))
	}
	return info
}

// mustNegotiate negotiates a device declaring the given profiles and frame
// limit against the default host.
func mustNegotiate(t testing.TB, maxBytes int, profiles ...Profile) *Negotiated {
	t.Helper()
	var names []string
	for _, p := range profiles {
		names = append(names, `"`+string(p)+`"`)
	}
	extra := []string{"profiles", "[" + strings.Join(names, ",") + "]", "max_message_bytes", strconv.Itoa(maxBytes)}
	for _, p := range profiles {
		if p == ProfileStatus {
			extra = append(extra, "statusSlots", "3")
		}
	}
	n, err := Negotiate(DefaultHostConfig(), mustDevice(t, extra...))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNegotiateProfilesAndLimits(t *testing.T) {
	dev := mustDevice(t,
		"profiles", `["approval/1","status/1","keys/1","text/1","future/9"]`,
		"statusSlots", "2", "max_message_bytes", "1024", "max_summary_bytes", "120")
	host := HostConfig{Profiles: []Profile{ProfileApproval, ProfileStatus, ProfileKeys, ProfileConfig}}
	n, err := Negotiate(host, dev)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.Profiles(), []Profile{ProfileApproval, ProfileStatus, ProfileKeys}; !reflect.DeepEqual(got, want) {
		t.Errorf("profiles %v, want %v", got, want)
	}
	if n.MaxMessageBytes() != 1024 || n.MaxSummaryBytes() != 120 || n.StatusSlots() != 2 {
		t.Errorf("limits %d %d %d", n.MaxMessageBytes(), n.MaxSummaryBytes(), n.StatusSlots())
	}
	if n.NewFramer().Max() != 1024 {
		t.Error("framer limit")
	}

	// The host's own smaller limits win; the device's huge limit is capped.
	big := mustDevice(t, "max_message_bytes", "4294967295")
	n, _ = Negotiate(HostConfig{Profiles: []Profile{ProfileApproval}, MaxMessageBytes: 600, MaxSummaryBytes: 10}, big)
	if n.MaxMessageBytes() != 600 || n.MaxSummaryBytes() != 10 {
		t.Errorf("host limits: %d %d", n.MaxMessageBytes(), n.MaxSummaryBytes())
	}
	n, _ = Negotiate(DefaultHostConfig(), big)
	if n.MaxMessageBytes() != MaxFrameBytes {
		t.Errorf("cap: %d", n.MaxMessageBytes())
	}
}

// status/1 needs the profile on both ends and statusSlots ≥ 1.
func TestNegotiateStatus(t *testing.T) {
	for _, c := range []struct {
		name   string
		fields []string
		want   bool
	}{
		{"profile and slots", []string{"profiles", `["approval/1","status/1"]`, "statusSlots", "1"}, true},
		{"profile, slots absent", []string{"profiles", `["approval/1","status/1"]`}, false},
		{"profile, slots 0", []string{"profiles", `["approval/1","status/1"]`, "statusSlots", "0"}, false},
		{"no profile, slots 0", []string{"statusSlots", "0"}, false},
	} {
		n, err := Negotiate(DefaultHostConfig(), mustDevice(t, c.fields...))
		if err != nil {
			t.Fatal(err)
		}
		if n.Has(ProfileStatus) != c.want {
			t.Errorf("%s: status negotiated = %v", c.name, !c.want)
		}
		_, err = n.Decode([]byte(fStatus))
		if (err == nil) != c.want || (!c.want && CodeOf(err) != CodeUnsupportedProfile) {
			t.Errorf("%s: decode status: %v", c.name, err)
		}
	}
	// A positive statusSlots without status/1 is invalid Device Info.
	if _, err := ParseDeviceInfo([]byte(devInfo("statusSlots", "1"))); CodeOf(err) != CodeBadMessage {
		t.Errorf("statusSlots without status/1: %v", err)
	}
	// The host does not implement status/1.
	n, _ := Negotiate(HostConfig{Profiles: []Profile{ProfileApproval}},
		mustDevice(t, "profiles", `["approval/1","status/1"]`, "statusSlots", "4"))
	if n.Has(ProfileStatus) || n.StatusSlots() != 0 {
		t.Error("status negotiated without host support")
	}
}

func TestNegotiateRefusals(t *testing.T) {
	dev := mustDevice(t)
	for name, h := range map[string]HostConfig{
		"no approval":     {Profiles: []Profile{ProfileStatus}},
		"frame too small": {Profiles: []Profile{ProfileApproval}, MaxMessageBytes: 511},
		"frame too large": {Profiles: []Profile{ProfileApproval}, MaxMessageBytes: 4097},
		"summary 241":     {Profiles: []Profile{ProfileApproval}, MaxSummaryBytes: 241},
	} {
		if _, err := Negotiate(h, dev); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Negotiate(DefaultHostConfig(), nil); err == nil {
		t.Error("nil Device Info accepted")
	}
	bad := *dev
	bad.Profiles = []string{"keys/1"}
	if _, err := Negotiate(DefaultHostConfig(), &bad); CodeOf(err) != CodeUnsupportedProfile {
		t.Errorf("hand-built Device Info without approval/1: %v", err)
	}
}

// Every known message of a profile that was not negotiated is refused with
// unsupported_profile, before its fields are looked at; negotiated ones
// pass.
func TestNegotiatedGatesEveryType(t *testing.T) {
	frames := map[Type]string{}
	for _, vf := range loadVectors(t) {
		for _, v := range vf.Valid {
			if m, err := DecodeFrame([]byte(v.Wire)); err == nil {
				frames[m.Type()] = strings.TrimSuffix(v.Wire, "\n")
			}
		}
	}
	approvalOnly := mustNegotiate(t, 4096, ProfileApproval)
	all := mustNegotiate(t, 4096, knownProfiles[:]...)
	for typ, frame := range frames {
		_, err := approvalOnly.Decode([]byte(frame))
		if typ.Profile() == ProfileApproval {
			if err != nil {
				t.Errorf("%s refused: %v", typ, err)
			}
		} else if CodeOf(err) != CodeUnsupportedProfile {
			t.Errorf("%s: %v, want unsupported_profile", typ, err)
		}
		if _, err := all.DecodeFrame([]byte(frame + "\n")); err != nil {
			t.Errorf("%s with all profiles: %v", typ, err)
		}
		m, _ := Decode([]byte(frame))
		if _, err := approvalOnly.Encode(m); (typ.Profile() == ProfileApproval) != (err == nil) {
			t.Errorf("encode %s under approval only: %v", typ, err)
		}
	}
	// The profile gate comes before field validation.
	_, err := approvalOnly.Decode([]byte(`{"v":1,"t":"keymap","rev":-5}`))
	if CodeOf(err) != CodeUnsupportedProfile {
		t.Errorf("invalid keymap under approval only: %v", err)
	}
	// An unknown type is bad_message, not unsupported_profile.
	if _, err := approvalOnly.Decode([]byte(`{"v":1,"t":"audio_frame"}`)); CodeOf(err) != CodeBadMessage {
		t.Errorf("unknown type: %v", err)
	}
}

func TestNegotiatedLimits(t *testing.T) {
	dev := mustDevice(t, "max_message_bytes", "512", "max_summary_bytes", "10")
	n, _ := Negotiate(DefaultHostConfig(), dev)
	long := `{"v":1,"t":"answer","id":"r","ch":"allow","pad":"` + rep("x", 512) + `"}`
	if _, err := n.Decode([]byte(long)); CodeOf(err) != CodeMessageTooLarge {
		t.Errorf("over the negotiated frame limit: %v", err)
	}
	if _, err := Decode([]byte(long)); err != nil {
		t.Errorf("default limit: %v", err)
	}
	present := `{"v":1,"t":"present","id":"r","sum":"` + rep("s", 11) + `","opt":["allow","deny"],"ttl":1}`
	if _, err := n.Decode([]byte(present)); CodeOf(err) != CodeBadMessage {
		t.Errorf("summary over the negotiated limit: %v", err)
	}
	p := Present{ID: "r", Summary: FitSummary("ééééééé", n.MaxSummaryBytes()), TTLMillis: 1000}
	if p.Summary != "ééééé" {
		t.Errorf("FitSummary: %q", p.Summary)
	}
	if b, err := n.Encode(p); err != nil {
		t.Errorf("fitted summary: %v", err)
	} else if _, err := n.DecodeFrame(b); err != nil {
		t.Errorf("decode fitted: %v", err)
	}
	if _, err := n.Encode(&Present{ID: "r", Summary: rep("s", 11), TTLMillis: 1}); CodeOf(err) != CodeBadMessage {
		t.Errorf("encode long summary by pointer: %v", err)
	}
}

func TestFitSummary(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{{"abc", 5, "abc"}, {"abc", 2, "ab"}, {"é", 1, ""}, {"aé", 2, "a"}, {"😀x", 4, "😀"}, {"😀", 3, ""}, {"x", 0, ""}} {
		if got := FitSummary(c.in, c.max); got != c.want {
			t.Errorf("FitSummary(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestTypeMetadata(t *testing.T) {
	if len(Types()) != 21 || len(Profiles()) != 9 {
		t.Fatalf("%d types, %d profiles", len(Types()), len(Profiles()))
	}
	for _, typ := range Types() {
		if !typ.Known() || !typ.Profile().Known() || typ.Sender() == 0 {
			t.Errorf("%s metadata incomplete", typ)
		}
	}
	if TypeAnswer.Sender() != FromDevice || TypePresent.Sender() != FromHost || TypeError.Sender() != FromEither {
		t.Error("senders")
	}
	if Type("nope").Known() || Type("nope").Profile() != "" || Profile("nope").Known() {
		t.Error("unknown names")
	}
}
