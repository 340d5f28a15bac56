package nexting

import (
	"fmt"
	"testing"
)

// Every bound of the interaction profiles' messages, at its edge and one
// past it.

func TestBoundsNavigation(t *testing.T) {
	item := func(i int) string { return fmt.Sprintf(`"item %d"`, i) }
	navPresent := func(items, cursor, ttl string) string {
		return `{"v":1,"t":"nav_present","id":"q","items":[` + items + `],"cursor":` + cursor + `,"ttl":` + ttl + `}`
	}
	move := func(dir, seq string) string {
		return `{"v":1,"t":"nav_move","id":"q","dir":"` + dir + `","seq":` + seq + `}`
	}
	sel := func(index string) string { return `{"v":1,"t":"nav_select","id":"q","index":` + index + `,"seq":1}` }
	runFrameCases(t, []frameCase{
		{"2 items", navPresent(join(2, item), "0", "1"), ok},
		{"8 items", navPresent(join(8, item), "7", "300000"), ok},
		{"1 item", navPresent(join(1, item), "0", "1"), CodeBadMessage},
		{"9 items", navPresent(join(9, item), "0", "1"), CodeBadMessage},
		{"item 64 bytes", navPresent(quoted(rep("x", 64))+`,"b"`, "0", "1"), ok},
		{"item 65 bytes", navPresent(quoted(rep("x", 65))+`,"b"`, "0", "1"), CodeBadMessage},
		{"item empty", navPresent(`"","b"`, "0", "1"), CodeBadMessage},
		{"item control", navPresent(`"a\nb","b"`, "0", "1"), CodeBadMessage},
		{"item not string", navPresent(`1,"b"`, "0", "1"), CodeBadMessage},
		{"items equal after unescaping", navPresent(`"ab","\u0061b"`, "0", "1"), CodeBadMessage},
		{"cursor last", navPresent(join(3, item), "2", "1"), ok},
		{"cursor past last", navPresent(join(3, item), "3", "1"), CodeBadMessage},
		{"cursor -1", navPresent(join(3, item), "-1", "1"), CodeBadMessage},
		{"ttl 0", navPresent(join(2, item), "0", "0"), CodeBadMessage},
		{"ttl 300001", navPresent(join(2, item), "0", "300001"), CodeBadMessage},
		{"every direction", move("prev", "0"), ok},
		{"dir right", move("right", "0"), ok},
		{"dir up", move("up", "0"), ok},
		{"dir down", move("down", "0"), ok},
		{"dir left", move("left", "0"), ok},
		{"dir next", move("next", "0"), ok},
		{"dir upper case", move("Next", "0"), CodeBadMessage},
		{"seq max u32", move("next", "4294967295"), ok},
		{"seq past u32", move("next", "4294967296"), CodeBadMessage},
		{"seq -1", move("next", "-1"), CodeBadMessage},
		{"seq 1.0", move("next", "1.0"), CodeBadMessage},
		{"index 0", sel("0"), ok},
		{"index 7", sel("7"), ok},
		{"index 8", sel("8"), CodeBadMessage},
		{"index -1", sel("-1"), CodeBadMessage},
		{"nav_select missing seq", `{"v":1,"t":"nav_select","id":"q","index":1}`, CodeBadMessage},
		{"nav_resolved every reason", `{"v":1,"t":"nav_resolved","id":"q","r":"expired"}`, ok},
		{"nav_resolved unknown field", `{"v":1,"t":"nav_resolved","id":"q","r":"expired","x":1}`, CodeBadMessage},
	})
}

