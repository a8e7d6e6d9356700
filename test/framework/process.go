package framework

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
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

// FreeRestartAddress returns a free 127.0.0.1 port below the kernel's
// ephemeral range, for a server that a test stops and starts again on the
// same address. A port in the ephemeral range can be taken meanwhile by a
// client's own end: a client dialling it while nothing listens may even be
// given it as its local port and connect to itself (seen: the restarted
// server could not bind, and the client read no server preface).
func FreeRestartAddress(t testing.TB) string {
	t.Helper()
	low := 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if fields := strings.Fields(string(data)); len(fields) == 2 {
			var n int
			if _, err := fmt.Sscan(fields[0], &n); err == nil && n > 2048 {
				low = n
			}
		}
	}
	for range 200 {
		port := 1024 + rand.IntN(low-1024)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		_ = l.Close()
		return addr
	}
	t.Fatalf("no free port below %d", low)
	return ""
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
