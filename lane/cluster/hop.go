// Package cluster is what lane replicas on one registry need of each other
// (docs/operations.md): the authenticated hop of a request one replica
// forwards to another (hop.go), the forwarding itself (forward.go), and the
// directory of the replicas and the URLs they are reached at (directory.go).
//
// A forwarded request keeps the caller's own Authorization: the replica
// that receives it authenticates the caller again, so the cluster secret
// alone grants nothing of a caller's. The hop's signature proves that a
// replica sent this very request — its method and URI, the caller's
// credential, its body when held whole, the caller's address — once: a
// nonce the receiver remembers for the hop's window refuses a replay. The
// receiver then never forwards it again, and takes the caller's address
// from it. A body sent as it arrives (one over the forwarder's replay
// limit, a streamed write) is not in the signature: a streamed write's
// content SHA-256 is in the signed URI and the device refuses content that
// does not match it (§3.4); for the rest the hop's connection must be TLS
// (an https advertise URL, docs/operations.md).
package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The hop's headers. HeaderFrom names the sending replica; the signature
// covers it, the time, the nonce, the caller's address, the method, the
// request URI, the caller's Authorization and HeaderBody: the body's
// SHA-256 in hex, or "stream" for a body sent as it arrives.
const (
	HeaderFrom      = "Sema-Replica"
	HeaderAt        = "Sema-Replica-At"
	HeaderNonce     = "Sema-Replica-Nonce"
	HeaderFor       = "Sema-Replica-For"
	HeaderBody      = "Sema-Replica-Body"
	HeaderSignature = "Sema-Replica-Signature"
)

// bodyStreamed is HeaderBody for a body the signature does not cover.
const bodyStreamed = "stream"

// HopBodyLimit is the largest body a hop's signature covers: a receiver
// reads it whole to check it.
const HopBodyLimit = 1 << 20

// HopWindow is how far a hop's time may be from the receiver's clock.
const HopWindow = time.Minute

// ErrNotAHop is Verify's answer for a request no replica forwarded.
var ErrNotAHop = errors.New("cluster: not a forwarded request")

// Hop signs and verifies the requests replicas send each other. It is
// pure: the secret, the sender's id and a clock.
type Hop struct {
	self string
	now  func() time.Time

	mu     sync.Mutex
	sign   []byte               // the secret hops are signed with
	verify [][]byte             // the secrets a hop may be signed with
	seen   map[string]time.Time // nonces verified, until they leave the window
	next   time.Time            // when seen is pruned next
}

// Keys are the cluster secrets a Hop uses: Sign to sign, and any of
// Verify (which holds Sign) to verify. While the cluster moves to a new
// secret both are verified.
type Keys struct {
	Sign   string
	Verify []string
}

// NewHop makes the Hop of replica self on a registry whose cluster secret
// is secret.
func NewHop(secret, self string, now func() time.Time) (*Hop, error) {
	if self == "" || strings.ContainsAny(self, "\n ") {
		return nil, fmt.Errorf("cluster: a replica id %q cannot sign a hop", self)
	}
	h := &Hop{self: self, now: now, seen: map[string]time.Time{}}
	return h, h.SetKeys(Keys{Sign: secret, Verify: []string{secret}})
}

// SetKeys makes k the secrets the Hop signs and verifies with.
func (h *Hop) SetKeys(k Keys) error {
	if !slices.Contains(k.Verify, k.Sign) {
		return errors.New("cluster: the secret hops are signed with must verify them too")
	}
	verify := make([][]byte, len(k.Verify))
	for i, secret := range k.Verify {
		if len(secret) < 32 {
			return errors.New("cluster: the cluster secret is shorter than 32 bytes")
		}
		verify[i] = []byte(secret)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sign, h.verify = []byte(k.Sign), verify
	return nil
}

// keys returns the secrets to sign and to verify with.
func (h *Hop) keys() (sign []byte, verify [][]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sign, h.verify
}

// Sign marks r as forwarded by this replica for a caller at clientAddr.
// body is r's body when it is held whole (at most HopBodyLimit; empty for
// none), which the signature then covers; nil for a body sent as it
// arrives.
func (h *Hop) Sign(r *http.Request, clientAddr string, body []byte) {
	at := strconv.FormatInt(h.now().UnixMilli(), 10)
	var n [16]byte
	rand.Read(n[:])
	nonce := hex.EncodeToString(n[:])
	mark := bodyStreamed
	if body != nil {
		sum := sha256.Sum256(body)
		mark = hex.EncodeToString(sum[:])
	}
	r.Header.Set(HeaderFrom, h.self)
	r.Header.Set(HeaderAt, at)
	r.Header.Set(HeaderNonce, nonce)
	r.Header.Set(HeaderFor, clientAddr)
	r.Header.Set(HeaderBody, mark)
	sign, _ := h.keys()
	r.Header.Set(HeaderSignature, mac(sign, h.self, at, nonce, clientAddr, r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), mark))
}

