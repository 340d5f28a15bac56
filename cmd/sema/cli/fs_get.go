package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/sema-agent/sema/internal/safetext"
	"github.com/sema-agent/sema/internal/words"
	"github.com/sema-agent/sema/protocol"
)

const getShort = "Copy a file of any size from the device to LOCAL (default: its name here; - for standard output), atomically (readBinaryFile)"

// fs get streams readBinaryFile to disk: into a temp file beside LOCAL,
// renamed over it at the end (scp overwrites too, but never leaves half a
// file); on any failure the temp file is removed. A fileInfo first gives
// the size for the progress line's time left. The file may change
// meanwhile: the bytes are what readBinaryFile read, and more than the size
// (a file appended to) is a copy of it as it was read; fewer is a copy cut
// short, which is a failure, never passed off as the file (§4: no silent
// truncation).

func fsGet(fc fsCall, args []string) error {
	remote := remotePath(fc.dev, args[0])
	local := path.Base(remote)
	if len(args) == 2 {
		local = args[1]
	}
	if rec, _ := fc.c.Flags().GetBool("recursive"); rec {
		o, err := fc.run(protocol.KindFileInfo, protocol.PathArgs{Path: remote}, nil, protocol.OutcomeStat, nil)
		if err != nil {
			return err
		}
		if o.Info != nil && o.Info.Kind == protocol.FileKindDir {
			switch {
			case local == "-":
				return usageError{errors.New("get -r of a directory needs a LOCAL directory, not -")}
			case len(args) == 1:
				local = "." // into ./NAME, as scp -r host:NAME . does
			}
			return fc.getTree(remote, local)
		}
	}
	if local == "-" {
		_, err := fc.getTo(remote, nil)
		return err
	}
	if fi, err := os.Stat(local); err == nil && fi.IsDir() {
		local = filepath.Join(local, path.Base(remote))
	}
	return fc.getFile(remote, local)
}

// getFile gets remote into the file local, atomically.
func (fc fsCall) getFile(remote, local string) error {
	dir, base := filepath.Split(local)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".sema-get-*")
	if err != nil {
		// The temp file's name is get's own business: say LOCAL's.
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = fmt.Errorf("cannot write %s: %s: %w", local, filepath.Clean(dir), pe.Err)
		}
		return nothingSent(err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	info, err := fc.getTo(remote, tmp)
	if err != nil {
		return err
	}
	if err := tmp.Chmod(localMode(local, info)); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), local); err != nil {
		return err
	}
	ok = true
	return nil
}

// getTo reads remote into w (nil: standard output) and returns its
// fileInfo as it was before the read.
func (fc fsCall) getTo(remote string, w *os.File) (*protocol.FileInfo, error) {
	o, err := fc.run(protocol.KindFileInfo, protocol.PathArgs{Path: remote}, nil, protocol.OutcomeStat, nil)
	if err != nil {
		return nil, err
	}
	if o.Info == nil {
		return nil, &ExitError{Code: ExitLaneFailure, Err: errors.New("the fileInfo outcome carries no info")}
	}
	if o.Info.Kind == protocol.FileKindDir {
		return nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s is a directory", safetext.String(remote))}
	}
	out := Stdout
	if w != nil {
		out = w
	}
	prog := newProgress("get", o.Info.Size)
	var n int64
	_, err = fc.runFor(fc.transferTimeout(o.Info.Size), protocol.KindReadBinaryFile, protocol.PathArgs{Path: remote}, nil, protocol.OutcomeRead,
		func(_ protocol.ChunkKind, data []byte) error {
			prog.add(len(data))
			n += int64(len(data))
			_, err := out.Write(data)
			return err
		})
	prog.done()
	// Only a regular file's size is its content's: a symlink's is its
	// target's name (fileInfo does not follow it), a special file's nothing.
	if err == nil && o.Info.Kind == protocol.FileKindFile && n < o.Info.Size {
		what := "nothing was written"
		if w == nil {
			what = "what standard output got is incomplete"
		}
		err = &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s changed on the device while it was read: it had %s when the get began, and the read ended after %s; %s",
			safetext.String(remote), words.Count(o.Info.Size, "byte", "bytes"), words.Count(n, "byte", "bytes"), what)}
	}
	return o.Info, err
}

// localMode is the mode of the file get leaves: an existing file's own;
// for a new one 0644, or 0755 when the remote file has an executable bit,
// less the umask.
func localMode(local string, info *protocol.FileInfo) fs.FileMode {
	if fi, err := os.Stat(local); err == nil {
		return fi.Mode().Perm()
	}
	mode := fs.FileMode(0o644)
	if info != nil && info.Mode != nil && *info.Mode&0o111 != 0 {
		mode = 0o755
	}
	return mode &^ umask()
}
