//go:build linux || darwin

package ops

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"

	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

// staging is the file a write's payload is assembled in: for writeFile and
// writeFileExclusive a new file (O_EXCL, mode 0600) next to the target, so
// that the final rename is atomic; for appendFile an unnamed file in
// os.TempDir (see stageAnonymous).
type staging struct {
	f    *os.File
	dfd  int    // the directory holding name; not owned by staging
	name string // "" when the file has no name (anonymous, or renamed into place)
	// gone, when not nil, is Request.Staged's answer: called once the named
	// file is no longer there (removed, or renamed into place).
	gone func()
}

// forget tells Request.Staged's recorder, once, that the file is gone.
func (s *staging) forget() {
	if s.gone != nil {
		s.gone()
		s.gone = nil
	}
}

// discard closes and unlinks the staging file: after it, nothing of it is
// left behind. It is safe to call more than once.
func (s *staging) discard() {
	if s == nil {
		return
	}
	if s.f != nil {
		_ = s.f.Close()
		s.f = nil
	}
	if s.name != "" {
		_ = unix.Unlinkat(s.dfd, s.name, 0)
		s.name = ""
	}
	s.forget()
}

// stageBeside creates the staging file of a write next to its target t and
// tells Request.Staged where it is and which object it is, so that an
// executor that crashes before the rename has its successor remove it.
func (op *fileOp) stageBeside(t *writeTarget) (*staging, error) {
	s, err := stageIn(t.dfd, t.name)
	if err != nil || op.req.Staged == nil {
		return s, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(s.f.Fd()), &st); err != nil {
		s.discard()
		return nil, err
	}
	s.gone = op.req.Staged(joinPath(t.dir, s.name), uint64(st.Dev), st.Ino) // Dev: int32 on darwin
	return s, nil
}

// IsStagingName reports whether base is the name stageIn gives a staging
// file: a hidden ".NAME.sema-HEX.tmp".
func IsStagingName(base string) bool {
	rest, ok := strings.CutPrefix(base, ".")
	if !ok {
		return false
	}
	rest, ok = strings.CutSuffix(rest, ".tmp")
	i := strings.LastIndex(rest, ".sema-")
	if !ok || i < 0 {
		return false
	}
	r, err := hex.DecodeString(rest[i+len(".sema-"):])
	return err == nil && len(r) == 8
}

