// Package syncbuf is a bytes.Buffer safe for concurrent writers and
// readers: what a test hands to a logger or a child process's stdout while
// it reads what arrived so far.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a mutex-guarded bytes.Buffer. The zero value is empty and
// ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
