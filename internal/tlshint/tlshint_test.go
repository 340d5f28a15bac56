package tlshint

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestUntrustedAdvisesOnlyForAnUnknownAuthority(t *testing.T) {
	unknown := x509.UnknownAuthorityError{}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"unknown authority, wrapped", fmt.Errorf("Get: %w", unknown), true},
		{"in a verification error", &tls.CertificateVerificationError{Err: unknown}, true},
		{"a host name that does not match", x509.HostnameError{Host: "x"}, false},
		{"an expired certificate", &tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Reason: x509.Expired}}, false},
		{"connection refused", errors.New("connection refused"), false},
	}
	for _, tc := range cases {
		if got := Untrusted(tc.err); (got != "") != tc.want {
			t.Errorf("%s: %q", tc.name, got)
		}
	}
}

func TestAdviceNamesWhatEachOSReads(t *testing.T) {
	if a := advice("linux"); !strings.Contains(a, "SSL_CERT_FILE") {
		t.Errorf("linux: %q", a)
	}
	if a := advice("darwin"); strings.Contains(a, "SSL_CERT_FILE") || !strings.Contains(a, "keychain") {
		t.Errorf("darwin: %q", a)
	}
}
