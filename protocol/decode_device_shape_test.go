package protocol

import (
	"testing"
)

// --- bad_shape: chunk kind ----------------------------------------------------------

// §4: stdout, stderr and data must carry dataB64 and must not carry exitCode;
// exit must carry exitCode and must not carry dataB64. A kind outside
// DEVICE_CHUNK_KINDS is bad_shape.
func TestChunkKindAndFieldsMustAgree(t *testing.T) {
	ex := ddExit()
	cases := []ddRejectCase{
		ddBad("exit with dataB64", ex.set("dataB64", `"aGk="`).String(), "dataB64"),
		ddBad("exit with an empty dataB64", ex.set("dataB64", `""`).String(), "dataB64"),
		ddBad("exit without exitCode", ex.without("exitCode").String(), "exitCode"),
		ddBad("exit with dataB64 instead of exitCode", ex.without("exitCode").set("dataB64", `"aGk="`).String(), ddAnyField),
		ddBad("exit with a fractional exitCode", ex.set("exitCode", `0.5`).String(), "exitCode"),
	}
	for _, k := range []string{"stdout", "stderr", "data"} {
		c := ddStdout().set("kind", ddQ(k))
		cases = append(cases,
			ddBad(k+" without dataB64", c.without("dataB64").String(), "dataB64"),
			ddBad(k+" with exitCode", c.set("exitCode", `0`).String(), "exitCode"),
			ddBad(k+" with exitCode instead of dataB64", c.without("dataB64").set("exitCode", `0`).String(), ddAnyField),
		)
	}
	for _, k := range []string{"", "Stdout", "STDOUT", "stdin", "exitCode", "Exit", "error", "output", "stdout "} {
		cases = append(cases, ddBad("kind "+ddQ(k), ddStdout().set("kind", ddQ(k)).String(), "kind"))
	}
	ddRunRejects(t, cases)

	t.Run("every kind in DEVICE_CHUNK_KINDS with its own field is accepted", func(t *testing.T) {
		for _, k := range ChunkKinds() {
			if k == ChunkExit {
				ddExpectFrame(t, ex.String(), &Chunk{Gen: 7, InstructionID: ddInsID, StreamSeq: 1, Kind: ChunkExit})
				continue
			}
			ddExpectFrame(t, ddStdout().set("kind", ddQ(string(k))).String(), &Chunk{Gen: 7, InstructionID: ddInsID, Kind: k, Data: []byte("hi")})
		}
	})
}

// --- bad_shape: goodbye -------------------------------------------------------------

// R15: reason is one of DEVICE_GOODBYE_REASONS.
func TestGoodbyeReasonMustBeInTheClosedSet(t *testing.T) {
	var cases []ddRejectCase
	for _, r := range []string{"", "Shutdown", "SHUTDOWN", "shutdown ", "restart", "user-stop", "userStop", "draining", "revoked", "superseded"} {
		cases = append(cases, ddBad("reason "+ddQ(r), ddGoodbye().set("reason", ddQ(r)).String(), "reason"))
	}
	ddRunRejects(t, cases)
	for _, r := range GoodbyeReasons() {
		t.Run("accepts "+string(r), func(t *testing.T) {
			ddExpectFrame(t, ddGoodbye().set("reason", ddQ(string(r))).String(), &Goodbye{Gen: 7, Reason: r, GraceMs: ptr(int64(1000))})
		})
	}
}

// --- bad_shape: duplicate names -------------------------------------------------------

