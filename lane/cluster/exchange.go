package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// A forward whose body the forwarding replica holds whole (an exec's few
// hundred bytes) is one exchange on a kept-alive connection to the holder,
// made by the handler's own goroutine: the request written, the answer read
// and copied back as it comes. net/http's Transport hands each request to a
// writer goroutine and each answer back from a reader goroutine; with the
// caller, two replicas and the device on one loaded machine those wake-ups
// were most of what the hop added to an exec true. A streamed body still
// goes through httputil.ReverseProxy, which sends it while the answer
// comes back (forward.go).

// Bounds of the kept connections.
const (
	maxIdlePerHost = 64
	// idleTimeout is under the lane's default --http-idle-timeout (120s),
	// so the holder rarely closes a connection this side still keeps.
	idleTimeout = 90 * time.Second
	dialTimeout = 5 * time.Second
)

// hopByHop are the headers of one connection, never passed on (RFC 9110
// §7.6.1), with Expect: the forwarding replica has read the body.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Expect"}

// keptConn is one connection to a replica, with its buffers.
type keptConn struct {
	net.Conn
	tcp       net.Conn // the TCP connection beneath (TLS or not), for alive
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

// connPool keeps idle connections to the other replicas, by scheme and
// host.
type connPool struct {
	dialer net.Dialer

	mu   sync.Mutex
	idle map[string][]*keptConn
}

func newConnPool() *connPool {
	return &connPool{dialer: net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}, idle: map[string][]*keptConn{}}
}

// get returns a live idle connection to base, or dials one. A kept
// connection the holder has closed meanwhile is dropped unused: the
// request is never written where the holder cannot read it. A close that
// crosses the peek (the holder shuts an idle connection in the same
// instant) fails the exchange as may-have-run, the honest answer when it
// cannot be told apart; the holder keeps idle connections longer
// (--http-idle-timeout, 120 s) than this side does (idleTimeout).
func (p *connPool) get(ctx context.Context, base *url.URL) (*keptConn, error) {
	key := base.Scheme + "://" + base.Host
	for {
		p.mu.Lock()
		list := p.idle[key]
		if len(list) == 0 {
			p.mu.Unlock()
			break
		}
		c := list[len(list)-1]
		p.idle[key] = list[:len(list)-1]
		p.mu.Unlock()
		if time.Since(c.idleSince) < idleTimeout && c.br.Buffered() == 0 && alive(c.tcp) {
			return c, nil
		}
		c.Close()
	}
	return p.dial(ctx, base)
}

func (p *connPool) dial(ctx context.Context, base *url.URL) (*keptConn, error) {
	addr := base.Host
	if base.Port() == "" {
		port := "80"
		if base.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(base.Hostname(), port)
	}
	tcp, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &keptConn{Conn: tcp, tcp: tcp}
	if base.Scheme == "https" {
		// The system's roots, as the Transport of streamed forwards uses.
		tc := tls.Client(tcp, &tls.Config{ServerName: base.Hostname(), NextProtos: []string{"http/1.1"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			tcp.Close()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: tcp.RemoteAddr(), Err: err}
		}
		c.Conn = tc
	}
	c.br, c.bw = bufio.NewReaderSize(c.Conn, copyBuffer), bufio.NewWriterSize(c.Conn, 4<<10)
	return c, nil
}

// put keeps c for the next exchange with base, or closes it at the bound.
func (p *connPool) put(base *url.URL, c *keptConn) {
	key := base.Scheme + "://" + base.Host
	c.idleSince = time.Now()
	p.mu.Lock()
	if len(p.idle[key]) < maxIdlePerHost {
		p.idle[key] = append(p.idle[key], c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// closeIdle closes every kept connection.
func (p *connPool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = map[string][]*keptConn{}
	p.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.Close()
		}
	}
}

// moreArrived is how many bytes of the answer, read from the holder but
// not yet taken, mean that more of it is there to copy at once. Fewer
// could be only a chunk's CRLF or part of the next chunk's header, on
// which the next read would wait, with what was copied unflushed.
const moreArrived = 32

// exchange forwards r, whose body is body, to the holder at base over a
// kept connection; see Forward for what it returns.
func (f *Forwarder) exchange(w http.ResponseWriter, r *http.Request, base *url.URL, clientAddr string, body []byte) Outcome {
	ctx := r.Context()
	out, err := http.NewRequestWithContext(ctx, r.Method, base.Scheme+"://"+base.Host+joinPath(base.Path, r.URL.EscapedPath()), bytes.NewReader(body))
	if err != nil {
		f.Unknown(w, r, err) // cannot happen: base and the path were parsed
		return Answered
	}
	out.URL.RawQuery = r.URL.RawQuery
	out.Header = r.Header.Clone()
	for _, h := range hopByHop {
		out.Header.Del(h)
	}
	out.Host = base.Host
	f.hop.Sign(out, clientAddr, body)

	c, err := f.conns.get(ctx, base)
	if err != nil {
		return Unreached
	}
	// A caller hanging up closes the connection: the holder sees its
	// request end and cancels the instruction, as for its own caller.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if err := out.Write(c.bw); err != nil {
		c.Close()
		f.Unknown(w, r, err)
		return Answered
	}
	if err := c.bw.Flush(); err != nil {
		c.Close()
		f.Unknown(w, r, err)
		return Answered
	}
	resp, err := http.ReadResponse(c.br, out)
	if err != nil {
		c.Close()
		f.Unknown(w, r, err)
		return Answered
	}
	if resp.StatusCode == http.StatusMisdirectedRequest && resp.Header.Get(HeaderMisdirected) != "" {
		f.finish(base, c, resp, stop)
		return Misdirected
	}
	f.answering()
	for _, h := range hopByHop {
		resp.Header.Del(h)
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := buffers.Get()
	defer buffers.Put(buf)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				c.Close() // the caller is gone: so is the holder's request
				return Answered
			}
			// Flushed unless more of the answer has arrived already: every
			// line the holder sent is passed on at once, and a fast stream
			// goes out in fewer writes (the forwarding replica's CPU per
			// GiB streamed: 1.0 s flushing each read, 0.8 s so).
			if c.br.Buffered() <= moreArrived {
				rc.Flush()
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			c.Close()
			// The holder failed mid-answer: the caller's stream must not
			// end as if it were complete (as httputil.ReverseProxy does).
			panic(http.ErrAbortHandler)
		}
	}
	f.finish(base, c, resp, stop)
	return Answered
}

// finish ends an exchange whose answer was read: the connection is kept
// for the next one unless the holder or the caller ended it.
func (f *Forwarder) finish(base *url.URL, c *keptConn, resp *http.Response, stop func() bool) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, copyBuffer))
	resp.Body.Close()
	if !stop() || resp.Close {
		c.Close()
		return
	}
	f.conns.put(base, c)
}
