package nexting

import (
	"fmt"
	"strings"
	"testing"
)

// Every bound of every message, at its edge and one past it.

func TestBoundsApproval(t *testing.T) {
	present := func(id, sum, opt, ttl string) string {
		return `{"v":1,"t":"present","id":` + id + `,"sum":` + sum + `,"opt":` + opt + `,"ttl":` + ttl + `}`
	}
	const opt = `["allow","deny"]`
	runFrameCases(t, []frameCase{
		{"id 1 char", present(`"a"`, `"s"`, opt, "1"), ok},
		{"id 64 chars", present(quoted(rep("a", 64)), `"s"`, opt, "1"), ok},
		{"id 65 chars", present(quoted(rep("a", 65)), `"s"`, opt, "1"), CodeBadMessage},
		{"id empty", present(`""`, `"s"`, opt, "1"), CodeBadMessage},
		{"id every allowed char", present(`"AZaz09._:-"`, `"s"`, opt, "1"), ok},
		{"id slash", present(`"a/b"`, `"s"`, opt, "1"), CodeBadMessage},
		{"id space", present(`"a b"`, `"s"`, opt, "1"), CodeBadMessage},
		{"id non-ASCII", present(`"é"`, `"s"`, opt, "1"), CodeBadMessage},
		{"id number", present(`7`, `"s"`, opt, "1"), CodeBadMessage},
		{"sum empty", present(`"r"`, `""`, opt, "1"), ok},
		{"sum 240 bytes", present(`"r"`, quoted(rep("x", 240)), opt, "1"), ok},
		{"sum 241 bytes", present(`"r"`, quoted(rep("x", 241)), opt, "1"), CodeBadMessage},
		{"sum 240 bytes of 2-byte runes", present(`"r"`, `"`+rep("é", 120)+`"`, opt, "1"), ok},
		{"sum 242 bytes of 2-byte runes", present(`"r"`, `"`+rep("é", 121)+`"`, opt, "1"), CodeBadMessage},
		{"sum 240 bytes spelled as escapes", present(`"r"`, `"`+rep(`\u00e9`, 120)+`"`, opt, "1"), ok},
		{"sum with a control character", present(`"r"`, `"a\u0007b"`, opt, "1"), ok},
		{"sum with U+0000", present(`"r"`, `"a\u0000b"`, opt, "1"), CodeBadMessage},
		{"ttl 1", present(`"r"`, `"s"`, opt, "1"), ok},
		{"ttl 0", present(`"r"`, `"s"`, opt, "0"), CodeBadMessage},
		{"ttl 300000", present(`"r"`, `"s"`, opt, "300000"), ok},
		{"ttl 300001", present(`"r"`, `"s"`, opt, "300001"), CodeBadMessage},
		{"ttl -1", present(`"r"`, `"s"`, opt, "-1"), CodeBadMessage},
		{"ttl 1.0", present(`"r"`, `"s"`, opt, "1.0"), CodeBadMessage},
		{"ttl 1e3", present(`"r"`, `"s"`, opt, "1e3"), CodeBadMessage},
		{"ttl string", present(`"r"`, `"s"`, opt, `"1"`), CodeBadMessage},
		{"ttl huge", present(`"r"`, `"s"`, opt, "123456789012345678901234567890"), CodeBadMessage},
		{"opt escaped equivalently", present(`"r"`, `"s"`, `["\u0061llow","deny"]`, "1"), ok},
		{"opt reversed", present(`"r"`, `"s"`, `["deny","allow"]`, "1"), CodeBadMessage},
		{"opt short", present(`"r"`, `"s"`, `["allow"]`, "1"), CodeBadMessage},
		{"opt third option", present(`"r"`, `"s"`, `["allow","deny","always"]`, "1"), CodeBadMessage},
		{"opt upper case", present(`"r"`, `"s"`, `["Allow","deny"]`, "1"), CodeBadMessage},
		{"opt not array", present(`"r"`, `"s"`, `"allow"`, "1"), CodeBadMessage},
		{"present missing sum", `{"v":1,"t":"present","id":"r","opt":["allow","deny"],"ttl":1}`, CodeBadMessage},
		{"present missing opt", `{"v":1,"t":"present","id":"r","sum":"","ttl":1}`, CodeBadMessage},
		{"answer allow", `{"v":1,"t":"answer","id":"r","ch":"allow"}`, ok},
		{"answer upper case", `{"v":1,"t":"answer","id":"r","ch":"Allow"}`, CodeBadMessage},
		{"answer missing id", `{"v":1,"t":"answer","ch":"deny"}`, CodeBadMessage},
		{"answer unknown field ignored", `{"v":1,"t":"answer","id":"r","ch":"deny","future":{"x":[1,2.5,null]}}`, ok},
		{"resolved missing r", `{"v":1,"t":"resolved","id":"r"}`, CodeBadMessage},
		{"error without id", `{"v":1,"t":"error","code":"busy"}`, ok},
		{"error with empty id", `{"v":1,"t":"error","id":"","code":"busy"}`, CodeBadMessage},
		{"error missing code", `{"v":1,"t":"error","id":"r"}`, CodeBadMessage},
		{"error code upper case", `{"v":1,"t":"error","code":"BUSY"}`, CodeBadMessage},
	})
	for _, c := range Codes() {
		runFrameCases(t, []frameCase{{"error code " + string(c), `{"v":1,"t":"error","code":"` + string(c) + `"}`, ok}})
	}
}

