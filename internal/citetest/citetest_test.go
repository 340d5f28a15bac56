// Package citetest holds a rule of the module's comments and docs as a
// test: they state rules and behaviour, citing the spec's sections where a
// rule is not obvious (§5 R2, §1.3), and never cite the project's tracker
// (an issue's letter or number, an item of one) nor narrate history. A
// citation fails naming the file and line.
package citetest

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citation is one form a tracker citation or a history note takes.
type citation struct {
	what string
	re   *regexp.Regexp
}

var citations = []citation{
	{"a tracker issue by letter", regexp.MustCompile(`\b[Ii]ssues? [A-Z]\b`)},
	{"a tracker issue by number", regexp.MustCompile(`\b[Ii]ssues? #?[0-9]+\b`)},
	{"an item of a tracker issue", regexp.MustCompile(`\b[A-Z] items? [0-9]+\b`)},
	{"an issue's item as a label", regexp.MustCompile(`(^|[^\w.§])[A-Z]\.[0-9]+(:|\s+(at|on|and)\b)`)},
	{"the tracker issue itself", regexp.MustCompile(`\b[Tt]he issue\b`)},
	{"a history note", regexp.MustCompile(`\(before:|\bpreviously\b`)},
}

// external is text that names another project's tracker, which is a fair
// reference (Go's, by number).
var external = regexp.MustCompile(`\bGo issues? #?[0-9]+\b`)

// checked reports whether a file of the module holds comments or docs this
// rule reads.
func checked(path string) bool {
	switch filepath.Ext(path) {
	case ".go", ".md", ".sql", ".sh":
		return true
	}
	base := filepath.Base(path)
	return base == "Makefile" || filepath.Base(filepath.Dir(path)) == "scripts" || filepath.Base(filepath.Dir(path)) == "ci"
}

func TestNoTrackerCitations(t *testing.T) {
	root := moduleRoot(t)
	self, err := filepath.Abs("citetest_test.go")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if !checked(path) || path == self {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		for _, f := range findCitations(t, path) {
			t.Errorf("%s:%d: %s: %q", rel, f.line, f.what, f.text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestThePatterns holds the patterns to what they must catch
// (testdata/caught.txt) and must not (testdata/passed.txt), a sample a
// line. The samples live in testdata, which the rule does not read.
func TestThePatterns(t *testing.T) {
	for file, wantCaught := range map[string]bool{"caught.txt": true, "passed.txt": false} {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			switch w := citedAs(s); {
			case wantCaught && w == "":
				t.Errorf("%q is not caught", s)
			case !wantCaught && w != "":
				t.Errorf("%q is caught as %s", s, w)
			}
		}
	}
}

type found struct {
	line       int
	what, text string
}

func findCitations(t *testing.T, path string) []found {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []found
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for n := 1; sc.Scan(); n++ {
		if w := citedAs(sc.Text()); w != "" {
			out = append(out, found{n, w, strings.TrimSpace(sc.Text())})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// citedAs is what form of citation line holds, "" for none.
func citedAs(line string) string {
	line = external.ReplaceAllString(line, "")
	for _, c := range citations {
		if c.re.MatchString(line) {
			return c.what
		}
	}
	return ""
}

// moduleRoot is the directory of the go.mod above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
