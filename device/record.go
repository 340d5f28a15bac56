package device

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sema-agent/sema/internal/atomicfile"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Record is the enrolled identity, stored as <state-dir>/device.json beside
// the key. It holds no secret: not the key, not the enrollment token.
type Record struct {
	DeviceID      string    `json:"deviceId"`
	Server        string    `json:"server"` // the lane's base URL, http(s)://host[:port][/prefix]
	WorkspaceRoot string    `json:"workspaceRoot"`
	DisplayName   string    `json:"displayName,omitempty"`
	EnrolledAt    time.Time `json:"enrolledAt"`
	// RevokedAt is set when the lane answered revoked; the key is then gone
	// and the state dir may be enrolled again.
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// ErrNotEnrolled means the state dir holds no device record.
var ErrNotEnrolled = errors.New("this state dir holds no enrolled device")

// LoadRecord reads <dir>/device.json, wrapping ErrNotEnrolled when absent.
func LoadRecord(dir string) (Record, error) {
	var r Record
	path := filepath.Join(dir, RecordFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, fmt.Errorf("%w (%s)", ErrNotEnrolled, dir)
	}
	if err != nil {
		return r, fmt.Errorf("device record: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("device record %s: %w", path, err)
	}
	if r.DeviceID == "" || r.Server == "" || r.WorkspaceRoot == "" {
		return r, fmt.Errorf("device record %s is incomplete (deviceId, server and workspaceRoot are required)", path)
	}
	return r, nil
}

// WriteRecord stores r as <dir>/device.json, mode 0600, atomically.
func WriteRecord(dir string, r Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("device record: %w", err)
	}
	return atomicfile.Write(filepath.Join(dir, RecordFile), append(b, '\n'), 0o600)
}

// MarkRevoked reacts to a revocation (§1.4, R13): it deletes the key
// material and records when the lane said so. The device id is dead for
// good; enrolling again yields a new one.
func MarkRevoked(dir string, now time.Time) error {
	keyErr := RemoveKey(dir)
	r, err := LoadRecord(dir)
	if err == nil {
		r.RevokedAt = &now
		err = WriteRecord(dir, r)
	}
	return errors.Join(keyErr, err)
}
