// Package ids mints the lane's identifiers: a prefix and a 26-character
// upper-case ULID whose 80 random bits come from crypto/rand, so an id is
// unguessable (§2.3: instructionId is "unguessable"). The library's default
// entropy is math/rand, which is not; it is never used here.
package ids

import (
	"crypto/rand"
	"time"

	"github.com/oklog/ulid/v2"
)

// Prefixes of the lane's identifiers.
const (
	Device      = "dev_"
	Instruction = "ins_"
	Identity    = "idn_"
	APIKey      = "key_"
	Replica     = "rep_" // one lane server process
	Session     = "ses_" // a root session an MCP connection opens (§9)
)

// New returns prefix followed by a fresh ULID.
func New(prefix string) string {
	// crypto/rand.Reader never fails on supported platforms (Go 1.24+).
	id := ulid.MustNew(ulid.Timestamp(time.Now()), rand.Reader)
	return prefix + id.String()
}

// ULID returns a fresh ULID string, as used for an executor's epoch.
func ULID() string { return New("") }
