// Package tlshint says how to trust a lane's certificate when the TLS
// handshake failed because this machine does not: the common case of a
// lane served with a self-signed certificate (sema server --tls-cert).
package tlshint

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"runtime"
)

// Untrusted returns the advice for err when it is a certificate signed by
// an authority this machine does not trust, and "" otherwise.
func Untrusted(err error) string {
	var unknown x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	if !errors.As(err, &unknown) && !(errors.As(err, &verify) && errors.As(verify.Err, &unknown)) {
		return ""
	}
	return advice(runtime.GOOS)
}

// advice is the way to trust a certificate on goos: Go reads
// $SSL_CERT_FILE on Linux, and only the system's trust settings on macOS.
func advice(goos string) string {
	if goos == "darwin" {
		return "if the lane's certificate is self-signed or from a private CA, trust it in the macOS keychain (security add-trusted-cert)"
	}
	return "if the lane's certificate is self-signed or from a private CA, point SSL_CERT_FILE at it (SSL_CERT_FILE=cert.pem sema …)"
}
