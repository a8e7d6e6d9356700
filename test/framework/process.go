package framework

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// FreeAddress returns a free 127.0.0.1 port as host:port, for a process's
// --address.
func FreeAddress(t testing.TB) string {
	t.Helper()
	return FreeAddresses(t, 1)[0]
}

// FreeAddresses returns n free 127.0.0.1 ports, all different: each
// listener stays open until all are chosen (two FreeAddress calls in a row
// may get the same port back, the first having been freed).
func FreeAddresses(t testing.TB, n int) []string {
	t.Helper()
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		out = append(out, l.Addr().String())
	}
	return out
}

// SyncBuffer collects a process's output; safe for concurrent writes and reads.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Contains reports whether s was written.
func (b *SyncBuffer) Contains(s string) bool { return strings.Contains(b.String(), s) }

// Written reports whether s is written within 10 seconds: for a test that
// wants a line a process logs after the effect the test saw (a process can
// be descheduled between an API call's answer and its log line on a loaded
// machine). Contains is the check that something was not written.
func (b *SyncBuffer) Written(s string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !b.Contains(s) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}
