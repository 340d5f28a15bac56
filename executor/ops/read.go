//go:build linux || darwin

package ops

import (
	"bytes"
	"io"
	"os"
	"unicode/utf8"

	"github.com/sema-agent/sema/protocol"
	"golang.org/x/sys/unix"
)

// The read family streams a regular file's bytes as data chunks (§4) and
// answers {ok:true, kind:"read"}. The bytes are sent as they are on disk:
// readTextFile does no decoding or newline translation; it only takes care
// that a chunk does not end inside a UTF-8 sequence when the file is valid
// UTF-8 there, so that a consumer decoding chunk by chunk sees whole
// characters. An empty file (or an empty selection of lines) sends no chunk.

// openRegular opens p for reading without side effects on anything else:
// it resolves p (resolveTarget: symlinks followed, containment checked on
// the real path), refuses what is not a regular file by its lstat (a
// directory is_directory; a fifo, socket or device invalid, since opening
// one can block or act), and only then opens that name in its checked
// directory, O_NOFOLLOW, and checks that it opened the object it looked at.
func (op *fileOp) openRegular(p string) (*os.File, *protocol.Failure) {
	if f := badPath(p); f != nil {
		return nil, f
	}
	t, f := op.resolveTarget(p, true)
	if f != nil {
		return nil, f
	}
	defer closeFD(t.dfd)
	if t.st == nil {
		f := osFailure("read", p, unix.ENOENT)
		return nil, &f
	}
	switch uint32(t.st.Mode) & unix.S_IFMT {
	case unix.S_IFREG:
		if f := op.contain.checkID(p, unixID(t.st)); f != nil {
			return nil, f
		}
	case unix.S_IFDIR:
		f := failf(protocol.ErrIsDirectory, "cannot read %q: it is a directory", p)
		return nil, &f
	default:
		f := failf(protocol.ErrInvalid, "cannot read %q: it is a %s, not a regular file", p, typeName(uint32(t.st.Mode)))
		return nil, &f
	}
	// O_NONBLOCK: should a fifo be swapped in after the lstat, opening it
	// does not block; the identity check below then refuses it.
	fd, err := openFD(t.dfd, t.name, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errnoOf(err) == unix.ELOOP {
		err = errMoved // a symlink was swapped in
	}
	if err != nil {
		f := osFailure("read", p, err)
		return nil, &f
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil || got.Dev != t.st.Dev || got.Ino != t.st.Ino {
		closeFD(fd)
		f := osFailure("read", p, errMoved)
		return nil, &f
	}
	return os.NewFile(uintptr(fd), p), nil
}

// typeName names a non-regular file type for messages.
func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "named pipe"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFDIR:
		return "directory"
	}
	return "special file"
}