func TestBoundsKeys(t *testing.T) {
	key := func(i int) string { return fmt.Sprintf(`{"slot":%d,"label":"k","enabled":true,"light":"off"}`, i) }
	keymap := func(rev, keys string) string { return `{"v":1,"t":"keymap","rev":` + rev + `,"keys":[` + keys + `]}` }
	withKey := func(fields string) string { return keymap("1", `{`+fields+`}`) }
	event := func(slot, ev string) string {
		return `{"v":1,"t":"key_event","slot":` + slot + `,"event":"` + ev + `","seq":1}`
	}
	runFrameCases(t, []frameCase{
		{"no keys", keymap("0", ""), ok},
		{"64 keys", keymap("1", join(64, key)), ok},
		{"65 keys", keymap("1", join(64, key)+","+key(0)), CodeBadMessage},
		{"rev max u32", keymap("4294967295", ""), ok},
		{"rev past u32", keymap("4294967296", ""), CodeBadMessage},
		{"slot 63", keymap("1", key(63)), ok},
		{"slot 64", keymap("1", key(64)), CodeBadMessage},
		{"label 32 bytes", withKey(`"slot":0,"label":` + quoted(rep("k", 32)) + `,"enabled":true,"light":"off"`), ok},
		{"label 33 bytes", withKey(`"slot":0,"label":` + quoted(rep("k", 33)) + `,"enabled":true,"light":"off"`), CodeBadMessage},
		{"label empty", withKey(`"slot":0,"label":"","enabled":true,"light":"off"`), CodeBadMessage},
		{"label control", withKey(`"slot":0,"label":"a\u001bb","enabled":true,"light":"off"`), CodeBadMessage},
		{"enabled as string", withKey(`"slot":0,"label":"k","enabled":"true","light":"off"`), CodeBadMessage},
		{"every light", keymap("1", `{"slot":0,"label":"k","enabled":false,"light":"dim"},{"slot":1,"label":"k","enabled":false,"light":"solid"},{"slot":2,"label":"k","enabled":false,"light":"pulse"}`), ok},
		{"rgb at 0 and 255", withKey(`"slot":0,"label":"k","enabled":true,"light":"off","rgb":[0,128,255]`), ok},
		{"rgb 256", withKey(`"slot":0,"label":"k","enabled":true,"light":"off","rgb":[0,0,256]`), CodeBadMessage},
		{"rgb -1", withKey(`"slot":0,"label":"k","enabled":true,"light":"off","rgb":[-1,0,0]`), CodeBadMessage},
		{"rgb four", withKey(`"slot":0,"label":"k","enabled":true,"light":"off","rgb":[0,0,0,0]`), CodeBadMessage},
		{"rgb float", withKey(`"slot":0,"label":"k","enabled":true,"light":"off","rgb":[0,0,1.5]`), CodeBadMessage},
		{"key unknown field", withKey(`"slot":0,"label":"k","enabled":true,"light":"off","action":"x"`), CodeBadMessage},
		{"key missing light", withKey(`"slot":0,"label":"k","enabled":true`), CodeBadMessage},
		{"event slot 63", event("63", "press"), ok},
		{"event slot 64", event("64", "press"), CodeBadMessage},
		{"event release", event("0", "release"), ok},
		{"event hold", event("0", "hold"), ok},
		{"event double", event("0", "double"), ok},
	})
}

