package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExitedNamesTheComponentThatEnded: a component that ended is named
// with its exit status and the end of its log; one still running is not,
// nor an API server RestartAPIServer has down on purpose.
func TestExitedNamesTheComponentThatEnded(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{State: State{PIDs: map[string]int{}}, cfg: Config{Dir: dir}}
	start := func(name, script string) *process {
		p, err := startProcess("/bin/sh", []string{"-c", script}, filepath.Join(dir, "logs", name+".log"), false, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.procs = append(c.procs, p)
		c.PIDs[name] = p.pid()
		return p
	}
	running := start("kwok", "sleep 60")
	t.Cleanup(func() { _ = running.cmd.Process.Kill(); <-running.done })
	scheduler := start("kube-scheduler", "echo 'E1130 the scheduler could not go on'; exit 3")
	apiserver := start("kube-apiserver", "exit 137")
	for _, p := range []*process{scheduler, apiserver} {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Fatal("the process did not end")
		}
	}

	c.restarting = true
	got := c.Exited()
	for _, want := range []string{"kube-scheduler exited (exit status 3)", "the scheduler could not go on"} {
		if !strings.Contains(got, want) {
			t.Errorf("Exited() = %q, want it to say %q", got, want)
		}
	}
	for _, not := range []string{"kwok", "kube-apiserver"} {
		if strings.Contains(got, not) {
			t.Errorf("Exited() = %q names %s", got, not)
		}
	}
	c.restarting = false
	if got := c.Exited(); !strings.Contains(got, "kube-apiserver exited (exit status 137)") {
		t.Errorf("Exited() = %q, want the API server named once it is not being restarted", got)
	}
}
