package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func openTest(t *testing.T, dir string, max int64) *Journal {
	t.Helper()
	j, err := Open(dir, Options{MaxSize: max})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func mustRead(t *testing.T, dir string) []Line {
	t.Helper()
	lines, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestAppendedRecordsFormOneVerifiableChain(t *testing.T) {
	dir := t.TempDir()
	j := openTest(t, dir, 0)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				j.Append(Record{Event: EventStart, InstructionID: fmt.Sprintf("w%d-%d", w, i), Kind: "exec", Summary: "true"})
			}
		}()
	}
	wg.Wait()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	lines := mustRead(t, dir)
	if len(lines) != 1000 {
		t.Fatalf("%d records, want 1000: none may be lost", len(lines))
	}
	if _, p := Verify(lines); p != nil {
		t.Fatalf("a chain written by the journal does not verify: %v", p)
	}
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the journal's mode: %v %v", fi.Mode(), err)
	}
	// Reopened, it goes on from the last record.
	j = openTest(t, dir, 0)
	j.Append(Record{Event: EventEnd, InstructionID: "after", Outcome: "ok"})
	j.Close()
	lines = mustRead(t, dir)
	if _, p := Verify(lines); p != nil || lines[len(lines)-1].Seq != 1001 {
		t.Fatalf("after a reopen: %v, last seq %d", p, lines[len(lines)-1].Seq)
	}
}

// An edited, a deleted and a reordered record each fail Verify, which names
// the first line that does not match.
func TestVerifyNamesTheFirstBrokenRecord(t *testing.T) {
	dir := t.TempDir()
	j := openTest(t, dir, 0)
	for i := range 5 {
		j.Append(Record{Event: EventEnd, InstructionID: fmt.Sprint("i", i), Kind: "exec", Summary: "echo " + fmt.Sprint(i), Outcome: "ok"})
	}
	j.Close()
	path := filepath.Join(dir, FileName)
	orig, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(orig, []byte("\n"))[:5]
	cases := map[string]struct {
		file []byte
		line int
		why  string
	}{
		"edited":    {bytes.Join(replace(lines, 2, bytes.Replace(lines[2], []byte("echo 2"), []byte("rm -rf"), 1)), nil), 3, "edited"},
		"deleted":   {bytes.Join(append(append([][]byte{}, lines[:1]...), lines[2:]...), nil), 2, "removed, added or moved"},
		"reordered": {bytes.Join([][]byte{lines[0], lines[2], lines[1], lines[3], lines[4]}, nil), 2, "removed, added or moved"},
		"garbage":   {bytes.Join(replace(lines, 4, []byte("{not json\n")), nil), 5, "not a record"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ReadFrom(bytes.NewReader(c.file), FileName)
			if err != nil {
				t.Fatal(err)
			}
			_, p := Verify(got)
			if p == nil || p.Line.N != c.line || !strings.Contains(p.Why, c.why) {
				t.Fatalf("Verify: %v, want line %d (%s)", p, c.line, c.why)
			}
		})
	}
}

func replace(lines [][]byte, i int, with []byte) [][]byte {
	out := append([][]byte{}, lines...)
	out[i] = with
	return out
}

// Rotation bounds the journal and keeps the chain: the new file's first
// record carries the old file's last digest.
func TestRotationKeepsTheChain(t *testing.T) {
	dir := t.TempDir()
	j := openTest(t, dir, 4096)
	for i := range 200 {
		j.Append(Record{Event: EventEnd, InstructionID: fmt.Sprint("i", i), Kind: "exec", Summary: strings.Repeat("x", 40), Outcome: "ok"})
		if i%20 == 0 {
			time.Sleep(time.Millisecond) // let batches form and files turn
		}
	}
	j.Close()
	for _, name := range []string{FileName, OldFileName} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Size() > 4096+4096 {
			t.Fatalf("%s: %v, %v", name, fi, err)
		}
	}
	lines := mustRead(t, dir)
	if _, p := Verify(lines); p != nil {
		t.Fatalf("across the rotation: %v", p)
	}
	rotated := 0
	for _, l := range lines {
		if l.Event == EventRotated {
			rotated++
		}
	}
	if rotated == 0 || lines[len(lines)-1].InstructionID != "i199" {
		t.Fatalf("rotated %d times, last %q", rotated, lines[len(lines)-1].InstructionID)
	}
}

// A crash in the middle of a write leaves a half line: Open cuts it off and
// the chain goes on from the last whole record.
func TestOpenCutsAHalfWrittenLastLine(t *testing.T) {
	dir := t.TempDir()
	j := openTest(t, dir, 0)
	j.Append(Record{Event: EventStart, InstructionID: "a"})
	j.Close()
	f, _ := os.OpenFile(filepath.Join(dir, FileName), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"seq":2,"time":"2026-`)
	f.Close()
	if _, p := Verify(mustRead(t, dir)); p == nil || !strings.Contains(p.Why, "half-written") {
		t.Fatalf("a half line verifies: %v", p)
	}
	j = openTest(t, dir, 0)
	j.Append(Record{Event: EventEnd, InstructionID: "a", Outcome: "ok"})
	j.Close()
	lines := mustRead(t, dir)
	if _, p := Verify(lines); p != nil || len(lines) != 2 {
		t.Fatalf("after the cut: %v, %d lines", p, len(lines))
	}
}

func FuzzReadFrom(f *testing.F) {
	f.Add([]byte(`{"seq":1,"time":"2026-12-06T00:00:00Z","event":"start","prev":"","digest":"x"}` + "\n"))
	f.Add([]byte("{\n\n}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lines, err := ReadFrom(bytes.NewReader(b), FileName)
		if err != nil {
			t.Fatal(err)
		}
		Verify(lines) // never panics, whatever the bytes
	})
}

// A record that comes after Close is not written, and does not panic.
func TestAppendAfterCloseIsDropped(t *testing.T) {
	dir := t.TempDir()
	j := openTest(t, dir, 0)
	j.Append(Record{Event: EventStart, InstructionID: "before"})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j.Append(Record{Event: EventEnd, InstructionID: "after"})
	if lines := mustRead(t, dir); len(lines) != 1 || lines[0].InstructionID != "before" {
		t.Fatalf("%d lines: %+v", len(lines), lines)
	}
}
