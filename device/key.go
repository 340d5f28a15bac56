package device

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/sema-agent/sema/internal/atomicfile"
	"io/fs"
	"os"
	"path/filepath"
)

// KeyPermissionError refuses a private key that group or others can read
// (§6.2: "a file readable only by its owner").
type KeyPermissionError struct {
	Path string
	Mode fs.FileMode
}

func (e *KeyPermissionError) Error() string {
	return fmt.Sprintf("refusing to start: the device key %s has mode %04o, so group or others can read it; "+
		"it must be readable by its owner only (run: chmod 600 %s), and if anyone else may have read it, "+
		"revoke this device and enroll again", e.Path, e.Mode.Perm(), e.Path)
}

// ErrNoKey means the state dir holds no device key: the device is not
// enrolled there, or its key was deleted after a revocation.
var ErrNoKey = errors.New("no device key")

// GenerateKey creates a fresh Ed25519 key pair on this machine.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate device key: %w", err)
	}
	return priv, nil
}

// WriteKey stores priv as <dir>/device.key, PKCS#8 PEM, mode 0600, atomically.
func WriteKey(dir string, priv ed25519.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("encode device key: %w", err)
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return atomicfile.Write(filepath.Join(dir, KeyFile), b, 0o600)
}

// LoadKey reads <dir>/device.key. It refuses (KeyPermissionError) a key whose
// mode lets group or others read or write it, before reading a byte, and
// wraps ErrNoKey when there is none.
func LoadKey(dir string) (ed25519.PrivateKey, error) {
	path := filepath.Join(dir, KeyFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s", ErrNoKey, path)
	}
	if err != nil {
		return nil, fmt.Errorf("device key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("device key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("device key %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, &KeyPermissionError{Path: path, Mode: fi.Mode()}
	}
	b := make([]byte, 4096)
	n, err := f.Read(b)
	if err != nil {
		return nil, fmt.Errorf("device key: %w", err)
	}
	block, _ := pem.Decode(b[:n])
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("device key %s is not a PEM private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("device key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("device key %s is a %T, not Ed25519", path, k)
	}
	return priv, nil
}

// RemoveKey deletes the key material (after a revocation, R13). A missing
// key is not an error.
func RemoveKey(dir string) error {
	err := os.Remove(filepath.Join(dir, KeyFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete device key: %w", err)
	}
	return nil
}