// A repeated member name makes a frame ambiguous; this package refuses it as
// bad_shape (the frame is JSON, so not not_json), at any depth.
func TestDuplicateMemberNamesAreBadShape(t *testing.T) {
	stat := func(o string) string { return ddResult(o).String() }
	cases := []ddRejectCase{
		ddBad("top-level gen twice, same value", ddGenAck().add("gen", `"7"`).String(), ddAnyField),
		ddBad("top-level gen twice, different values", ddGenAck().add("gen", `"8"`).String(), ddAnyField),
		ddBad("top-level t twice", ddGenAck().add("t", `"generationAck"`).String(), ddAnyField),
		ddBad("top-level t twice, different types", ddGenAck().add("t", `"heartbeat"`).String(), ddAnyField),
		ddBad("top-level name spelled with an escape", ddGenAck().String()[:len(ddGenAck().String())-1]+`,"g\u0065n":"7"}`, ddAnyField),
		ddBad("top-level unknown member twice", ddGenAck().add("x", `1`).add("x", `2`).String(), ddAnyField),
		ddBad("hello deviceId twice", ddHello().add("deviceId", ddQ(ddDevID)).String(), ddAnyField),
		ddBad("chunk dataB64 twice", ddStdout().add("dataB64", `"aGk="`).String(), ddAnyField),
		ddBad("nested in outcome: ok twice", stat(`{"ok":true,"ok":true,"kind":"void"}`), ddAnyField),
		ddBad("nested in outcome: ok true then false", stat(`{"ok":true,"kind":"void","ok":false,"errorCode":"unknown","message":"m"}`), ddAnyField),
		ddBad("nested in outcome: kind twice", stat(`{"ok":true,"kind":"void","kind":"read"}`), ddAnyField),
		ddBad("nested in outcome: unknown member twice", stat(`{"ok":true,"kind":"void","x":1,"x":1}`), ddAnyField),
		ddBad("nested in outcome.info", stat(`{"ok":true,"kind":"stat","info":{"path":"/a","path":"/b","kind":"file","size":1,"mtimeMs":1}}`), ddAnyField),
		ddBad("nested in outcome.entries[1]", stat(`{"ok":true,"kind":"stat","entries":[`+ddInfo+`,{"path":"/b","kind":"file","kind":"dir","size":1,"mtimeMs":1}]}`), ddAnyField),
		ddBad("nested in outcome.truncated", stat(`{"ok":true,"kind":"exec","exitCode":0,"truncated":{"stdout":true,"stdout":false}}`), ddAnyField),
		ddBad("nested in hello.platform", ddHello().set("platform", `{"os":"linux","os":"darwin","arch":"a","executorVersion":"v"}`).String(), ddAnyField),
		ddBad("nested in hello.resuming", ddHello().set("resuming", `{"unackedResults":1,"unackedResults":2}`).String(), ddAnyField),
		ddBad("nested in an ignored member", ddGenAck().set("ext", `{"a":{"b":1,"b":2}}`).String(), ddAnyField),
		ddBad("nested in an object inside an ignored array", ddGenAck().set("ext", `[{"b":1,"b":2}]`).String(), ddAnyField),
	}
	ddRunRejects(t, cases)

	t.Run("the same name in different objects is no duplicate", func(t *testing.T) {
		f := ddDecode(t, ddResult(`{"ok":true,"kind":"stat","entries":[`+ddInfo+`,`+ddInfo+`]}`).add("ok", `1`).add("kind", `"x"`).String())
		if got := len(ddOutcomeOf(f).(StatOutcome).Entries); got != 2 {
			t.Errorf("decoded %d entries, want 2", got)
		}
	})
}

// --- bad_shape: identifiers -----------------------------------------------------------

// §2.2: deviceId and instructionId are non-empty strings.
func TestIdentifiersMustBeNonEmpty(t *testing.T) {
	ddRunRejects(t, []ddRejectCase{
		ddBad("hello deviceId empty", ddHello().set("deviceId", `""`).String(), "deviceId"),
		ddBad("result instructionId empty", ddResult(`{"ok":true,"kind":"void"}`).set("instructionId", `""`).String(), "instructionId"),
		ddBad("chunk instructionId empty", ddStdout().set("instructionId", `""`).String(), "instructionId"),
		ddBad("exit chunk instructionId empty", ddExit().set("instructionId", `""`).String(), "instructionId"),
	})
}

// --- bad_shape: outcomes ----------------------------------------------------------------

