package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFuzzScriptRerunsOnlyTheCoordinatorRace: hack/fuzz.sh (make fuzz) runs
// a target once more when it failed with Go 1.26's bare "context deadline
// exceeded" at the end of -fuzztime and wrote no failing input
// (golang/go#75804); a failing input written, another failure, or the race
// twice in a row fail. `go` is replaced by a script playing each outcome.
func TestFuzzScriptRerunsOnlyTheCoordinatorRace(t *testing.T) {
	script, err := filepath.Abs("../hack/fuzz.sh")
	if err != nil {
		t.Fatal(err)
	}
	const race = "echo 'fuzz: elapsed: 10s'; echo '--- FAIL: FuzzX (10.02s)'; echo '    context deadline exceeded'; echo FAIL; exit 1"
	const crash = "mkdir -p pkg/testdata/fuzz/FuzzX && echo input > pkg/testdata/fuzz/FuzzX/abc; " +
		"echo '--- FAIL: FuzzX (3.00s)'; echo '    context deadline exceeded'; exit 1"
	const other = "echo '--- FAIL: FuzzX (3.00s)'; echo '    fuzz_test.go:12: bad reply accepted'; exit 1"
	for _, tc := range []struct {
		name     string
		runs     []string // what each call of go does
		wantOK   bool
		wantRuns int
	}{
		{"passes", []string{"exit 0"}, true, 1},
		{"race then pass", []string{race, "exit 0"}, true, 2},
		{"race twice", []string{race, race}, false, 2},
		{"failing input written", []string{crash, "exit 0"}, false, 1},
		{"another failure", []string{other, "exit 0"}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			if err := os.MkdirAll(filepath.Join(dir, "pkg"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			var stub strings.Builder
			stub.WriteString("#!/bin/bash\nn=$(cat runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > runs\ncase $n in\n")
			for i, r := range tc.runs {
				fmt.Fprintf(&stub, "  %d) %s ;;\n", i+1, r)
			}
			stub.WriteString("esac\nexit 3\n")
			if err := os.WriteFile(filepath.Join(bin, "go"), []byte(stub.String()), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", script, "./pkg:FuzzX")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FUZZ_TIME=1s")
			out, err := cmd.CombinedOutput()
			if ok := err == nil; ok != tc.wantOK {
				t.Errorf("hack/fuzz.sh succeeded=%v, want %v:\n%s", ok, tc.wantOK, out)
			}
			runs, _ := os.ReadFile(filepath.Join(dir, "runs"))
			if got := strings.TrimSpace(string(runs)); got != strconv.Itoa(tc.wantRuns) {
				t.Errorf("go ran %s times, want %d:\n%s", got, tc.wantRuns, out)
			}
		})
	}
}
