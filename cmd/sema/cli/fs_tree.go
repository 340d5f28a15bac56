package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/sema-agent/sema/internal/safetext"
	"github.com/sema-agent/sema/internal/words"
	"github.com/sema-agent/sema/protocol"
)

// put -r and get -r copy a directory tree as cp -r and scp -r do: into
// DEST/NAME when DEST is a directory, else to DEST itself. Each file goes
// as a single put or get does (atomic; a put verified by its digest), one
// after the other; the first failure stops the copy, and the summary says
// how far it got. A symbolic link is followed to a regular file, and
// anything else that is not a regular file or a directory is skipped with a
// warning.

// treeCount is what a tree copy did.
type treeCount struct {
	files, dirs, skipped int
	bytes                int64
}

func (n treeCount) String() string {
	s := fmt.Sprintf("%s (%s) and %s", words.Count(n.files, "file", "files"), words.Bytes(n.bytes), words.Count(n.dirs, "directory", "directories"))
	if n.skipped > 0 {
		s += fmt.Sprintf(", %s skipped", words.Count(n.skipped, "entry", "entries"))
	}
	return s
}

// summary says on stderr what the copy did, also when err stopped it.
func (n treeCount) summary(verb, where string, err error) error {
	if err != nil {
		fmt.Fprintf(Stderr, "sema: %s %s %s before it stopped\n", verb, n, safetext.String(where))
		return err
	}
	fmt.Fprintf(Stderr, "%s %s %s\n", verb, n, safetext.String(where))
	return nil
}

// putTree copies the local directory dir to dst on the device.
func (fc fsCall) putTree(dir, dst string) error {
	o, err := fc.run(protocol.KindFileInfo, protocol.PathArgs{Path: dst}, nil, protocol.OutcomeStat, nil)
	switch {
	case err == nil && o.Info != nil && o.Info.Kind == protocol.FileKindDir:
		dst = path.Join(dst, filepath.Base(filepath.Clean(dir)))
	case err == nil:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s exists and is not a directory", safetext.String(dst))}
	case o.ErrorCode != protocol.ErrNotFound:
		return err
	}
	var n treeCount
	err = filepath.WalkDir(dir, func(local string, d fs.DirEntry, err error) error {
		if err != nil {
			return nothingSent(err)
		}
		rel, err := filepath.Rel(dir, local)
		if err != nil {
			return err
		}
		remote := path.Join(dst, filepath.ToSlash(rel))
		if d.IsDir() {
			n.dirs++
			return fc.mkdirAll(remote)
		}
		fi, err := os.Stat(local) // a link is followed
		if err != nil || !fi.Mode().IsRegular() {
			n.skipped++
			fmt.Fprintf(Stderr, "sema: skipped %s: not a regular file or a directory\n", safetext.String(local))
			return nil
		}
		f, err := os.Open(local)
		if err != nil {
			return nothingSent(err)
		}
		defer f.Close()
		size, err := fc.putFile(f, fi.Mode().Perm(), local, remote, false)
		if err == nil {
			n.files++
			n.bytes += size
		}
		return err
	})
	return n.summary("put", "to "+dst, err)
}

// getTree copies the device's directory remote to local here.
func (fc fsCall) getTree(remote, local string) error {
	if fi, err := os.Stat(local); err == nil && fi.IsDir() {
		local = filepath.Join(local, path.Base(remote))
	}
	var n treeCount
	err := fc.getDir(remote, local, &n)
	return n.summary("got", "into "+local, err)
}

// getDir makes the directory local and gets the device's directory remote
// into it, its subdirectories first to last as listDir lists them.
func (fc fsCall) getDir(remote, local string, n *treeCount) error {
	if err := os.Mkdir(local, 0o755&^umask()); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	n.dirs++
	o, err := fc.run(protocol.KindListDir, protocol.PathArgs{Path: remote}, nil, protocol.OutcomeStat, nil)
	if err != nil {
		return err
	}
	for _, e := range o.Entries {
		name := path.Base(e.Path)
		// A listing names the directory's own entries, nothing above it.
		if path.Dir(e.Path) != path.Clean(remote) || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
			return &ExitError{Code: ExitLaneFailure, Err: fmt.Errorf("the listing of %s names %s, which is not in it", safetext.String(remote), safetext.String(e.Path))}
		}
		into := filepath.Join(local, name)
		switch e.Kind {
		case protocol.FileKindDir:
			err = fc.getDir(e.Path, into, n)
		case protocol.FileKindFile:
			if err = fc.getFile(e.Path, into); err == nil {
				n.files++
				n.bytes += e.Size
			}
		default:
			n.skipped++
			fmt.Fprintf(Stderr, "sema: skipped %s: a %s\n", safetext.String(e.Path), safetext.String(string(e.Kind)))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