// readFile answers readTextFile (text) and readBinaryFile.
func (op *fileOp) readFile(p string, text bool) protocol.Outcome {
	f, bad := op.openRegular(p)
	if bad != nil {
		return *bad
	}
	defer f.Close()
	e := op.newChunker(text)
	buf := make([]byte, MaxChunkBytes)
	for {
		if op.ctx.Err() != nil {
			return op.stopped()
		}
		n, err := f.Read(buf)
		if n > 0 {
			if out := e.write(buf[:n]); out != nil {
				return out
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return osFailure("read", p, err)
		}
	}
	if out := e.flush(); out != nil {
		return out
	}
	return protocol.ReadOutcome{}
}

// readLines answers readTextLines. A line is everything up to and including
// "\n"; "\r" is part of the line. offset lines are skipped, then at most
// limit lines are sent (all of them without limit). A last line without a
// trailing newline is a line and is sent as it is, without adding one.
func (op *fileOp) readLines(a protocol.ReadLinesArgs) protocol.Outcome {
	skip, left := int64(0), int64(-1)
	if a.Offset != nil {
		if *a.Offset < 0 {
			return failf(protocol.ErrInvalid, "readTextLines offset must not be negative, got %d", *a.Offset)
		}
		skip = *a.Offset
	}
	if a.Limit != nil {
		if *a.Limit < 0 {
			return failf(protocol.ErrInvalid, "readTextLines limit must not be negative, got %d", *a.Limit)
		}
		left = *a.Limit
	}
	f, bad := op.openRegular(a.Path)
	if bad != nil {
		return *bad
	}
	defer f.Close()
	e := op.newChunker(true)
	buf := make([]byte, MaxChunkBytes)
	for left != 0 {
		if op.ctx.Err() != nil {
			return op.stopped()
		}
		n, err := f.Read(buf)
		b := buf[:n]
		for skip > 0 && len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				b = nil
				break
			}
			b, skip = b[i+1:], skip-1
		}
		if skip == 0 && len(b) > 0 {
			end := len(b)
			if left > 0 {
				// Find the end of the left-th line within b, if it is there.
				for i, seen := 0, int64(0); i < len(b); {
					j := bytes.IndexByte(b[i:], '\n')
					if j < 0 {
						break
					}
					i, seen = i+j+1, seen+1
					if seen == left {
						end = i
						break
					}
				}
				left -= int64(bytes.Count(b[:end], []byte{'\n'}))
			}
			if out := e.write(b[:end]); out != nil {
				return out
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return osFailure("read", a.Path, err)
		}
	}
	if out := e.flush(); out != nil {
		return out
	}
	return protocol.ReadOutcome{}
}

// chunker gathers bytes into data chunks of at most MaxChunkBytes and sends
// full ones; for text it keeps a UTF-8 sequence cut at a chunk's end for
// the next chunk.
type chunker struct {
	op   *fileOp
	text bool
	buf  []byte
}

func (op *fileOp) newChunker(text bool) *chunker {
	return &chunker{op: op, text: text, buf: make([]byte, 0, MaxChunkBytes)}
}

// write adds p, sending every chunk that fills; a non-nil outcome ends the op.
func (e *chunker) write(p []byte) protocol.Outcome {
	for len(p) > 0 {
		n := copy(e.buf[len(e.buf):cap(e.buf)], p)
		e.buf, p = e.buf[:len(e.buf)+n], p[n:]
		if len(e.buf) < cap(e.buf) {
			break
		}
		cut := len(e.buf)
		if e.text {
			cut = utf8Cut(e.buf)
		}
		if out := e.send(e.buf[:cut]); out != nil {
			return out
		}
		e.buf = e.buf[:copy(e.buf, e.buf[cut:])]
	}
	return nil
}

// flush sends what is left.
func (e *chunker) flush() protocol.Outcome {
	if len(e.buf) == 0 {
		return nil
	}
	out := e.send(e.buf)
	e.buf = e.buf[:0]
	return out
}

func (e *chunker) send(p []byte) protocol.Outcome {
	if len(p) == 0 {
		return nil
	}
	e.op.started = true
	if err := e.op.sink.Data(protocol.ChunkData, p); err != nil {
		if e.op.ctx.Err() != nil {
			return e.op.stopped()
		}
		// As Exec does: the stream cannot be delivered, so the op stops.
		return failf(protocol.ErrAborted, "%s %s: stopped because its content could not be delivered: %v", e.op.req.Kind, qpath(protocol.ArgsPath(e.op.req.Args)), err)
	}
	return nil
}

// utf8Cut returns where to end a text chunk: before a trailing UTF-8
// sequence that is incomplete but could still be completed by the next
// bytes, else at len(b). Invalid bytes are never held back.
func utf8Cut(b []byte) int {
	for back := 1; back <= utf8.UTFMax-1 && back <= len(b); back++ {
		c := b[len(b)-back]
		if c < 0x80 {
			return len(b) // ASCII: complete
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-back:]) {
				return len(b) - back
			}
			return len(b)
		}
	}
	return len(b)
}