func TestBoundsStatus(t *testing.T) {
	agent := func(i int) string { return fmt.Sprintf(`{"slot":%d,"state":"idle"}`, i) }
	status := func(agents string) string { return `{"v":1,"t":"status","agents":[` + agents + `]}` }
	label := func(l string) string { return status(`{"slot":0,"state":"idle","label":` + l + `}`) }
	runFrameCases(t, []frameCase{
		{"no agents", status(""), ok},
		{"8 agents", status(join(8, agent)), ok},
		{"9 agents", status(join(8, agent) + `,{"slot":0,"state":"idle"}`), CodeBadMessage},
		{"slot 7", status(agent(7)), ok},
		{"slot 8", status(agent(8)), CodeBadMessage},
		{"slot -1", status(agent(-1)), CodeBadMessage},
		{"slot -0", status(`{"slot":-0,"state":"idle"}`), CodeBadMessage},
		{"every state", status(`{"slot":0,"state":"idle"},{"slot":1,"state":"thinking"},{"slot":2,"state":"working"},{"slot":3,"state":"complete"},{"slot":4,"state":"needs_input"},{"slot":5,"state":"error"}`), ok},
		{"label 1 byte", label(`"x"`), ok},
		{"label 64 bytes", label(quoted(rep("x", 64))), ok},
		{"label 65 bytes", label(quoted(rep("x", 65))), CodeBadMessage},
		{"label 64 bytes of 4-byte runes", label(`"` + rep("😀", 16) + `"`), ok},
		{"label 68 bytes of 4-byte runes", label(`"` + rep("😀", 17) + `"`), CodeBadMessage},
		{"label empty", label(`""`), CodeBadMessage},
		{"label TAB", label(`"a\tb"`), CodeBadMessage},
		{"label DEL", label(`"a` + "\x7f" + `b"`), CodeBadMessage},
		{"label C1 control", label(`"a\u0085b"`), CodeBadMessage},
		{"label not string", label(`5`), CodeBadMessage},
		{"agent unknown field ignored", status(`{"slot":0,"state":"idle","color":"red"}`), ok},
		{"agent not object", status(`0`), CodeBadMessage},
		{"status with id", `{"v":1,"t":"status","id":"r","agents":[]}`, CodeBadMessage},
		{"status unknown field ignored", `{"v":1,"t":"status","agents":[],"x":true}`, ok},
	})
}

