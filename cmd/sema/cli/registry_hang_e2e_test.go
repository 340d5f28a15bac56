package cli_test

import (
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

// A registry that stops answering (its host gone silent, its process
// stopped) holds no caller: the lane gives up authenticating the request
// and refuses it, 503 "the device registry is unavailable", so sema run
// ends never started (125, safe to retry), and the lane answers again once
// the registry does.
func TestSilentRegistryRefusesRequests(t *testing.T) {
	postgresSchema(t)
	u, err := url.Parse(os.Getenv(cli.EnvPostgres))
	if err != nil {
		t.Fatal(err)
	}
	px := startSilencer(t, u.Host)
	u.Host = px.ln.Addr().String()
	t.Setenv(cli.EnvPostgres, u.String())
	s := startServer(t, t.TempDir())
	if _, errOut, code := s.sema(t, nil, "devices"); code != 0 {
		t.Fatalf("devices: exit %d: %s", code, errOut)
	}
	px.silence(true)
	p := startProc(t, s.env(t), nil, "run", "--device", "dev_01M96DEFA2PG5AW94XNFDG8JTY", "--", "true")
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		t.Fatal("run still waits for a registry that does not answer")
	}
	if code := p.wait(t); code != cli.ExitNeverStarted || !strings.Contains(p.stderr.String(), "registry is unavailable") {
		t.Fatalf("run with a silent registry: exit %d: %s", code, p.stderr)
	}
	px.silence(false)
	if _, errOut, code := s.sema(t, nil, "devices"); code != 0 {
		t.Fatalf("devices once the registry answers again: exit %d: %s", code, errOut)
	}
}

// silencer pipes TCP connections to a backend and, when silenced, stops
// passing bytes either way without closing anything: a peer that went
// silent, as a stopped process or a host cut off without a reset.
type silencer struct {
	ln     net.Listener
	mu     sync.Mutex
	quiet  bool
	resume *sync.Cond
}

func startSilencer(t *testing.T, backend string) *silencer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silencer{ln: ln}
	s.resume = sync.NewCond(&s.mu)
	var conns sync.Map
	t.Cleanup(func() {
		ln.Close()
		s.silence(false)
		conns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			conns.Store(c, nil)
			conns.Store(up, nil)
			go s.pipe(up, c)
			go s.pipe(c, up)
		}
	}()
	return s
}

func (s *silencer) silence(on bool) {
	s.mu.Lock()
	s.quiet = on
	s.mu.Unlock()
	s.resume.Broadcast()
}

func (s *silencer) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		s.mu.Lock()
		for s.quiet {
			s.resume.Wait()
		}
		s.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			return
		}
	}
}
