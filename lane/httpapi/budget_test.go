package httpapi

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"runtime"
	"testing"

	"github.com/sema-agent/sema/lane"

	"github.com/sema-agent/sema/internal/b64"
	"github.com/sema-agent/sema/protocol"
)

// The buffered-content budget (Config.MaxBufferedContent): write content
// held in memory at once is bounded server-wide, admitted by
// Content-Length before the body is read.

func TestContentBudgetArithmetic(t *testing.T) {
	b := newContentBudget(100, 100, nil)
	r1, ok := b.reserve("u", 60)
	if !ok {
		t.Fatal("60 of 100 refused")
	}
	if _, ok := b.reserve("u", 41); ok {
		t.Fatal("41 more admitted beside 60 of 100")
	}
	r2, ok := b.reserve("u", 40)
	if !ok || b.inUse() != 100 {
		t.Fatalf("40 beside 60: ok %v, in use %d", ok, b.inUse())
	}
	r1.shrinkTo(10)
	r1.shrinkTo(20) // never grows
	if b.inUse() != 50 {
		t.Fatalf("after shrinking to 10: in use %d, want 50", b.inUse())
	}
	r1.release()
	r1.release() // exactly once
	if b.inUse() != 40 {
		t.Fatalf("after releasing twice: in use %d, want 40", b.inUse())
	}
	r2.release()
	var none *reservation
	none.release()
	none.shrinkTo(0)
	if b.inUse() != 0 {
		t.Fatalf("in use %d after every release", b.inUse())
	}
}

// A large release that leaves the budget (nearly) idle is the moment to
// hand memory back to the OS; small ones and busy budgets are not.
func TestContentBudgetQuietsAfterALargeRelease(t *testing.T) {
	quiet := 0
	b := newContentBudget(1<<30, 1<<30, func() { quiet++ })
	big, _ := b.reserve("u", 40<<20)
	small, _ := b.reserve("u", 10<<20)
	small.release()
	if quiet != 0 {
		t.Fatalf("a 10 MiB release quieted the budget")
	}
	big.release()
	if quiet != 1 {
		t.Fatalf("releasing 40 MiB of 40: quiet %d, want 1", quiet)
	}
	r, _ := b.reserve("u", 100<<20)
	r.shrinkTo(70 << 20) // 30 MiB freed
	other, _ := b.reserve("u", 40<<20)
	r.release() // 70 MiB freed, 40 still held
	if quiet != 1 {
		t.Fatalf("quiet %d after releases that left the budget busy", quiet)
	}
	other.release()
	other.release()
	if quiet != 2 {
		t.Fatalf("quiet %d after the last large release, want 2", quiet)
	}
}

// The body cap follows the budget: the longest admissible body is the
// longest whose reservation (the body and its decoded content) fits.
func TestBodyCapFollowsTheBudget(t *testing.T) {
	for _, limit := range []int64{1 << 20, 1<<20 + 3, 4 << 20, lane.DefaultConfig().MaxBufferedContent, 1 << 40} {
		n := maxInstructionBody(limit)
		if bodyReservation(n) > limit || bodyReservation(n+1) <= limit {
			t.Errorf("budget %d: cap %d reserves %d, cap+1 reserves %d", limit, n, bodyReservation(n), bodyReservation(n+1))
		}
	}
	// A 100 MiB write (about 134 MiB of JSON) fits the default budget.
	body := int64(len(writeInstructionBody(protocol.KindWriteFile, "/home/u/work/f", nil))) + int64(b64.EncodedLen(100<<20))
	if max := maxInstructionBody(lane.DefaultConfig().MaxBufferedContent); body > max {
		t.Fatalf("a 100 MiB write is a %d-byte body, over the default cap %d", body, max)
	}
}

// A 10 MiB write body is parsed with no copy of it: the decoded content
// is the only allocation in proportion to the body, also when contentB64
// escapes a character (JSON allows "\/").
func TestParsingAWriteAllocatesOnlyItsContent(t *testing.T) {
	content := patterned(10 << 20)
	plain := []byte(writeInstructionBody(protocol.KindWriteFile, "/w/f", content))
	enc := base64.StdEncoding.EncodeToString(content)
	escaped := bytes.Replace(plain, []byte(`"contentB64":"`+enc[:1]), fmt.Appendf(nil, `"contentB64":"\u%04x`, enc[0]), 1)
	escaped = bytes.ReplaceAll(escaped, []byte("/"), []byte(`\/`))
	if !bytes.Contains(escaped, []byte(`\/`)) || bytes.Equal(escaped, plain) {
		t.Fatal("the escaped body escapes nothing")
	}
	for name, body := range map[string][]byte{"plain": plain, "escaped": escaped} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		req, aerr := parseInstructionRequest(body, true)
		runtime.ReadMemStats(&after)
		if aerr != nil {
			t.Fatalf("%s: %v", name, aerr)
		}
		if !bytes.Equal(req.Content, content) {
			t.Fatalf("%s: the content differs", name)
		}
		if got, bound := after.TotalAlloc-before.TotalAlloc, uint64(len(content))+256<<10; got > bound {
			t.Errorf("%s: parsing a %d-byte body allocated %d bytes, want at most the content and 256 KiB (%d)", name, len(body), got, bound)
		}
	}
}
func writeInstructionBody(kind protocol.InstructionKind, path string, content []byte) string {
	return fmt.Sprintf(`{"kind":%q,"args":{"path":%q},"timeoutMs":60000,"contentB64":%q}`,
		kind, path, base64.StdEncoding.EncodeToString(content))
}
func patterned(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>9)
	}
	return b
}

// One identity holds at most its share: another identity still gets
// through while the first is at its cap, and a release gives the share back.
func TestOneIdentityCannotHoldTheWholeBudget(t *testing.T) {
	b := newContentBudget(100, 40, nil)
	a1, ok := b.reserve("alice", 40)
	if !ok {
		t.Fatal("alice's first 40")
	}
	if _, ok := b.reserve("alice", 1); ok {
		t.Fatal("alice went past her share of 40")
	}
	bob, ok := b.reserve("bob", 40)
	if !ok {
		t.Fatal("bob was refused while alice held only her share")
	}
	a1.shrinkTo(10)
	if _, ok := b.reserve("alice", 30); !ok {
		t.Fatal("alice's share did not come back with her release")
	}
	bob.release()
	if got := b.inUse(); got != 40 {
		t.Fatalf("in use %d, want 40", got)
	}
}
