package device

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/sema-agent/sema/internal/tlshint"
	"github.com/sema-agent/sema/internal/words"
)

// NetClass is what kind of network error kept enrollment from an answer.
type NetClass int

const (
	NetOther   NetClass = iota // a reset, an EOF, anything else without an answer
	NetRefused                 // connection refused: nothing listens there
	NetDNS                     // the host name does not resolve
	NetTLS                     // the TLS handshake failed (not TLS, an untrusted certificate)
	NetTimeout                 // no answer in time
)

func (c NetClass) String() string {
	switch c {
	case NetRefused:
		return "connection refused"
	case NetDNS:
		return "dns"
	case NetTLS:
		return "tls"
	case NetTimeout:
		return "timeout"
	}
	return "other"
}

// UnreachableError ends an enrollment that got no answer from the lane for
// MaxUnreachableRetry (or the configured shorter time).
type UnreachableError struct {
	URL      string // the lane's base URL
	Class    NetClass
	Reason   string // Class said for a person
	Attempts int
	For      time.Duration // from the first failed attempt to the last
	Err      error         // the last attempt's error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the lane at %s: %s (%s over %s)", e.URL, e.Reason, words.Count(e.Attempts, "attempt", "attempts"), e.For.Round(time.Second))
}

func (e *UnreachableError) Unwrap() error { return e.Err }

func newUnreachableError(base string, err error, timeout time.Duration, attempts int, down time.Duration) *UnreachableError {
	class, reason := classify(err, timeout)
	return &UnreachableError{URL: base, Class: class, Reason: reason, Attempts: attempts, For: down, Err: err}
}

// classify tells the network errors apart, and says each for a person.
func classify(err error, timeout time.Duration) (NetClass, string) {
	var (
		dns    *net.DNSError
		record tls.RecordHeaderError
		verify *tls.CertificateVerificationError
		alert  tls.AlertError
		unk    x509.UnknownAuthorityError
		host   x509.HostnameError
		ne     net.Error
	)
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return NetDNS, fmt.Sprintf("the host name %s does not resolve", dns.Name)
	case errors.As(err, &dns):
		return NetDNS, fmt.Sprintf("looking up %s failed: %s", dns.Name, dns.Err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return NetRefused, "connection refused (nothing listens there)"
	case errors.As(err, &record), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		// net/http turns the RecordHeaderError of an HTTP answer into
		// an untyped error.
		return NetTLS, "the TLS handshake failed: the server does not speak TLS (if the lane serves plain HTTP, use http://)"
	case errors.As(err, &verify):
		return NetTLS, "the TLS handshake failed: the server's certificate is not trusted: " + verify.Err.Error() + advice(err)
	case errors.As(err, &unk), errors.As(err, &host):
		return NetTLS, "the TLS handshake failed: the server's certificate is not trusted: " + innermost(err).Error() + advice(err)
	case errors.As(err, &alert):
		return NetTLS, "the TLS handshake failed: " + alert.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return NetTimeout, fmt.Sprintf("no answer within %s", timeout)
	}
	return NetOther, innermost(err).Error()
}

// advice is how to trust the lane's certificate, when that is what err
// needs ("" otherwise), as a clause of a reason.
func advice(err error) string {
	if a := tlshint.Untrusted(err); a != "" {
		return "; " + a
	}
	return ""
}

// innermost drops the url.Error wrapper: its "Post \"URL\":" repeats what
// the message says already.
func innermost(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