func TestBoundsEnvelope(t *testing.T) {
	answer := func(v string) string { return `{"v":` + v + `,"t":"answer","id":"r","ch":"allow"}` }
	runFrameCases(t, []frameCase{
		{"v 1", answer("1"), ok},
		{"v 0", answer("0"), CodeUnsupportedVersion},
		{"v 2", answer("2"), CodeUnsupportedVersion},
		{"v 10", answer("10"), CodeUnsupportedVersion},
		{"v beyond int64", answer("123456789012345678901234567890"), CodeUnsupportedVersion},
		{"v 1.0", answer("1.0"), CodeBadMessage},
		{"v 1e0", answer("1e0"), CodeBadMessage},
		{"v 10e-1", answer("10e-1"), CodeBadMessage},
		{"v -1", answer("-1"), CodeBadMessage},
		{"v -0", answer("-0"), CodeBadMessage},
		{"v string", answer(`"1"`), CodeBadMessage},
		{"v true", answer("true"), CodeBadMessage},
		{"v null", answer("null"), CodeBadMessage},
		{"v 2 with unknown type", `{"v":2,"t":"hello"}`, CodeUnsupportedVersion},
		{"v 2 with bad fields", `{"v":2,"t":"answer","id":"","ch":5}`, CodeUnsupportedVersion},
		{"t missing", `{"v":1,"id":"r","ch":"allow"}`, CodeBadMessage},
		{"t number", `{"v":1,"t":1}`, CodeBadMessage},
		{"t unknown", `{"v":1,"t":"launch","id":"r"}`, CodeBadMessage},
		{"t upper case", `{"v":1,"t":"Answer","id":"r","ch":"allow"}`, CodeBadMessage},
		{"t escaped", `{"v":1,"t":"\u0061nswer","id":"r","ch":"allow"}`, ok},
		{"field order free", `{"ch":"allow","id":"r","t":"answer","v":1}`, ok},
		{"top-level array", `[1]`, CodeBadMessage},
		{"top-level string", `"x"`, CodeBadMessage},
		{"empty", ``, CodeBadMessage},
		{"truncated", `{"v":1,"t":"answer"`, CodeBadMessage},
		{"trailing value", answer("1") + `{}`, CodeBadMessage},
		{"space between tokens", `{"v":1, "t":"answer","id":"r","ch":"allow"}`, CodeBadMessage},
		{"space before object", ` ` + answer("1"), CodeBadMessage},
		{"trailing CR", answer("1") + "\r", CodeBadMessage},
		{"tab after colon", "{\"v\":\t1,\"t\":\"answer\",\"id\":\"r\",\"ch\":\"allow\"}", CodeBadMessage},
		{"byte order mark", "\ufeff" + answer("1"), CodeBadMessage},
		{"spaces inside strings are fine", `{"v":1,"t":"present","id":"r","sum":" a  b ","opt":["allow","deny"],"ttl":1}`, ok},
		{"invalid UTF-8", "{\"v\":1,\"t\":\"present\",\"id\":\"r\",\"sum\":\"\xc3\",\"opt\":[\"allow\",\"deny\"],\"ttl\":1}", CodeBadMessage},
		{"overlong UTF-8", "{\"v\":1,\"t\":\"present\",\"id\":\"r\",\"sum\":\"\xc0\xaf\",\"opt\":[\"allow\",\"deny\"],\"ttl\":1}", CodeBadMessage},
		{"UTF-8 surrogate bytes", "{\"v\":1,\"t\":\"present\",\"id\":\"r\",\"sum\":\"\xed\xa0\x80\",\"opt\":[\"allow\",\"deny\"],\"ttl\":1}", CodeBadMessage},
		{"lone high surrogate escape", `{"v":1,"t":"answer","id":"r","ch":"allow","x":"\ud800"}`, CodeBadMessage},
		{"surrogate pair escape", `{"v":1,"t":"answer","id":"r","ch":"allow","x":"\ud83d\ude00"}`, ok},
		{"raw control in string", "{\"v\":1,\"t\":\"answer\",\"id\":\"r\",\"ch\":\"allow\",\"x\":\"a\x01\"}", CodeBadMessage},
		{"NaN", `{"v":1,"t":"answer","id":"r","ch":"allow","x":NaN}`, CodeBadMessage},
		{"leading zero", `{"v":1,"t":"answer","id":"r","ch":"allow","x":01}`, CodeBadMessage},
		{"single quotes", `{'v':1}`, CodeBadMessage},
		{"trailing comma", `{"v":1,"t":"answer","id":"r","ch":"allow",}`, CodeBadMessage},
	})
}

