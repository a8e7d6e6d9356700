package itest

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// AutoscalerProcess is one running cluster-autoscaler binary.
type AutoscalerProcess struct {
	t       testing.TB
	Name    string
	Cmd     *exec.Cmd
	Address string
	// ExplainAddress is --explain-address: /explainz's own listener.
	ExplainAddress string
	Log            *framework.SyncBuffer
	Done           chan struct{}
	ExitErr        error
}

// StartAutoscaler runs the binary with a free loopback --address and
// --explain-address plus args, and kills it when the test ends if it is
// still running.
func StartAutoscaler(t testing.TB, name string, args ...string) *AutoscalerProcess {
	t.Helper()
	return StartAutoscalerBinary(t, AutoscalerBinary, name, args...)
}

// StartAutoscalerBinary is startAutoscaler with another build of the
// binary (a fork).
func StartAutoscalerBinary(t testing.TB, binary, name string, args ...string) *AutoscalerProcess {
	t.Helper()
	return startAutoscalerProcess(t, binary, nil, name, args...)
}

// StartAutoscalerEnv is startAutoscaler with variables added to the
// process's environment ("GOMEMLIMIT=450MiB").
func StartAutoscalerEnv(t testing.TB, env []string, name string, args ...string) *AutoscalerProcess {
	t.Helper()
	return startAutoscalerProcess(t, AutoscalerBinary, env, name, args...)
}

// StartServerBinary runs another program of the project (the example gRPC
// server) the same way: a free loopback --address plus args, no
// --explain-address (only the autoscaler has it).
func StartServerBinary(t testing.TB, binary, name string, args ...string) *AutoscalerProcess {
	t.Helper()
	return startProcess(t, binary, nil, name, false, args...)
}

func startAutoscalerProcess(t testing.TB, binary string, env []string, name string, args ...string) *AutoscalerProcess {
	t.Helper()
	return startProcess(t, binary, env, name, true, args...)
}

func startProcess(t testing.TB, binary string, env []string, name string, explain bool, args ...string) *AutoscalerProcess {
	t.Helper()
	// Two ports chosen together, so that they differ.
	addrs := framework.FreeAddresses(t, 2)
	addr := addrs[0]
	p := &AutoscalerProcess{t: t, Name: name, Address: addr, Log: &framework.SyncBuffer{}, Done: make(chan struct{})}
	flags := []string{"--address=" + addr}
	if explain {
		// Parallel autoscalers cannot share --explain-address's default port.
		p.ExplainAddress = addrs[1]
		flags = append(flags, "--explain-address="+p.ExplainAddress)
	}
	p.Cmd = exec.Command(binary, append(flags, args...)...)
	if env != nil {
		p.Cmd.Env = append(os.Environ(), env...)
	}
	p.Cmd.Stdout, p.Cmd.Stderr = p.Log, p.Log
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	processes.Add(1)
	go func() {
		p.ExitErr = p.Cmd.Wait()
		if st := p.Cmd.ProcessState; st != nil {
			processNanos.Add(int64(st.UserTime() + st.SystemTime()))
		}
		close(p.Done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.Done:
		default:
			_ = p.Cmd.Process.Kill()
			<-p.Done
		}
		// A binary built with -race (RaceEnv) reports each race on its
		// output and goes on; the test fails for it.
		if strings.Contains(p.Log.String(), "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race", name)
		}
		if t.Failed() {
			out, dropped := withoutReflectorLines(p.Log.String())
			t.Logf("log of %s (%d Info lines of client-go's reflectors left out):\n%s", name, dropped, out)
		}
	})
	return p
}

// withoutReflectorLines drops client-go's informer lines of level Info
// from a log (dozens at --v=4, before anything of the test's): CI shows a
// failed test's first lines, and they should be the autoscaler's. Its
// warnings and errors (a watch refused by RBAC) stay.
func withoutReflectorLines(log string) (string, int) {
	var b strings.Builder
	dropped := 0
	for line := range strings.Lines(log) {
		if strings.HasPrefix(line, "I") && strings.Contains(line, " reflector.go:") {
			dropped++
			continue
		}
		b.WriteString(line)
	}
	return b.String(), dropped
}

// signal sends SIGTERM and waits for the exit code.
func (p *AutoscalerProcess) Terminate(timeout time.Duration) int {
	p.t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("signalling %s: %v", p.Name, err)
	}
	return p.WaitExit(timeout)
}

// WaitExit waits for the process to end and returns its exit code.
func (p *AutoscalerProcess) WaitExit(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.Done:
	case <-time.After(timeout):
		p.t.Fatalf("%s still running after %v", p.Name, timeout)
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Get fetches path from the autoscaler's HTTP server on --address.
func (p *AutoscalerProcess) Get(ctx context.Context, path string) (int, string, error) {
	return getURL(ctx, "http://"+p.Address+path)
}

// Explainz fetches /explainz?query from --explain-address, where the
// autoscaler serves it by default.
func (p *AutoscalerProcess) Explainz(ctx context.Context, query string) (int, string, error) {
	return getURL(ctx, "http://"+p.ExplainAddress+"/explainz?"+query)
}

func getURL(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// WhilePaused runs f with the process stopped (SIGSTOP, then SIGCONT), so
// that changes f makes at once are seen by the process's loops together,
// not one loop apart. f must be short: the process renews no lease while
// stopped.
func (p *AutoscalerProcess) WhilePaused(f func()) {
	p.t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.t.Fatalf("stopping %s: %v", p.Name, err)
	}
	defer func() {
		if err := p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
			p.t.Errorf("resuming %s: %v", p.Name, err)
		}
	}()
	f()
}
