package localcluster

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPortTaken: a start is tried again only when a component's log says a
// port it was given was already in use.
func TestPortTaken(t *testing.T) {
	for _, tc := range []struct {
		log  string
		want bool
	}{
		{`E1129 run.go:72] "command failed" err="failed to create listener: failed to listen on 127.0.0.1:44147: listen tcp 127.0.0.1:44147: bind: address already in use"`, true},
		{`E1129 run.go:72] "command failed" err="unknown flag: --bogus"`, false},
	} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "logs", "kube-scheduler.log"), []byte(tc.log+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := portTaken(dir); got != tc.want {
			t.Errorf("portTaken with log %q = %v, want %v", tc.log, got, tc.want)
		}
	}
	if portTaken(t.TempDir()) {
		t.Error("portTaken without logs = true")
	}
}
