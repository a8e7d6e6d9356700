package integration

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// autoscalerProcess is one running cluster-autoscaler binary.
type autoscalerProcess struct {
	t       testing.TB
	name    string
	cmd     *exec.Cmd
	address string
	// explainAddress is --explain-address: /explainz's own listener.
	explainAddress string
	log            *framework.SyncBuffer
	done           chan struct{}
	exitErr        error
}

// startAutoscaler runs the binary with a free loopback --address and
// --explain-address plus args, and kills it when the test ends if it is
// still running.
func startAutoscaler(t testing.TB, name string, args ...string) *autoscalerProcess {
	t.Helper()
	return startAutoscalerBinary(t, autoscalerBinary, name, args...)
}

// startAutoscalerBinary is startAutoscaler with another build of the
// binary (a fork).
func startAutoscalerBinary(t testing.TB, binary, name string, args ...string) *autoscalerProcess {
	t.Helper()
	return startAutoscalerProcess(t, binary, nil, name, args...)
}

// startAutoscalerEnv is startAutoscaler with variables added to the
// process's environment ("GOMEMLIMIT=450MiB").
func startAutoscalerEnv(t testing.TB, env []string, name string, args ...string) *autoscalerProcess {
	t.Helper()
	return startAutoscalerProcess(t, autoscalerBinary, env, name, args...)
}

// startServerBinary runs another program of the project (the example gRPC
// server) the same way: a free loopback --address plus args, no
// --explain-address (only the autoscaler has it).
func startServerBinary(t testing.TB, binary, name string, args ...string) *autoscalerProcess {
	t.Helper()
	return startProcess(t, binary, nil, name, false, args...)
}

func startAutoscalerProcess(t testing.TB, binary string, env []string, name string, args ...string) *autoscalerProcess {
	t.Helper()
	return startProcess(t, binary, env, name, true, args...)
}

func startProcess(t testing.TB, binary string, env []string, name string, explain bool, args ...string) *autoscalerProcess {
	t.Helper()
	addr := framework.FreeAddress(t)
	p := &autoscalerProcess{t: t, name: name, address: addr, log: &framework.SyncBuffer{}, done: make(chan struct{})}
	flags := []string{"--address=" + addr}
	if explain {
		// Parallel autoscalers cannot share --explain-address's default port.
		p.explainAddress = framework.FreeAddress(t)
		flags = append(flags, "--explain-address="+p.explainAddress)
	}
	p.cmd = exec.Command(binary, append(flags, args...)...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, p.log.String())
		}
	})
	return p
}

// signal sends SIGTERM and waits for the exit code.
func (p *autoscalerProcess) terminate(timeout time.Duration) int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("signalling %s: %v", p.name, err)
	}
	return p.waitExit(timeout)
}

// waitExit waits for the process to end and returns its exit code.
func (p *autoscalerProcess) waitExit(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("%s still running after %v", p.name, timeout)
	}
	return p.cmd.ProcessState.ExitCode()
}

// get fetches path from the autoscaler's HTTP server on --address.
func (p *autoscalerProcess) get(ctx context.Context, path string) (int, string, error) {
	return getURL(ctx, "http://"+p.address+path)
}

// explainz fetches /explainz?query from --explain-address, where the
// autoscaler serves it by default.
func (p *autoscalerProcess) explainz(ctx context.Context, query string) (int, string, error) {
	return getURL(ctx, "http://"+p.explainAddress+"/explainz?"+query)
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
