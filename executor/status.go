package executor

import (
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/sema-agent/sema/executor/sandbox"
	"github.com/sema-agent/sema/internal/atomicfile"
)

// Status is what the status file says, for a future `sema device status`:
// the executor never opens a socket to answer questions (§6.1), it writes
// this file (atomically, mode 0600) when it connects, disconnects and on
// every heartbeat.
type Status struct {
	PID       int       `json:"pid"`
	DeviceID  string    `json:"deviceId"`
	Server    string    `json:"server"`
	Epoch     string    `json:"epoch"`
	Connected bool      `json:"connected"`
	Gen       string    `json:"gen,omitempty"`
	Inflight  []string  `json:"inflight"`
	Since     time.Time `json:"since"` // when the process started
	UpdatedAt time.Time `json:"updatedAt"`
	LastError string    `json:"lastError,omitempty"`
	Stopped   bool      `json:"stopped"` // the process has ended
	// Stopping: the goodbye is on the wire and in-flight work is being
	// finished within the grace; nothing new is taken (R15).
	Stopping bool `json:"stopping,omitempty"`
	// Sandbox is what confines the commands; nil when serve runs none.
	Sandbox *sandbox.Summary `json:"sandbox,omitempty"`
}

type statusFile struct {
	path  string
	clock Clock

	mu      sync.Mutex
	s       Status
	pending bool // a soon is scheduled
	final   bool // the last write is done: nothing is written after it
}

// statusDelay is how soon after an instruction starts or settles the file
// says so: soon enough that `sema device status` shows what runs and not
// what finished, and once however many change meanwhile (a write is an
// fsync, which the instruction's path never waits for).
const statusDelay = 200 * time.Millisecond

func newStatusFile(path, deviceID, server, epoch string, clock Clock, sb *sandbox.Sandbox) *statusFile {
	f := &statusFile{path: path, clock: clock, s: Status{
		PID: os.Getpid(), DeviceID: deviceID, Server: server, Epoch: epoch, Since: clock.Now().UTC(), Inflight: []string{},
	}}
	if sb != nil {
		sum := sb.Policy().Summary()
		f.s.Sandbox = &sum
	}
	return f
}

// update applies f and rewrites the file. A write failure is not fatal:
// status is informational.
func (f *statusFile) update(apply func(*Status)) {
	if f == nil || f.path == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writeLocked(apply)
}

// last writes the status the runtime ends with. A soon still scheduled
// then writes nothing: when Run returns the file is no longer touched, so
// whoever removes the state dir (quickstart's temp dir) removes it for
// good.
func (f *statusFile) last(apply func(*Status)) {
	if f == nil || f.path == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writeLocked(apply)
	f.final = true
}

func (f *statusFile) writeLocked(apply func(*Status)) {
	if f.final {
		return
	}
	apply(&f.s)
	if f.s.Inflight == nil {
		f.s.Inflight = []string{}
	}
	f.s.UpdatedAt = f.clock.Now().UTC()
	b, err := json.MarshalIndent(f.s, "", "  ")
	if err == nil {
		atomicfile.Write(f.path, append(b, '\n'), 0o600)
	}
}

// soon rewrites the file within statusDelay, applying fill then; calls
// that come while one is scheduled are that one.
func (f *statusFile) soon(fill func(*Status)) {
	if f == nil || f.path == "" {
		return
	}
	f.mu.Lock()
	scheduled := f.pending
	f.pending = true
	f.mu.Unlock()
	if scheduled {
		return
	}
	f.clock.AfterFunc(statusDelay, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.pending = false
		f.writeLocked(fill)
	})
}

// ReadStatus reads a status file.
func ReadStatus(path string) (Status, error) {
	var s Status
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	err = json.Unmarshal(b, &s)
	return s, err
}
