package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one control-plane component started by this package.
type process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// startProcess starts bin with args, its output appended to logPath, in env
// (nil: this process's environment).
func startProcess(bin string, args []string, logPath string, detach bool, env []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }() // the child keeps its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = env
	if detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// Own process group, and killed if this process dies first, so a
		// crashed or timed-out test leaves nothing running.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stopPID sends SIGTERM to pid, then SIGKILL after timeout, and waits for it
// to go. It acts only if pid still runs the named binary, so a PID reused by
// an unrelated process after a reboot is never signalled. proc is the
// process handle when this process started it, nil otherwise.
func stopPID(pid int, name string, proc *process, timeout time.Duration) error {
	if !runs(pid, name) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	if waitGone(pid, name, proc, timeout) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	if !waitGone(pid, name, proc, 5*time.Second) {
		return fmt.Errorf("still running after SIGKILL")
	}
	return nil
}

func waitGone(pid int, name string, proc *process, timeout time.Duration) bool {
	if proc != nil {
		select {
		case <-proc.done:
			return true
		case <-time.After(timeout):
			return false
		}
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !runs(pid, name) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// runs reports whether pid is alive (not a zombie) and executes a binary called name.
func runs(pid int, name string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cmdline) == 0 {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	if filepath.Base(string(argv0)) != name {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}