func TestBoundsRotary(t *testing.T) {
	ctrl := func(i int) string {
		return fmt.Sprintf(`{"slot":%d,"label":"r","value":0,"min":0,"max":0,"wrap":false}`, i)
	}
	rmap := func(ctrls string) string { return `{"v":1,"t":"rotary_map","rev":1,"controls":[` + ctrls + `]}` }
	vals := func(v, min, max string) string {
		return rmap(`{"slot":0,"label":"r","value":` + v + `,"min":` + min + `,"max":` + max + `,"wrap":true}`)
	}
	ev := func(slot, delta string) string {
		return `{"v":1,"t":"rotary_event","slot":` + slot + `,"delta":` + delta + `,"seq":1}`
	}
	runFrameCases(t, []frameCase{
		{"no controls", rmap(""), ok},
		{"16 controls", rmap(join(16, ctrl)), ok},
		{"17 controls", rmap(join(16, ctrl) + "," + ctrl(0)), CodeBadMessage},
		{"slot 15", rmap(ctrl(15)), ok},
		{"slot 16", rmap(ctrl(16)), CodeBadMessage},
		{"label 32 bytes", rmap(`{"slot":0,"label":` + quoted(rep("r", 32)) + `,"value":0,"min":0,"max":0,"wrap":false}`), ok},
		{"label 33 bytes", rmap(`{"slot":0,"label":` + quoted(rep("r", 33)) + `,"value":0,"min":0,"max":0,"wrap":false}`), CodeBadMessage},
		{"range at both ends", vals("0", "-1000000", "1000000"), ok},
		{"value at max", vals("1000000", "0", "1000000"), ok},
		{"value at min", vals("-1000000", "-1000000", "0"), ok},
		{"max past bound", vals("0", "0", "1000001"), CodeBadMessage},
		{"min past bound", vals("0", "-1000001", "0"), CodeBadMessage},
		{"value past bound", vals("1000001", "0", "1000001"), CodeBadMessage},
		{"value above max", vals("4", "0", "3"), CodeBadMessage},
		{"min equals max", vals("3", "3", "3"), ok},
		{"min above max", vals("3", "4", "3"), CodeBadMessage},
		{"control unknown field", rmap(`{"slot":0,"label":"r","value":0,"min":0,"max":0,"wrap":false,"step":1}`), CodeBadMessage},
		{"control missing wrap", rmap(`{"slot":0,"label":"r","value":0,"min":0,"max":0}`), CodeBadMessage},
		{"delta -127", ev("0", "-127"), ok},
		{"delta 127", ev("15", "127"), ok},
		{"delta -128", ev("0", "-128"), CodeBadMessage},
		{"delta 128", ev("0", "128"), CodeBadMessage},
		{"delta 0", ev("0", "0"), CodeBadMessage},
		{"delta -0", ev("0", "-0"), CodeBadMessage},
		{"event slot 16", ev("16", "1"), CodeBadMessage},
		{"press slot 15", `{"v":1,"t":"rotary_press","slot":15,"event":"hold","seq":0}`, ok},
		{"press slot 16", `{"v":1,"t":"rotary_press","slot":16,"event":"hold","seq":0}`, CodeBadMessage},
	})
}

func TestBoundsVoiceText(t *testing.T) {
	vstate := func(l string) string { return `{"v":1,"t":"voice_state","state":"transcribing","label":` + l + `}` }
	text := func(ch, title, content string) string {
		s := `{"v":1,"t":"text","channel":` + ch
		if title != "" {
			s += `,"title":` + title
		}
		return s + `,"content":` + content + `}`
	}
	runFrameCases(t, []frameCase{
		{"voice start", `{"v":1,"t":"voice_event","event":"start","seq":0}`, ok},
		{"voice cancel", `{"v":1,"t":"voice_event","event":"cancel","seq":4294967295}`, ok},
		{"voice missing seq", `{"v":1,"t":"voice_event","event":"stop"}`, CodeBadMessage},
		{"every phase", `{"v":1,"t":"voice_state","state":"submitted"}`, ok},
		{"phase error", `{"v":1,"t":"voice_state","state":"error"}`, ok},
		{"voice label 64", vstate(quoted(rep("v", 64))), ok},
		{"voice label 65", vstate(quoted(rep("v", 65))), CodeBadMessage},
		{"channel 0", text("0", "", `""`), ok},
		{"channel 7", text("7", "", `""`), ok},
		{"channel 8", text("8", "", `""`), CodeBadMessage},
		{"channel -1", text("-1", "", `""`), CodeBadMessage},
		{"title 64", text("0", quoted(rep("t", 64)), `"c"`), ok},
		{"title 65", text("0", quoted(rep("t", 65)), `"c"`), CodeBadMessage},
		{"title with LF", text("0", `"a\nb"`, `"c"`), CodeBadMessage},
		{"content 1024", text("0", "", quoted(rep("c", 1024))), ok},
		{"content 1025", text("0", "", quoted(rep("c", 1025))), CodeBadMessage},
		{"content LF and TAB", text("0", "", `"a\n\tb"`), ok},
		{"content CR", text("0", "", `"a\r\nb"`), CodeBadMessage},
		{"content DEL", text("0", "", `"a`+"\x7f"+`"`), CodeBadMessage},
		{"content missing", `{"v":1,"t":"text","channel":0}`, CodeBadMessage},
	})
}