// stageIn creates a staging file in the directory dfd for the target base:
// a hidden name that says what it is, random, O_EXCL, mode 0600.
func stageIn(dfd int, base string) (*staging, error) {
	if len(base) > 200 {
		base = base[:200] // keep the name under NAME_MAX (255)
	}
	for range 100 {
		var r [8]byte
		_, _ = rand.Read(r[:]) // never fails (crypto/rand)
		name := "." + base + ".sema-" + hex.EncodeToString(r[:]) + ".tmp"
		fd, err := openFD(dfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &staging{f: os.NewFile(uintptr(fd), name), dfd: dfd, name: name}, nil
	}
	return nil, unix.EEXIST
}

// stageAnonymous creates a staging file with no name in os.TempDir: an
// unnamed file where the platform has one (O_TMPFILE on Linux), else a
// named file unlinked at once.
// appendFile uses it because it never renames, so it needs no place next to
// the target, and because appending must work where the target's directory
// is not writable but the target is.
func stageAnonymous() (*staging, error) {
	dir := os.TempDir()
	fd, err := fsys.tmpFile(dir)
	if err == nil {
		return &staging{f: os.NewFile(uintptr(fd), dir), dfd: -1}, nil
	}
	// The staging place needs no containment: nothing is named there.
	dfd, err := openFD(unix.AT_FDCWD, dir, fsys.dirFlags(), 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer closeFD(dfd)
	s, err := stageIn(dfd, "append")
	if err != nil {
		return nil, err
	}
	if err := unix.Unlinkat(dfd, s.name, 0); err != nil {
		s.discard()
		return nil, err
	}
	s.name = ""
	return s, nil
}

// receive reads the payload sub-sequence of a write (§3.4) into a staging
// file that stage creates when begin arrives: begin{totalLen, sha256}, then
// chunks at offsets contiguous and ascending from 0, then commit. begin and
// commit must agree with args; the content must be exactly contentLen bytes
// with the announced SHA-256 (hashed as it is written). Any deviation fails
// the whole instruction invalid; a stream that ends before commit fails it
// transport_lost; a done context answers as interrupted says. On every
// failure the staging file is removed before receive returns.
func (op *fileOp) receive(a protocol.WriteArgs, stage func() (*staging, error)) (*staging, protocol.Outcome) {
	var (
		s       *staging
		h       = sha256.New()
		got     int64
		flushed int64 // staged bytes whose writeback has been started
	)
	bad := func(format string, args ...any) (*staging, protocol.Outcome) {
		s.discard()
		return nil, failf(protocol.ErrInvalid, "%s %q: bad payload: "+format, append([]any{op.req.Kind, a.Path}, args...)...)
	}
	for {
		var (
			p  *protocol.Payload
			ok bool
		)
		select {
		case <-op.ctx.Done():
			s.discard()
			return nil, op.stopped()
		case p, ok = <-op.req.Payload:
		}
		if !ok {
			s.discard()
			if op.ctx.Err() != nil {
				return nil, op.stopped()
			}
			return nil, failf(protocol.ErrTransportLost, "%s %q: the payload stream ended after %d of %d bytes, before its commit; nothing was written",
				op.req.Kind, a.Path, got, a.ContentLen)
		}
		if p == nil {
			return bad("an empty payload frame")
		}
		if p.InstructionID != "" && op.req.InstructionID != "" && p.InstructionID != op.req.InstructionID {
			return bad("a frame of instruction %q", p.InstructionID)
		}
		switch p.Part {
		case protocol.PartBegin:
			if s != nil {
				return bad("a second begin")
			}
			if p.TotalLen != a.ContentLen || p.SHA256 != a.SHA256 {
				return bad("begin announces %d bytes with sha256 %s, args say %d bytes with sha256 %s",
					p.TotalLen, p.SHA256, a.ContentLen, a.SHA256)
			}
			op.started = true
			var err error
			if s, err = stage(); err != nil {
				return nil, stagingFailure("create a staging file for", a.Path, err)
			}
		case protocol.PartChunk:
			if s == nil {
				return bad("a chunk before begin")
			}
			if p.Offset != got {
				return bad("a chunk at offset %d where offset %d was due (a gap, an overlap or a reordering)", p.Offset, got)
			}
			if int64(len(p.Data)) > a.ContentLen-got {
				return bad("more than the %d bytes announced", a.ContentLen)
			}
			if _, err := s.f.Write(p.Data); err != nil {
				s.discard()
				return nil, stagingFailure("write the staging file for", a.Path, err)
			}
			h.Write(p.Data)
			got += int64(len(p.Data))
			if got-flushed >= writebackBytes {
				fsys.writeback(int(s.f.Fd()), flushed, got-flushed)
				flushed = got
			}
		case protocol.PartCommit:
			if s == nil {
				return bad("a commit before begin")
			}
			if p.TotalLen != a.ContentLen || p.SHA256 != a.SHA256 {
				return bad("commit announces %d bytes with sha256 %s, args say %d bytes with sha256 %s",
					p.TotalLen, p.SHA256, a.ContentLen, a.SHA256)
			}
			if got != a.ContentLen {
				return bad("only %d of %d bytes arrived before commit", got, a.ContentLen)
			}
			if sum := protocol.Digest(h.Sum(nil)); sum != a.SHA256 {
				return bad("the content's sha256 is %s, not the announced %s", sum, a.SHA256)
			}
			return s, nil
		default:
			return bad("unknown part %q", p.Part)
		}
	}
}

// errNoPayload: the runtime attached no payload stream to a write.
var errNoPayload = errors.New("no payload stream is attached to this write instruction")

// writebackBytes: every so many bytes received, writeback of the staged
// ones is started (fsys.writeback: sync_file_range(SYNC_FILE_RANGE_WRITE)
// on Linux, which does not wait for it; nothing on darwin), so that the disk works while the payload still arrives and
// the fsync at commit finds little left to write. Measured: a 256 MiB
// write took about 30% less time with it (docs/fs-ops.md).
const writebackBytes = 8 << 20