// TestBoundsNesting: unknown fields may nest eight levels below the
// top-level message; the ninth is refused — also inside known nested
// objects, where the level still counts from the message.
func TestBoundsNesting(t *testing.T) {
	withFuture := func(v string) string { return `{"v":1,"t":"answer","id":"r","ch":"allow","future":` + v + `}` }
	objs := func(n int) string { return rep(`{"a":`, n-1) + `{}` + rep("}", n-1) }
	inAgent := func(v string) string {
		return `{"v":1,"t":"status","agents":[{"slot":0,"state":"idle","x":` + v + `}]}`
	}
	runFrameCases(t, []frameCase{
		{"scalar", withFuture(`1`), ok},
		{"8 arrays", withFuture(nested(8, "")), ok},
		{"9 arrays", withFuture(nested(9, "")), CodeBadMessage},
		{"8 objects", withFuture(objs(8)), ok},
		{"9 objects", withFuture(objs(9)), CodeBadMessage},
		{"8 levels mixed, deepest holds a scalar", withFuture(`{"a":[{"b":[{"c":[{"d":[true]}]}]}]}`), ok},
		{"9 levels mixed", withFuture(`{"a":[{"b":[{"c":[{"d":[[true]]}]}]}]}`), CodeBadMessage},
		{"in agent: 6 more levels (8 below message)", inAgent(nested(6, "1")), ok},
		{"in agent: 7 more levels (9 below message)", inAgent(nested(7, "1")), CodeBadMessage},
		{"long unknown name", `{"v":1,"t":"answer","id":"r","ch":"allow",` + quoted(rep("n", 3000)) + `:1}`, ok},
	})
	// A closed message refuses unknown fields whatever their depth.
	runFrameCases(t, []frameCase{{"closed message", `{"v":1,"t":"usage_clear","x":[]}`, CodeBadMessage}})
}

// TestBoundsFrameSize: 4096 bytes with the LF is a frame; 4097 is not.
func TestBoundsFrameSize(t *testing.T) {
	frame := func(total int) []byte {
		head := `{"v":1,"t":"answer","id":"r","ch":"allow","pad":"`
		tail := "\"}\n"
		return []byte(head + rep("x", total-len(head)-len(tail)) + tail)
	}
	for _, c := range []struct {
		total int
		want  Code
	}{{MinFrameBytes, ok}, {MaxFrameBytes - 1, ok}, {MaxFrameBytes, ok}, {MaxFrameBytes + 1, CodeMessageTooLarge}, {3 * MaxFrameBytes, CodeMessageTooLarge}} {
		f := frame(c.total)
		if len(f) != c.total {
			t.Fatal("bad helper")
		}
		_, err := DecodeFrame(f)
		if CodeOf(err) != c.want {
			t.Errorf("DecodeFrame of %d bytes: %v, want %q", c.total, err, c.want)
		}
		_, err = Decode(f[:len(f)-1])
		if CodeOf(err) != c.want {
			t.Errorf("Decode of %d+1 bytes: %v, want %q", c.total-1, err, c.want)
		}
		fr, _ := NewFramer(0)
		res := fr.Feed(f)
		if len(res) != 1 || (c.want == ok) != (res[0].Err == nil) || (res[0].Err != nil && res[0].Err.Code != c.want) {
			t.Errorf("Framer on %d bytes: %+v", c.total, res)
		}
	}
	if _, err := DecodeFrame([]byte(`{"v":1,"t":"answer","id":"r","ch":"allow"}`)); CodeOf(err) != CodeBadMessage {
		t.Errorf("frame without LF: %v", err)
	}
	if _, err := DecodeFrame([]byte("{\"v\":1,\"t\":\"answer\",\"id\":\"r\",\"ch\":\"allow\"}\n\n")); CodeOf(err) != CodeBadMessage {
		t.Errorf("frame with two LFs: %v", err)
	}
	if !strings.HasSuffix(string(frame(100)), "\n") {
		t.Fatal("helper")
	}
}
