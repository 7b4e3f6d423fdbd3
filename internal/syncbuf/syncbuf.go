// Package syncbuf is a bytes.Buffer safe for concurrent use: a log
// destination that a test shares with the goroutines it starts.
package syncbuf

import (
	"bytes"
	"sync"
)

// A Buffer is a bytes.Buffer whose Write and String may be called
// concurrently. Its zero value is an empty buffer ready to use.
type Buffer struct {
	mu sync.Mutex // protects b
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
