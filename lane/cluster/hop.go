// Package cluster is what lane replicas on one registry need of each other
// (docs/operations.md): the authenticated hop of a request one replica
// forwards to another (hop.go), the forwarding itself (forward.go), and the
// directory of the replicas and the URLs they are reached at (directory.go).
//
// A forwarded request keeps the caller's own Authorization: the replica
// that receives it authenticates the caller again, so the cluster secret
// alone grants nothing of a caller's. The hop's signature proves only that
// a replica sent it: the receiver then never forwards it again, and takes
// the caller's address from it.
package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The hop's headers. HeaderFrom names the sending replica; the signature
// covers it, the time, the caller's address, the method and the request
// URI.
const (
	HeaderFrom      = "Sema-Replica"
	HeaderAt        = "Sema-Replica-At"
	HeaderFor       = "Sema-Replica-For"
	HeaderSignature = "Sema-Replica-Signature"
)

// HopWindow is how far a hop's time may be from the receiver's clock.
const HopWindow = time.Minute

// ErrNotAHop is Verify's answer for a request no replica forwarded.
var ErrNotAHop = errors.New("cluster: not a forwarded request")

// Hop signs and verifies the requests replicas send each other. It is
// pure: the secret, the sender's id and a clock.
type Hop struct {
	secret []byte
	self   string
	now    func() time.Time
}

// NewHop makes the Hop of replica self on a registry whose cluster secret
// is secret.
func NewHop(secret, self string, now func() time.Time) (*Hop, error) {
	if len(secret) < 32 {
		return nil, errors.New("cluster: the cluster secret is shorter than 32 bytes")
	}
	if self == "" || strings.ContainsAny(self, "\n ") {
		return nil, fmt.Errorf("cluster: a replica id %q cannot sign a hop", self)
	}
	return &Hop{secret: []byte(secret), self: self, now: now}, nil
}

// Sign marks r as forwarded by this replica for a caller at clientAddr.
func (h *Hop) Sign(r *http.Request, clientAddr string) {
	at := strconv.FormatInt(h.now().UnixMilli(), 10)
	r.Header.Set(HeaderFrom, h.self)
	r.Header.Set(HeaderAt, at)
	r.Header.Set(HeaderFor, clientAddr)
	r.Header.Set(HeaderSignature, h.mac(h.self, at, clientAddr, r.Method, r.URL.RequestURI()))
}

// Forwarded is what a verified hop tells: the replica that sent it and the
// address of the caller it came from.
type Forwarded struct {
	From       string
	ClientAddr string
}

// Verify checks a request's hop: ErrNotAHop when it carries none, another
// error when it carries one that is not valid (forged, altered, or outside
// HopWindow), which the receiver refuses.
func (h *Hop) Verify(r *http.Request) (Forwarded, error) {
	from, at, addr, sig := r.Header.Get(HeaderFrom), r.Header.Get(HeaderAt), r.Header.Get(HeaderFor), r.Header.Get(HeaderSignature)
	if from == "" && at == "" && sig == "" {
		return Forwarded{}, ErrNotAHop
	}
	ms, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return Forwarded{}, errors.New("cluster: the hop's time is not a number of milliseconds")
	}
	if skew := h.now().Sub(time.UnixMilli(ms)); skew > HopWindow || skew < -HopWindow {
		return Forwarded{}, fmt.Errorf("cluster: the hop's time is %v from this replica's clock (the bound is %v)", skew.Round(time.Second), HopWindow)
	}
	want := h.mac(from, at, addr, r.Method, r.URL.RequestURI())
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return Forwarded{}, errors.New("cluster: the hop's signature is not valid")
	}
	return Forwarded{From: from, ClientAddr: addr}, nil
}

// IsHop reports whether r carries a hop's headers, valid or not.
func IsHop(r *http.Request) bool {
	return r.Header.Get(HeaderFrom) != "" || r.Header.Get(HeaderSignature) != ""
}

func (h *Hop) mac(from, at, addr, method, uri string) string {
	m := hmac.New(sha256.New, h.secret)
	for _, part := range []string{"sema-replica-hop-v1", from, at, addr, method, uri} {
		m.Write([]byte(part))
		m.Write([]byte{'\n'})
	}
	return hex.EncodeToString(m.Sum(nil))
}