func TestBoundsUsageConfig(t *testing.T) {
	usage := func(extra string) string {
		return `{"v":1,"t":"usage","model":"m","input_tokens":1,"output_tokens":2` + extra + `}`
	}
	entry := func(i int) string { return fmt.Sprintf(`{"key":"k%d","value":%d}`, i, i) }
	config := func(entries string) string { return `{"v":1,"t":"config","rev":1,"entries":[` + entries + `]}` }
	value := func(v string) string { return config(`{"key":"a","value":` + v + `}`) }
	result := func(fields string) string { return `{"v":1,"t":"config_result","rev":1,` + fields + `}` }
	runFrameCases(t, []frameCase{
		{"tokens at max safe", usage(`,"cached_tokens":9007199254740991`), ok},
		{"tokens past max safe", usage(`,"cached_tokens":9007199254740992`), CodeBadMessage},
		{"input tokens past max safe", `{"v":1,"t":"usage","model":"m","input_tokens":9007199254740992,"output_tokens":0}`, CodeBadMessage},
		{"context used = limit", usage(`,"context_used":5,"context_limit":5`), ok},
		{"context used > limit", usage(`,"context_used":6,"context_limit":5`), CodeBadMessage},
		{"context limit alone", usage(`,"context_limit":5`), CodeBadMessage},
		{"model 64", `{"v":1,"t":"usage","model":` + quoted(rep("m", 64)) + `,"input_tokens":0,"output_tokens":0}`, ok},
		{"model 65", `{"v":1,"t":"usage","model":` + quoted(rep("m", 65)) + `,"input_tokens":0,"output_tokens":0}`, CodeBadMessage},
		{"model empty", `{"v":1,"t":"usage","model":"","input_tokens":0,"output_tokens":0}`, CodeBadMessage},
		{"no entries", config(""), ok},
		{"32 entries", config(join(32, entry)), ok},
		{"33 entries", config(join(33, entry)), CodeBadMessage},
		{"key 48", config(`{"key":` + quoted(rep("k", 48)) + `,"value":1}`), ok},
		{"key 49", config(`{"key":` + quoted(rep("k", 49)) + `,"value":1}`), CodeBadMessage},
		{"key all classes", config(`{"key":"A9.b_c-d","value":1}`), ok},
		{"key leading dot", config(`{"key":".a","value":1}`), CodeBadMessage},
		{"key empty", config(`{"key":"","value":1}`), CodeBadMessage},
		{"key non-ASCII", config(`{"key":"é","value":1}`), CodeBadMessage},
		{"value true", value("true"), ok},
		{"value false", value("false"), ok},
		{"value 1000000", value("1000000"), ok},
		{"value -1000000", value("-1000000"), ok},
		{"value 1000001", value("1000001"), CodeBadMessage},
		{"value -1000001", value("-1000001"), CodeBadMessage},
		{"value 1.5", value("1.5"), CodeBadMessage},
		{"value 1.0", value("1.0"), CodeBadMessage},
		{"value 1e2", value("1e2"), CodeBadMessage},
		{"value array", value("[1]"), CodeBadMessage},
		{"value string 128", value(quoted(rep("s", 128))), ok},
		{"value string 129", value(quoted(rep("s", 129))), CodeBadMessage},
		{"value string empty", value(`""`), ok},
		{"value string control", value(`"a\tb"`), CodeBadMessage},
		{"entry missing value", config(`{"key":"a"}`), CodeBadMessage},
		{"entry unknown field", config(`{"key":"a","value":1,"x":1}`), CodeBadMessage},
		{"result applied", result(`"status":"applied"`), ok},
		{"result rejected invalid_value", result(`"status":"rejected","code":"invalid_value"`), ok},
		{"result rejected storage_error", result(`"status":"rejected","code":"storage_error"`), ok},
		{"result rejected unsupported", result(`"status":"rejected","code":"unsupported"`), ok},
		{"result empty code", result(`"status":"rejected","code":""`), CodeBadMessage},
		{"usage_clear", `{"v":1,"t":"usage_clear"}`, ok},
	})
}
