package recordconn

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair is a TCP connection over loopback: the gathered end and its peer.
func pair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { peer.Close() })
	return New(c), peer
}

// pattern is n bytes that tell a lost, repeated or reordered byte apart.
func pattern(n int) []byte {
	b := make([]byte, n)
	r := mrand.NewChaCha8([32]byte{1})
	r.Read(b)
	return b
}

// writeInPieces writes b in pieces of random sizes, small and large.
func writeInPieces(w io.Writer, b []byte) error {
	r := mrand.New(mrand.NewPCG(1, 2))
	for len(b) > 0 {
		n := min(len(b), 1+r.IntN(40<<10))
		if r.IntN(4) == 0 {
			n = min(len(b), 1+r.IntN(100))
		}
		if _, err := w.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// readAll reads r to its end in a goroutine of its own.
func readAll(r io.Reader) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	return got
}

// waitIdle waits until no write is under way and no drain runs.
func (c *Conn) waitIdle() (buffered *[]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.busy {
		c.room.Wait()
	}
	return c.buf
}

func TestEveryByteArrivesOnceAndInOrder(t *testing.T) {
	c, peer := pair(t)
	want := pattern(8 << 20)
	got := readAll(peer)
	if err := writeInPieces(c, want); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("the peer read %d bytes, not the %d written, in order", len(b), len(want))
	}
}

func TestAnIdleConnectionHoldsNoBuffer(t *testing.T) {
	c, peer := pair(t)
	defer c.Close()
	want := pattern(2 << 20)
	read := make(chan error, 1)
	go func() {
		b := make([]byte, len(want))
		_, err := io.ReadFull(peer, b)
		if err == nil && !bytes.Equal(b, want) {
			err = errors.New("the bytes differ")
		}
		read <- err
	}()
	if err := writeInPieces(c, want); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if buf := c.waitIdle(); buf != nil {
		t.Fatalf("an idle connection holds a buffer of %d bytes", cap(*buf))
	}
}

// A peer that stops reading pauses the writer: no more than Limit bytes
// wait in the connection, and the writer learns of the peer's end.
func TestAPeerThatDoesNotReadPausesTheWriter(t *testing.T) {
	c, peer := pair(t)
	defer c.Close()
	piece := pattern(16 << 10)
	over := make(chan error, 1)
	go func() {
		for {
			if _, err := c.Write(piece); err != nil {
				over <- err
				return
			}
			c.mu.Lock()
			n := 0
			if c.buf != nil {
				n = len(*c.buf)
			}
			c.mu.Unlock()
			if n > Limit {
				over <- errors.New("more than Limit bytes buffered")
				return
			}
		}
	}()
	// Let the kernel's buffers fill: the writer is then held, and only the
	// peer's end can release it.
	for range 3 {
		select {
		case err := <-over:
			t.Fatalf("the writer stopped before the peer ended: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	peer.(*net.TCPConn).SetLinger(0)
	peer.Close()
	if err := <-over; err == nil || err.Error() == "more than Limit bytes buffered" {
		t.Fatalf("the writer ended with %v; want the peer's reset", err)
	}
}

func TestAFailedWriteIsReportedByTheNextWriteAndByClose(t *testing.T) {
	c, peer := pair(t)
	peer.(*net.TCPConn).SetLinger(0)
	peer.Close()
	piece := pattern(64 << 10)
	var err error
	for i := 0; i < 10000 && err == nil; i++ {
		_, err = c.Write(piece)
	}
	if err == nil {
		t.Fatal("10,000 writes to a reset connection all succeeded")
	}
	if _, again := c.Write(piece); again == nil {
		t.Fatal("the write after a failed one succeeded")
	}
	if cerr := c.Close(); cerr == nil {
		t.Fatal("Close hid the failed write")
	}
}

func TestTLSThroughGatheredConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tln := tls.NewListener(Listener(ln), &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}})
	defer tln.Close()
	want := pattern(16 << 20)
	served := make(chan error, 1)
	go func() {
		c, err := tln.Accept()
		if err != nil {
			served <- err
			return
		}
		if _, ok := c.(*tls.Conn).NetConn().(*Conn); !ok {
			served <- errors.New("the TLS connection is not over a gathered one")
			return
		}
		err = writeInPieces(c, want)
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		served <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes over TLS, not the %d written", len(got), len(want))
	}
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}

// A deadline applies to writes made after it is set: the bytes a Write
// already accepted are written first, as they were for a synchronous
// write that had returned (crypto/tls sets a deadline of now right after
// its closing alert).
func TestADeadlineSetAfterAWriteDoesNotCutTheBytesAccepted(t *testing.T) {
	c, peer := pair(t)
	want := pattern(4 << 20)
	got := readAll(peer)
	if err := writeInPieces(c, want); err != nil {
		t.Fatal(err)
	}
	if err := c.SetWriteDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("late")); err == nil {
		t.Error("a write after a deadline of now succeeded")
	}
	c.Close()
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("the peer read %d bytes, not the %d accepted before the deadline", len(b), len(want))
	}
}