// §3.3: an outcome is exactly one of the arms; an arm of the wrong shape is
// bad_shape, naming the field under outcome.
func TestOutcomeArmsOfTheWrongShape(t *testing.T) {
	res := func(o string) string { return ddResult(o).String() }
	fail := ddFields{{"ok", `false`}, {"errorCode", `"not_found"`}, {"message", `"no such file: /w/a"`}}
	exec := ddFields{{"ok", `true`}, {"kind", `"exec"`}, {"exitCode", `0`}}
	write := ddFields{{"ok", `true`}, {"kind", `"write"`}, {"canonicalPath", `"/w/a"`}}
	cancelled := ddFields{{"ok", `true`}, {"kind", `"cancelled"`}, {"state", `"killed"`}}
	stat := ddFields{{"ok", `true`}, {"kind", `"stat"`}}
	info := func(fi ddFields) string { return res(stat.set("info", fi.String()).String()) }

	cases := []ddRejectCase{
		ddBad("empty outcome", res(`{}`), "outcome.ok"),
		ddBad("missing ok on a success arm", res(`{"kind":"void"}`), "outcome.ok"),
		ddBad("missing ok on a failure arm", res(fail.without("ok").String()), "outcome.ok"),
		ddBad("ok a string", res(`{"ok":"true","kind":"void"}`), "outcome.ok"),
		ddBad("ok a number", res(`{"ok":1,"kind":"void"}`), "outcome.ok"),
		ddBad("ok null", res(`{"ok":null,"kind":"void"}`), "outcome.ok"),
		ddBad("ok an object", res(`{"ok":{},"kind":"void"}`), "outcome.ok"),

		ddBad("ok:false without errorCode", res(fail.without("errorCode").String()), "outcome.errorCode"),
		ddBad("ok:false without message", res(fail.without("message").String()), "outcome.message"),
		ddBad("ok:false with neither", res(`{"ok":false}`), ddAnyField),
		ddBad("ok:false with a kind instead", res(`{"ok":false,"kind":"void"}`), ddAnyField),
		ddBad("errorCode a number", res(fail.set("errorCode", `404`).String()), "outcome.errorCode"),
		ddBad("errorCode null", res(fail.set("errorCode", `null`).String()), "outcome.errorCode"),
		ddBad("message a number", res(fail.set("message", `5`).String()), "outcome.message"),
		ddBad("message null", res(fail.set("message", `null`).String()), "outcome.message"),
	}
	for _, code := range []string{"", "NOT_FOUND", "Not_Found", "not-found", "notFound", "enoent", "error", "cancelled", "killed", "not_found "} {
		cases = append(cases, ddBad("errorCode "+ddQ(code), res(fail.set("errorCode", ddQ(code)).String()), "outcome.errorCode"))
	}
	cases = append(cases,
		ddBad("ok:true without kind", res(`{"ok":true}`), "outcome.kind"),
		ddBad("ok:true with only the failure fields", res(`{"ok":true,"errorCode":"not_found","message":"m"}`), "outcome.kind"),
		ddBad("kind a number", res(`{"ok":true,"kind":1}`), "outcome.kind"),
		ddBad("kind null", res(`{"ok":true,"kind":null}`), "outcome.kind"),
	)
	for _, k := range []string{"", "Exec", "EXEC", "execStream", "exec2", "ok", "failure", "fileInfo", "stats", "cancel"} {
		cases = append(cases, ddBad("kind "+ddQ(k), res(`{"ok":true,"kind":`+ddQ(k)+`}`), "outcome.kind"))
	}
	cases = append(cases,
		ddBad("exec without exitCode", res(exec.without("exitCode").String()), "outcome.exitCode"),
		ddBad("exec exitCode fractional", res(exec.set("exitCode", `1.5`).String()), "outcome.exitCode"),
		ddBad("exec exitCode exponent", res(exec.set("exitCode", `1e0`).String()), "outcome.exitCode"),
		ddBad("exec exitCode a string", res(exec.set("exitCode", `"0"`).String()), "outcome.exitCode"),
		ddBad("exec exitCode null", res(exec.set("exitCode", `null`).String()), "outcome.exitCode"),
		ddBad("exec truncated a boolean", res(exec.set("truncated", `true`).String()), "outcome.truncated"),
		ddBad("exec truncated null", res(exec.set("truncated", `null`).String()), "outcome.truncated"),
		ddBad("exec truncated.stdout a string", res(exec.set("truncated", `{"stdout":"true","stderr":false}`).String()), "outcome.truncated.stdout"),
		ddBad("exec truncated.stderr a number", res(exec.set("truncated", `{"stdout":true,"stderr":0}`).String()), "outcome.truncated.stderr"),

		ddBad("write without canonicalPath", res(write.without("canonicalPath").String()), "outcome.canonicalPath"),
		ddBad("write canonicalPath empty", res(write.set("canonicalPath", `""`).String()), "outcome.canonicalPath"),
		ddBad("write canonicalPath a number", res(write.set("canonicalPath", `5`).String()), "outcome.canonicalPath"),
		ddBad("write canonicalPath null", res(write.set("canonicalPath", `null`).String()), "outcome.canonicalPath"),
		ddBad("write inode a number", res(write.set("inode", `42`).String()), "outcome.inode"),
		ddBad("write created a string", res(write.set("created", `"true"`).String()), "outcome.created"),
		ddBad("write created null", res(write.set("created", `null`).String()), "outcome.created"),

		ddBad("cancelled without state", res(cancelled.without("state").String()), "outcome.state"),
		ddBad("cancelled state a number", res(cancelled.set("state", `0`).String()), "outcome.state"),
	)
	for _, s := range []string{"", "Killed", "running", "started", "not-started", "notStarted", "cancelled", "aborted"} {
		cases = append(cases, ddBad("cancelled state "+ddQ(s), res(cancelled.set("state", ddQ(s)).String()), "outcome.state"))
	}
	for _, n := range []string{"path", "kind", "size", "mtimeMs"} {
		cases = append(cases,
			ddBad("stat info without "+n, info(ddInfoFields().without(n)), "outcome.info."+n),
			ddBad("stat entry without "+n, res(stat.set("entries", `[`+ddInfo+`,`+ddInfoFields().without(n).String()+`]`).String()), "outcome.entries[1]."+n),
		)
	}
	cases = append(cases,
		ddBad("stat info empty", info(ddFields{}), ddAnyField),
		ddBad("stat info a string", res(stat.set("info", `"/w/a"`).String()), "outcome.info"),
		ddBad("stat info an array", res(stat.set("info", `[`+ddInfo+`]`).String()), "outcome.info"),
		ddBad("stat info null", res(stat.set("info", `null`).String()), "outcome.info"),
		ddBad("stat info.path a number", info(ddInfoFields().set("path", `1`)), "outcome.info.path"),
		ddBad("stat info.kind outside the set", info(ddInfoFields().set("kind", `"fifo"`)), "outcome.info.kind"),
		ddBad("stat info.kind upper-case", info(ddInfoFields().set("kind", `"File"`)), "outcome.info.kind"),
		ddBad("stat info.kind a number", info(ddInfoFields().set("kind", `1`)), "outcome.info.kind"),
		ddBad("stat info.size a string", info(ddInfoFields().set("size", `"12"`)), "outcome.info.size"),
		ddBad("stat info.mtimeMs fractional", info(ddInfoFields().set("mtimeMs", `1700000000000.5`)), "outcome.info.mtimeMs"),
		ddBad("stat info.mode a string", info(ddInfoFields().set("mode", `"0644"`)), "outcome.info.mode"),
		ddBad("stat info.mode null", info(ddInfoFields().set("mode", `null`)), "outcome.info.mode"),

		ddBad("stat entries an object", res(stat.set("entries", ddInfo).String()), "outcome.entries"),
		ddBad("stat entries a string", res(stat.set("entries", `"[]"`).String()), "outcome.entries"),
		ddBad("stat entries null", res(stat.set("entries", `null`).String()), "outcome.entries"),
		ddBad("stat entries a number", res(stat.set("entries", `0`).String()), "outcome.entries"),
		ddBad("stat entry a string", res(stat.set("entries", `["/w/a"]`).String()), "outcome.entries[0]"),
		ddBad("stat entry a number", res(stat.set("entries", `[1]`).String()), "outcome.entries[0]"),
		ddBad("stat entry null", res(stat.set("entries", `[null]`).String()), "outcome.entries[0]"),
		ddBad("stat entry an array", res(stat.set("entries", `[[]]`).String()), "outcome.entries[0]"),
		ddBad("stat second entry of the wrong type", res(stat.set("entries", `[`+ddInfo+`,true]`).String()), "outcome.entries[1]"),
		ddBad("stat entry kind outside the set", res(stat.set("entries", `[`+ddInfoFields().set("kind", `"socket"`).String()+`]`).String()), "outcome.entries[0].kind"),

		ddBad("stat linkTarget a number", res(stat.set("linkTarget", `5`).String()), "outcome.linkTarget"),
		ddBad("stat linkTarget true", res(stat.set("linkTarget", `true`).String()), "outcome.linkTarget"),
		ddBad("stat linkTarget false", res(stat.set("linkTarget", `false`).String()), "outcome.linkTarget"),
		ddBad("stat linkTarget an object", res(stat.set("linkTarget", `{}`).String()), "outcome.linkTarget"),
		ddBad("stat linkTarget an array", res(stat.set("linkTarget", `["/t"]`).String()), "outcome.linkTarget"),

		ddBad("stat existsValue a string", res(stat.set("existsValue", `"true"`).String()), "outcome.existsValue"),
		ddBad("stat existsValue the string false", res(stat.set("existsValue", `"false"`).String()), "outcome.existsValue"),
		ddBad("stat existsValue a number", res(stat.set("existsValue", `1`).String()), "outcome.existsValue"),
		ddBad("stat existsValue null", res(stat.set("existsValue", `null`).String()), "outcome.existsValue"),

		ddBad("stat canonicalPath empty", res(stat.set("canonicalPath", `""`).String()), "outcome.canonicalPath"),
		ddBad("stat canonicalPath a number", res(stat.set("canonicalPath", `5`).String()), "outcome.canonicalPath"),
		ddBad("stat canonicalPath null", res(stat.set("canonicalPath", `null`).String()), "outcome.canonicalPath"),
	)
	ddRunRejects(t, cases)
}
