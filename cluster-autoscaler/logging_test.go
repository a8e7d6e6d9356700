package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestLoggingFlagsAreValidated: component-base's rules, with errors naming
// the flag: an unknown feature gate, an unknown format, split streams only
// with the LoggingAlphaOptions gate.
func TestLoggingFlagsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"--feature-gates=NoSuchGate=true"}, wantErr: "--feature-gates"},
		{args: []string{"--feature-gates=ContextualLogging=maybe"}, wantErr: "--feature-gates"},
		{args: []string{"--logging-format=xml"}, wantErr: "--logging-format"},
		{args: []string{"--logging-format=json", "--log-json-split-stream=true"}, wantErr: "--log-json-split-stream"},
		{args: []string{"--logging-format=json", "--log-json-split-stream=true", "--feature-gates=LoggingAlphaOptions=true"}},
		{args: []string{"--logging-format=json", "--v=4", "--log-flush-frequency=1s", "--feature-gates=DynamicResourceAllocation=true"}},
	} {
		err := newCommandLine().parse(tc.args)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: err %v, want one naming %s", tc.args, err, tc.wantErr)
		}
	}
}

// TestHelperRun is not a test: TestJSONLogging runs the test binary again
// with it, so that the process-wide logging set-up is the child's alone.
func TestHelperRun(t *testing.T) {
	args := os.Getenv("CA_TEST_RUN_ARGS")
	if args == "" {
		t.Skip("only a helper process for TestJSONLogging")
	}
	os.Exit(run(strings.Split(args, " "), os.Stdout, os.Stderr))
}

// TestJSONLogging: with --logging-format=json every log line is a JSON
// object with the message and its key/value pairs; with the default text
// format the lines are klog's.
func TestJSONLogging(t *testing.T) {
	runChild := func(args string) (out string, code int) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRun$")
		cmd.Env = append(os.Environ(), "CA_TEST_RUN_ARGS="+args)
		b, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(b), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b), 0
	}
	out, code := runChild("--logging-format=json --cloud-provider=gce --address=127.0.0.1:0")
	if code != 1 {
		t.Fatalf("exit code %d, want 1:\n%s", code, out)
	}
	var sawStart, sawErr bool
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("not a JSON line: %q", line)
			continue
		}
		if m["msg"] == "Starting cluster-autoscaler" && m["version"] != nil {
			sawStart = true
		}
		if m["msg"] == "Autoscaler stopped" && strings.Contains(m["err"].(string), "unknown cloud provider") {
			sawErr = true
		}
	}
	if !sawStart || !sawErr {
		t.Errorf("the start and the error are not logged as JSON with their values:\n%s", out)
	}
	out, _ = runChild("--cloud-provider=gce --address=127.0.0.1:0")
	if !strings.Contains(out, `] "Starting cluster-autoscaler" version=`) {
		t.Errorf("the text format is not klog's:\n%s", out)
	}
}

// TestStderrThresholdIsHonoured: as upstream's newest main, everything goes
// to stderr by default, and --stderrthreshold=ERROR keeps only the errors
// even though --logtostderr is true (klog's legacy behaviour ignored it).
func TestStderrThresholdIsHonoured(t *testing.T) {
	c := newCommandLine()
	for name, want := range map[string]string{"stderrthreshold": "0", "legacy-stderr-threshold-behavior": "false", "logtostderr": "true"} {
		f := c.fs.Lookup(name)
		if f == nil {
			t.Fatalf("--%s is not registered", name)
		}
		if f.DefValue != want {
			t.Errorf("--%s default = %q, want %q", name, f.DefValue, want)
		}
	}
	stderrOf := func(args string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRun$")
		cmd.Env = append(os.Environ(), "CA_TEST_RUN_ARGS="+args)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err == nil {
			t.Fatalf("%s: the child exited 0, want 1 (unknown cloud provider)", args)
		}
		return stderr.String()
	}
	const base = "--cloud-provider=gce --address=127.0.0.1:0"
	out := stderrOf(base)
	if !strings.Contains(out, `"Starting cluster-autoscaler"`) || !strings.Contains(out, `"Autoscaler stopped"`) {
		t.Errorf("by default the info and error lines go to stderr:\n%s", out)
	}
	out = stderrOf(base + " --stderrthreshold=ERROR")
	if strings.Contains(out, `"Starting cluster-autoscaler"`) || !strings.Contains(out, `"Autoscaler stopped"`) {
		t.Errorf("with --stderrthreshold=ERROR only the error line goes to stderr:\n%s", out)
	}
}
