package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Line is a record as read, with where it was read from.
type Line struct {
	Record
	File string // the file's base name
	N    int    // its line number in that file, from 1
	Err  error  // the line is not a record
}

// Where names the line for a person: journal.jsonl:12.
func (l Line) Where() string { return fmt.Sprintf("%s:%d", l.File, l.N) }

// Read reads every line of the journal in dir, oldest first: the rotated
// file, then the current one. A missing file is no error; a journal that
// was never written reads as no lines.
func Read(dir string) ([]Line, error) {
	var out []Line
	for _, name := range []string{OldFileName, FileName} {
		lines, err := readFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, lines...)
	}
	return out, nil
}

func readFile(path string) ([]Line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadFrom(f, filepath.Base(path))
}

// ReadFrom reads the lines of one journal file from r, named name.
func ReadFrom(r io.Reader, name string) ([]Line, error) {
	var out []Line
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			l := Line{File: name, N: n}
			if b[len(b)-1] != '\n' {
				l.Err = errors.New("a half-written last line")
			} else if jerr := json.Unmarshal(bytes.TrimSuffix(b, []byte("\n")), &l.Record); jerr != nil {
				l.Err = fmt.Errorf("not a record: %v", jerr)
			}
			out = append(out, l)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Problem is where the chain breaks and why.
type Problem struct {
	Line Line
	Why  string
}

func (p *Problem) Error() string { return p.Line.Where() + ": " + p.Why }

// Verify checks the chain of lines: every line a record, numbered one after
// the other, its digest its own (Digest), its prev the digest of the line
// before. The first line's prev is taken on trust: it is where the kept
// journal begins (a rotated file before it is gone). It returns the first
// line that breaks the chain, nil when none does, and the head.
func Verify(lines []Line) (head string, problem *Problem) {
	for i, l := range lines {
		switch {
		case l.Err != nil:
			return head, &Problem{l, l.Err.Error()}
		case l.Digest != Digest(l.Record):
			return head, &Problem{l, "its digest does not match its content: the record was edited"}
		case i > 0 && l.Prev != head:
			return head, &Problem{l, "it does not follow the record before it: a record was removed, added or moved"}
		case i > 0 && l.Seq != lines[i-1].Seq+1:
			return head, &Problem{l, fmt.Sprintf("its number %d does not follow %d", l.Seq, lines[i-1].Seq)}
		}
		head = l.Digest
	}
	return head, nil
}