// Forwarded is what a verified hop tells: the replica that sent it and the
// address of the caller it came from.
type Forwarded struct {
	From       string
	ClientAddr string
}

// Verify checks a request's hop: ErrNotAHop when it carries none, another
// error when it carries one that is not valid (forged, altered, replayed,
// a body that is not the one signed, or outside HopWindow), which the
// receiver refuses. A signed body is read whole to be checked, and r.Body
// is then a reader of it.
func (h *Hop) Verify(r *http.Request) (Forwarded, error) {
	from, at, nonce, addr := r.Header.Get(HeaderFrom), r.Header.Get(HeaderAt), r.Header.Get(HeaderNonce), r.Header.Get(HeaderFor)
	mark, sig := r.Header.Get(HeaderBody), r.Header.Get(HeaderSignature)
	if from == "" && at == "" && sig == "" {
		return Forwarded{}, ErrNotAHop
	}
	ms, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return Forwarded{}, errors.New("cluster: the hop's time is not a number of milliseconds")
	}
	now := h.now()
	if skew := now.Sub(time.UnixMilli(ms)); skew > HopWindow || skew < -HopWindow {
		return Forwarded{}, fmt.Errorf("cluster: the hop's time is %v from this replica's clock (the bound is %v)", skew.Round(time.Second), HopWindow)
	}
	_, secrets := h.keys()
	valid := false
	for _, secret := range secrets {
		want := mac(secret, from, at, nonce, addr, r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), mark)
		valid = valid || hmac.Equal([]byte(sig), []byte(want))
	}
	if len(nonce) != 32 || !valid {
		return Forwarded{}, errors.New("cluster: the hop's signature is not valid")
	}
	if mark != bodyStreamed {
		if err := checkBody(r, mark); err != nil {
			return Forwarded{}, err
		}
	}
	if !h.firstUse(nonce, now) {
		return Forwarded{}, errors.New("cluster: the hop was seen before (a replay)")
	}
	return Forwarded{From: from, ClientAddr: addr}, nil
}

// checkBody reads r's body whole and checks its SHA-256 against mark.
func checkBody(r *http.Request, mark string) error {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, HopBodyLimit+1))
		if err != nil {
			return fmt.Errorf("cluster: the hop's body could not be read: %w", err)
		}
		body = b
	}
	sum := sha256.Sum256(body)
	if len(body) > HopBodyLimit || !hmac.Equal([]byte(hex.EncodeToString(sum[:])), []byte(mark)) {
		return errors.New("cluster: the hop's body is not the one signed")
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// firstUse records nonce, and reports whether it had not been seen within
// the hop's window. Nonces are forgotten once their hop could no longer
// verify (twice the window: a hop's time may be a window ahead).
func (h *Hop) firstUse(nonce string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.After(h.next) {
		for n, until := range h.seen {
			if now.After(until) {
				delete(h.seen, n)
			}
		}
		h.next = now.Add(HopWindow)
	}
	if _, seen := h.seen[nonce]; seen {
		return false
	}
	h.seen[nonce] = now.Add(2 * HopWindow)
	return true
}

// IsHop reports whether r carries a hop's headers, valid or not.
func IsHop(r *http.Request) bool {
	return r.Header.Get(HeaderFrom) != "" || r.Header.Get(HeaderSignature) != ""
}

func mac(secret []byte, from, at, nonce, addr, method, uri, authorization, body string) string {
	m := hmac.New(sha256.New, secret)
	authz := sha256.Sum256([]byte(authorization))
	for _, part := range []string{"sema-replica-hop-v2", from, at, nonce, addr, method, uri, hex.EncodeToString(authz[:]), body} {
		m.Write([]byte(part))
		m.Write([]byte{'\n'})
	}
	return hex.EncodeToString(m.Sum(nil))
}
