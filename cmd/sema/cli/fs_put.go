package cli

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/safetext"
	"github.com/sema-agent/sema/internal/words"
	"github.com/sema-agent/sema/protocol"
)

const putShort = "Write a local file (or standard input) of any size to PATH on the device, atomically (writeFile)"

// fs put streams the file with the upload endpoint (docs/api.md, "Streamed
// writes"): one code path for every size, the content read twice (once for
// its digest, which the upload needs first, §3.4, then sent), never held.
// Standard input is spooled to an unlinked temp file first. contentB64 is
// no faster for small files: measured through the real binaries on
// loopback (20 puts each, two rounds), 4 KiB took 10–12 ms a put streamed
// against 13–17 ms as contentB64, 1 MiB 23 ms against 52 ms, 16 MiB
// 123–184 ms against 326–437 ms.
//
// The write's args have no mode (§3.1's closed set), so a new file gets
// the local file's executable bits as scp does with an exec of chmod after
// the write; a replaced file keeps its mode (the executor keeps it).

func fsPut(fc fsCall, args []string) error {
	if rec, _ := fc.c.Flags().GetBool("recursive"); rec && args[0] != "-" {
		if fi, err := os.Stat(args[0]); err == nil && fi.IsDir() {
			return fc.putTree(args[0], remotePath(fc.dev, args[1]))
		}
	}
	src, mode, err := openLocal(fc.c.Context(), args[0])
	if err != nil {
		return nothingSent(err)
	}
	defer src.Close()
	parents, _ := fc.c.Flags().GetBool("parents")
	_, err = fc.putFile(src, mode, args[0], remotePath(fc.dev, args[1]), parents)
	return intoDirHint(err, args[0], args[1])
}

// intoDirHint adds to a put refused is_directory (PATH is a directory:
// a write names the file itself, unlike cp) the line that puts the file
// into that directory.
func intoDirHint(err error, local, dst string) error {
	var ee *ExitError
	if !errors.As(err, &ee) || !strings.HasPrefix(ee.Err.Error(), string(protocol.ErrIsDirectory)+":") {
		return err
	}
	name := "NAME"
	if local != "-" {
		name = filepath.Base(local)
	}
	line := "sema fs put " + local + " " + path.Join(dst, name)
	return &ExitError{Code: ee.Code, Err: fmt.Errorf("%w (to put the file into it: %s)", ee.Err, safetext.String(line))}
}

// putFile sends src (named name here, with mode) to dst on the device,
// atomically and verified, says so on stdout, and returns its size. With
// parents, a missing directory of dst is made first.
func (fc fsCall) putFile(src *os.File, mode os.FileMode, name, dst string, parents bool) (int64, error) {
	size, sum, err := digestOf(src)
	if err != nil {
		return 0, nothingSent(fmt.Errorf("reading %s: %w", name, err))
	}
	send := func() (client.Result, error) {
		prog := newProgress("put", size)
		defer prog.done()
		return upload(fc.c.Context(), fc.lc, fc.dev.DeviceID, api.UploadRequest{
			Path: dst, TimeoutMs: fc.transferTimeout(size).Milliseconds(),
		}, prog.reader(src), size, sum, client.Sink{})
	}
	res, err := send()
	if parents && err == nil && res.Outcome.ErrorCode == protocol.ErrNotFound {
		// The directory is missing (the write never began): make it and
		// send the file once more.
		if err = fc.mkdirAll(path.Dir(dst)); err != nil {
			return 0, err
		}
		if _, err = src.Seek(0, io.SeekStart); err != nil {
			return 0, nothingSent(err)
		}
		res, err = send()
	}
	if err == nil {
		err = failure(res, protocol.OutcomeWrite)
	}
	if err != nil {
		return 0, err
	}
	o := res.Outcome
	created := o.Created != nil && *o.Created
	verb := "wrote"
	if created {
		verb = "created"
	}
	fmt.Fprintf(Stdout, "%s %s (%s)\n", verb, safetext.String(o.CanonicalPath), words.Bytes(size))
	if created && mode&0o111 != 0 {
		return size, fc.setExecBits(o.CanonicalPath, mode)
	}
	return size, nil
}

// mkdirAll creates the directory dir on the device with its parents.
func (fc fsCall) mkdirAll(dir string) error {
	parents := true
	_, err := fc.run(protocol.KindCreateDir, protocol.DirArgs{Path: dir, Recursive: &parents}, nil, protocol.OutcomeVoid, nil)
	return err
}

// openLocal opens what put sends: a regular file, or standard input ("-")
// spooled to a temp file. mode is the file's (0 for stdin).
func openLocal(ctx context.Context, name string) (*os.File, os.FileMode, error) {
	if name == "-" {
		f, _, _, err := spoolStdin(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("reading standard input: %w", err)
		}
		return f, 0, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, err // the os error names the file
	}
	fi, err := f.Stat()
	switch {
	case err == nil && fi.IsDir():
		err = fmt.Errorf("%s is a directory: -r copies it (sema fs put -r)", name)
	case err == nil && !fi.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file", name)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Mode().Perm(), nil
}

// digestOf reads f to its end for its size and SHA-256, and rewinds it.
func digestOf(f *os.File) (int64, protocol.Digest, error) {
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	return n, protocol.Digest(h.Sum(nil)), err
}

// setExecBits gives the new file at p the executable bits mode has (only
// those: u, g, o), with chmod on the device. A failure leaves the file
// written: exit 1 with a warning that says so.
func (fc fsCall) setExecBits(p string, mode os.FileMode) error {
	var who []string
	for _, b := range []struct {
		bit  os.FileMode
		name string
	}{{0o100, "u+x"}, {0o010, "g+x"}, {0o001, "o+x"}} {
		if mode&b.bit != 0 {
			who = append(who, b.name)
		}
	}
	command := "chmod " + strings.Join(who, ",") + " -- " + singleQuote(p)
	var out strings.Builder
	res, err := instruct(fc.c.Context(), fc.lc, fc.dev.DeviceID, api.InstructionRequest{
		Kind: protocol.KindExec, Args: protocol.CommandArgs{Command: command}, TimeoutMs: fc.f.timeout.Milliseconds(),
	}, client.Sink{Chunk: func(_ protocol.ChunkKind, data []byte) error {
		if out.Len() < 4096 {
			out.Write(data)
		}
		return nil
	}})
	if err == nil {
		err = failure(res, protocol.OutcomeExec)
	}
	if err == nil && (res.Outcome.ExitCode == nil || *res.Outcome.ExitCode != 0) {
		err = fmt.Errorf("chmod exited %v: %s", derefOr(res.Outcome.ExitCode, -1), strings.TrimSpace(out.String()))
	}
	if err != nil {
		var ee *ExitError
		if errors.As(err, &ee) {
			err = ee.Err
		}
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("wrote %s, but could not set its executable bits: %w", p, err)}
	}
	return nil
}

// singleQuote quotes s for a POSIX shell, always.
func singleQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func derefOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}
