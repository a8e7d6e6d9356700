package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns the controller and the terminal of a new pseudo-terminal.
func openPTY(t *testing.T) (controller, terminal *os.File) {
	t.Helper()
	c, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if err := unix.IoctlSetPointerInt(int(c.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(c.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("naming the pseudo-terminal: %v", err)
	}
	term, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { term.Close() })
	return c, term
}

// lockedBuffer collects a terminal's output from one goroutine while
// another reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestMakeDemoCtrlCExitsZero: `make demo` on a terminal, stopped with
// Ctrl-C, ends with the demo's status (0 once it stopped cleanly), not with
// make's "Interrupt" and 130. The demo is replaced by a script that stops
// cleanly on SIGINT; make runs in a session of its own on a
// pseudo-terminal, and Ctrl-C is typed on it, as a person would.
func TestMakeDemoCtrlCExitsZero(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed (README's commands are make targets): %v", err)
	}
	dir := t.TempDir()
	demo := filepath.Join(dir, "demo.sh")
	marker := filepath.Join(dir, "stopped")
	script := "#!/bin/bash\ntrap 'echo stopped > " + marker + "; exit 0' INT\necho demo running\nwhile :; do sleep 0.1; done\n"
	if err := os.WriteFile(demo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	controller, terminal := openPTY(t)
	// -o build: the binary's build is not what this test is about.
	cmd := exec.Command("make", "--no-print-directory", "-o", "build", "demo", "DEMO="+demo)
	cmd.Dir = ".."
	cmd.Stdin, cmd.Stdout, cmd.Stderr = terminal, terminal, terminal
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := controller.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "demo running") {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the demo did not start:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := controller.Write([]byte{3}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("make did not end after Ctrl-C:\n%s", out.String())
	}
	if _, serr := os.Stat(marker); serr != nil {
		t.Errorf("the demo was not stopped by Ctrl-C (%v)", serr)
	}
	if err != nil {
		t.Errorf("make demo after Ctrl-C: %v, want exit status 0:\n%s", err, out.String())
	}
	_ = terminal.Close()
	<-read
	if strings.Contains(out.String(), "Interrupt") {
		t.Errorf("make reported an interrupted recipe:\n%s", out.String())
	}
}
