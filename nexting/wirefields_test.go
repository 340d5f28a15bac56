package nexting

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The codec's table of unsigned wire fields is the published schema's: every
// top-level property of the 21 messages whose type is a non-negative integer
// (directly or through u32 / safeCounter). No name is unsigned in one
// message and typed otherwise in another, so "that field's type" is one type.
func TestUnsignedWireFieldsMatchSchema(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "message.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		OneOf []map[string]any          `json:"oneOf"`
		Defs  map[string]map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	resolve := func(s map[string]any) map[string]any {
		for {
			ref, ok := s["$ref"].(string)
			if !ok {
				return s
			}
			s = schema.Defs[strings.TrimPrefix(ref, "#/$defs/")]
		}
	}
	unsigned := func(s map[string]any) bool {
		min, hasMin := s["minimum"].(float64)
		return s["type"] == "integer" && hasMin && min >= 0
	}
	kinds := map[string]map[bool]bool{} // name -> {unsigned?} seen
	for _, ref := range schema.OneOf {
		msg := resolve(ref)
		parts := []map[string]any{msg}
		if all, ok := msg["allOf"].([]any); ok {
			parts = parts[:0]
			for _, p := range all {
				parts = append(parts, resolve(p.(map[string]any)))
			}
		}
		for _, part := range parts {
			props, _ := part["properties"].(map[string]any)
			for name, p := range props {
				if kinds[name] == nil {
					kinds[name] = map[bool]bool{}
				}
				kinds[name][unsigned(resolve(p.(map[string]any)))] = true
			}
		}
	}
	if len(schema.OneOf) != len(types) || len(kinds) < 30 {
		t.Fatalf("schema walk found %d messages and %d top-level names", len(schema.OneOf), len(kinds))
	}
	var fromSchema []string
	for name, k := range kinds {
		if k[true] && k[false] {
			t.Errorf("%q is an unsigned integer in one message and another type in another", name)
		}
		if k[true] {
			fromSchema = append(fromSchema, name)
		}
	}
	table := slices.Clone(unsignedWireFields[:])
	slices.Sort(fromSchema)
	slices.Sort(table)
	if !slices.Equal(fromSchema, table) {
		t.Errorf("unsignedWireFields %v, schema says %v", table, fromSchema)
	}
}

// A top-level member whose name is a known unsigned wire field carries that
// type in every message, as the published reference decides — also in the
// open messages that do not define it, where any other unknown field is
// ignored.
func TestKnownWireFieldTypedInEveryMessage(t *testing.T) {
	// The two disagreements of the differential run against the reference,
	// and status with an id (short spec §1: "absent on status").
	for _, c := range []struct{ name, frame, field string }{
		{"seq -1 on present", `{"seq":-1,"v":1,"t":"present","id":"r","sum":"s","opt":["allow","deny"],"ttl":1}`, "seq"},
		{"rev 1e2 on answer", `{"rev":1e2,"v":1,"t":"answer","id":"r","ch":"allow"}`, "rev"},
		{"id on status", `{"v":1,"t":"status","agents":[],"id":"r"}`, "id"},
		{"id on status first", `{"id":"x","v":1,"t":"status","agents":[{"slot":0,"state":"idle"}]}`, "id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.frame))
			if e, isErr := err.(*Error); !isErr || e.Code != CodeBadMessage || e.Field != c.field {
				t.Fatalf("got %#v, want bad_message at %q\n%s", err, c.field, c.frame)
			}
		})
	}

	open := map[Type]string{ // the messages that ignore unknown fields; %s is one more member
		TypePresent:  `{"v":1,"t":"present","id":"r","sum":"s","opt":["allow","deny"],"ttl":1,%s}`,
		TypeAnswer:   `{"v":1,"t":"answer","id":"r","ch":"allow",%s}`,
		TypeResolved: `{"v":1,"t":"resolved","id":"r","r":"answered",%s}`,
		TypeError:    `{"v":1,"t":"error","code":"busy",%s}`,
		TypeStatus:   `{"v":1,"t":"status","agents":[],%s}`,
	}
	var cases []frameCase
	for typ, tmpl := range open {
		for _, name := range unsignedWireFields {
			if typ == TypePresent && name == "ttl" {
				continue // present defines ttl: its bounds are tested with present
			}
			for _, v := range []string{"-1", "-0", "1.5", "1.0", "1e2", "0e0", `"1"`, "null", "true", "[1]", "{}"} {
				member := `"` + name + `":` + v
				cases = append(cases, frameCase{string(typ) + "/" + member, strings.Replace(tmpl, "%s", member, 1), CodeBadMessage})
			}
			for _, v := range []string{"0", "7", "99999999999999999999999"} { // unbounded where undefined, as the reference
				member := `"` + name + `":` + v
				cases = append(cases, frameCase{string(typ) + "/" + member, strings.Replace(tmpl, "%s", member, 1), ok})
			}
		}
		// The reference types no other name outside its messages: these stay
		// ignored unknown fields.
		for _, member := range []string{`"title":5`, `"delta":-1`, `"label":1`, `"keys":"k"`, `"value":-1.5`} {
			cases = append(cases, frameCase{string(typ) + "/" + member, strings.Replace(tmpl, "%s", member, 1), ok})
		}
	}
	runFrameCases(t, cases)

	// The refusal names the field, and the closed messages refuse too.
	_, err := Decode([]byte(`{"v":1,"t":"answer","id":"r","ch":"allow","cached_tokens":-3}`))
	if e, _ := err.(*Error); e == nil || e.Field != "cached_tokens" || e.ID != "r" || e.Type != TypeAnswer {
		t.Errorf("got %#v", err)
	}
	runFrameCases(t, []frameCase{
		{"nav_move seq -1", `{"v":1,"t":"nav_move","id":"q","dir":"next","seq":-1}`, CodeBadMessage},
		{"keymap rev 1e2", `{"v":1,"t":"keymap","rev":1e2,"keys":[]}`, CodeBadMessage},
	})
}

// unsignedMembersTyped reports, for an accepted frame, the first top-level
// member named like an unsigned wire field whose value is not spelled
// 0|[1-9][0-9]* (read with encoding/json, independently of the codec).
func unsignedMembersTyped(frame []byte) (string, bool) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(frame, &top); err != nil {
		return "", false
	}
	for _, name := range unsignedWireFields {
		v, present := top[name]
		if !present {
			continue
		}
		if len(v) == 0 || (v[0] == '0' && len(v) > 1) || strings.Trim(string(v), "0123456789") != "" {
			return name, false
		}
	}
	return "", true
}
