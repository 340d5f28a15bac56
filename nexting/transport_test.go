package nexting

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

// A transport gives two connected ends of a real byte stream. The same
// tests run over each (yamux style).
type transport struct {
	name string
	pair func(t *testing.T) (a, b net.Conn)
}

var transports = []transport{
	{"pipe", pipePair},
	{"unix", unixPair},
	{"tcp", tcpPair},
}

func pipePair(t *testing.T) (net.Conn, net.Conn) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// unixPair is a socketpair(2) of unix stream sockets.
func unixPair(t *testing.T) (net.Conn, net.Conn) {
	// SOCK_CLOEXEC is Linux's; CloseOnExec after the call is portable
	// (darwin), and a test forks nothing in between.
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept()
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// lines reads LF-terminated lines from a raw end, for tests that play one
// side by hand.
type lines struct {
	t  *testing.T
	br *bufio.Reader
}

func newLines(t *testing.T, r io.Reader) *lines { return &lines{t: t, br: bufio.NewReader(r)} }

func (l *lines) next() string {
	l.t.Helper()
	s, err := l.br.ReadString('\n')
	if err != nil {
		l.t.Fatalf("read: %v (after %q)", err, s)
	}
	return strings.TrimSuffix(s, "\n")
}

func (l *lines) expect(want string) {
	l.t.Helper()
	if got := l.next(); got != want {
		l.t.Fatalf("read %s\nwant %s", got, want)
	}
}

func write(t *testing.T, w io.Writer, s string) {
	t.Helper()
	if _, err := io.WriteString(w, s); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// writeAsync writes s from its own goroutine (a net.Pipe write blocks
// until the other end has read everything); wait for the result.
func writeAsync(w io.Writer, s string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := io.WriteString(w, s)
		done <- err
	}()
	return done
}

func TestStreamFramesBothWays(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			a, b := tr.pair(t)
			st := NewStream(a, StreamConfig{ReadSize: 7}) // small reads: frames span many
			defer st.Close()
			peer := newLines(t, b)

			for _, f := range []string{fPresent, fAnswer, fStatus} {
				if err := st.Send([]byte(f + "\n")); err != nil {
					t.Fatal(err)
				}
				peer.expect(f)
			}
			// Two frames and half a third in one write, the rest later.
			w := writeAsync(b, fAnswer+"\n"+fStatus+"\n"+fPresent[:10])
			for _, want := range []string{fAnswer, fStatus} {
				if r := <-st.Results(); r.Err != nil || string(r.Frame) != want {
					t.Fatalf("got %+v, want %s", r, want)
				}
			}
			if err := <-w; err != nil {
				t.Fatal(err)
			}
			w = writeAsync(b, fPresent[10:]+"\n")
			if r := <-st.Results(); r.Err != nil || string(r.Frame) != fPresent {
				t.Fatalf("got %+v, want %s", r, fPresent)
			}
			if err := <-w; err != nil {
				t.Fatal(err)
			}
			// A framing error is a Result, and the stream goes on.
			w = writeAsync(b, strings.Repeat("x", MaxFrameBytes+10)+"\n"+fAnswer+"\n")
			if r := <-st.Results(); r.Err == nil || r.Err.Code != CodeMessageTooLarge {
				t.Fatalf("oversize: %+v", r)
			}
			if r := <-st.Results(); string(r.Frame) != fAnswer {
				t.Fatalf("after oversize: %+v", r)
			}
			if err := <-w; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The peer closing mid-frame ends Results without the partial frame; Err
// is io.EOF; Send then fails.
func TestStreamPeerCloseMidFrame(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			a, b := tr.pair(t)
			st := NewStream(a, StreamConfig{})
			defer st.Close()
			w := writeAsync(b, fAnswer+"\n"+fAnswer[:20])
			if r := <-st.Results(); string(r.Frame) != fAnswer {
				t.Fatalf("got %+v", r)
			}
			if err := <-w; err != nil {
				t.Fatal(err)
			}
			b.Close()
			if r, ok := <-st.Results(); ok {
				t.Fatalf("partial frame delivered: %+v", r)
			}
			if err := st.Err(); !errors.Is(err, io.EOF) {
				t.Fatalf("err %v", err)
			}
			<-st.Done()
			if err := st.Send([]byte(fAnswer + "\n")); !errors.Is(err, ErrClosed) {
				t.Fatalf("send after end: %v", err)
			}
		})
	}
}

func TestStreamBufferedBytesFirst(t *testing.T) {
	a, b := pipePair(t)
	st := NewStream(a, StreamConfig{Buffered: []byte(fAnswer + "\n" + fStatus[:5])})
	defer st.Close()
	w := writeAsync(b, fStatus[5:]+"\n")
	for _, want := range []string{fAnswer, fStatus} {
		if r := <-st.Results(); string(r.Frame) != want {
			t.Fatalf("got %+v, want %s", r, want)
		}
	}
	if err := <-w; err != nil {
		t.Fatal(err)
	}
}

func TestStreamSendRefusals(t *testing.T) {
	a, _ := pipePair(t) // nobody reads b: writes block, the queue fills
	st := NewStream(a, StreamConfig{MaxQueuedBytes: 3 * len(fAnswer)})
	defer st.Close()
	for _, bad := range []string{"", "\n", fAnswer, fAnswer + "\n" + fAnswer + "\n", "a\nb\n"} {
		if err := st.Send([]byte(bad)); err == nil {
			t.Errorf("sent %q", bad)
		}
	}
	var err error
	for range 10 {
		if err = st.Send([]byte(fAnswer + "\n")); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("queue never full: %v", err)
	}
	// Close unblocks the writer stuck in Write and waits for it.
	st.Close()
	if !errors.Is(st.Err(), ErrClosed) {
		t.Fatalf("err %v", st.Err())
	}
	st.Close() // idempotent
}

func TestReadInfoLine(t *testing.T) {
	info := DefaultSimDeviceInfo
	line, rest, err := readInfoLine(strings.NewReader(info + "\n" + fAnswer + "\n"))
	if err != nil || string(line) != info || string(rest) != fAnswer+"\n" {
		t.Fatalf("%q %q %v", line, rest, err)
	}
	if _, _, err := readInfoLine(strings.NewReader(info)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("no LF: %v", err)
	}
	long := strings.Repeat(" ", MaxDeviceInfoBytes) + "{}"
	if _, _, err := readInfoLine(strings.NewReader(long + "\n")); CodeOf(err) != CodeMessageTooLarge {
		t.Fatalf("long: %v", err)
	}
	if _, _, err := readInfoLine(strings.NewReader(strings.Repeat("x", 10000))); CodeOf(err) != CodeMessageTooLarge {
		t.Fatalf("endless: %v", err)
	}
	exact := strings.Repeat(" ", MaxDeviceInfoBytes-2) + "{}"
	if line, _, err := readInfoLine(strings.NewReader(exact + "\n")); err != nil || len(line) != MaxDeviceInfoBytes {
		t.Fatalf("4096 bytes: %d %v", len(line), err)
	}
}
