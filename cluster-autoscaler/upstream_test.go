package main

import (
	"bufio"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"k8s.io/autoscaler/cluster-autoscaler/hack/upstreamlist/scan"
)

// upstreamListFile is the one machine-checked list of upstream's flags,
// metric families, function-duration labels and event reasons, read from
// one upstream commit by hack/upstreamlist, with the differences we keep on
// purpose and our additions, each with its reason.
const upstreamListFile = "testdata/upstream.txt"

// upstreamList is testdata/upstream.txt, by kind of line.
type upstreamList struct {
	source, commit, date string
	flags                map[string]string   // name -> default
	metrics              map[string][]string // name -> type, labels, buckets, preset
	functions            map[string]bool
	events               map[string]bool
	// keep: "flag-default", "flag-missing", "metric-missing",
	// "metric-elsewhere", "function-missing", "event-missing" -> name ->
	// the line's further columns (the last one is the reason).
	keep map[string]map[string][]string
	// ours: "flag", "metric", "function", "event", "event-site" -> name -> note.
	ours map[string]map[string]string
}

func readUpstreamList(t *testing.T) *upstreamList {
	t.Helper()
	f, err := os.Open(upstreamListFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := &upstreamList{flags: map[string]string{}, metrics: map[string][]string{}, functions: map[string]bool{},
		events: map[string]bool{}, keep: map[string]map[string][]string{}, ours: map[string]map[string]string{}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "|")
		for i := range cols {
			cols[i] = strings.TrimSpace(cols[i])
		}
		want := map[string]int{"upstream": 4, "flag": 3, "metric": 6, "function": 2, "event": 2}[cols[0]]
		switch cols[0] {
		case "upstream":
			if len(cols) == want {
				l.source, l.commit, l.date = cols[1], cols[2], cols[3]
			}
		case "flag":
			if len(cols) == want {
				l.flags[cols[1]] = cols[2]
			}
		case "metric":
			if len(cols) == want {
				l.metrics[cols[1]] = cols[2:]
			}
		case "function":
			if len(cols) == want {
				l.functions[cols[1]] = true
			}
		case "event":
			if len(cols) == want {
				l.events[cols[1]] = true
			}
		case "keep":
			want = 4
			if cols[1] == "flag-default" {
				want = 5
			}
			if len(cols) == want && cols[len(cols)-1] != "" {
				if l.keep[cols[1]] == nil {
					l.keep[cols[1]] = map[string][]string{}
				}
				l.keep[cols[1]][cols[2]] = cols[3:]
			}
		case "ours":
			want = 4
			if len(cols) == want && cols[3] != "" {
				if l.ours[cols[1]] == nil {
					l.ours[cols[1]] = map[string]string{}
				}
				l.ours[cols[1]][cols[2]] = cols[3]
			}
		}
		if want == 0 || len(cols) != want || cols[len(cols)-1] == "" {
			t.Fatalf("%s:%d: want %d columns, the last not empty: %q", upstreamListFile, n, want, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if l.commit == "" || len(l.flags) < 150 || len(l.metrics) < 30 || len(l.functions) < 10 || len(l.events) < 10 {
		t.Fatalf("%s: no upstream commit line, or too short a list (%d flags, %d metrics, %d functions, %d events)",
			upstreamListFile, len(l.flags), len(l.metrics), len(l.functions), len(l.events))
	}
	return l
}

// advice is what a failure of TestUpstreamList asks for.
func (l *upstreamList) advice() string {
	return "The list " + upstreamListFile + " was read from " + l.source + " at " + l.commit + " (" + l.date + "). " +
		"Read upstream's change there (git log " + l.commit + " -- pkg/config/flags pkg/metrics), then either " +
		"match it, or add a `keep` line (a difference we keep, with its reason) or an `ours` line (our addition, " +
		"with its reason) after the generated block. To read a newer upstream: go run ./hack/upstreamlist -repo " +
		"<kubernetes-sigs/cluster-autoscaler git dir> -commit main, then run this test again."
}

// TestUpstreamList compares the binary with the list of upstream's flags,
// metric families, function labels and event reasons: every upstream entry
// must be ours as upstream's (same default, type, labels, buckets, pre-set
// series) or listed as a difference we keep; every entry of ours that
// upstream lacks must be listed as ours; and a listed difference that is no
// longer one fails too, so that the list stays true.
func TestUpstreamList(t *testing.T) {
	l := readUpstreamList(t)
	t.Run("flags", func(t *testing.T) { checkFlags(t, l) })
	t.Run("metrics", func(t *testing.T) { checkMetrics(t, l) })
	t.Run("functions", func(t *testing.T) { checkFunctions(t, l) })
	t.Run("events", func(t *testing.T) { checkEvents(t, l) })
	if t.Failed() {
		t.Error(l.advice())
	}
}

func checkFlags(t *testing.T, l *upstreamList) {
	ours := map[string]string{}
	newCommandLine().fs.VisitAll(func(f *pflag.Flag) { ours[f.Name] = f.DefValue })
	for _, name := range slices.Sorted(maps.Keys(l.flags)) {
		up := l.flags[name]
		def, accepted := ours[name]
		if _, kept := l.keep["flag-missing"][name]; kept {
			if accepted {
				t.Errorf("--%s: listed as a flag we do not accept, but accepted: drop its keep line", name)
			}
			continue
		}
		if !accepted {
			t.Errorf("--%s: upstream's flag (default %q) is not accepted", name, up)
			continue
		}
		if kept, ok := l.keep["flag-default"][name]; ok {
			if !sameDefault(kept[0], def) {
				t.Errorf("--%s default = %q, the list keeps our own %q", name, def, kept[0])
			}
			if sameDefault(up, def) {
				t.Errorf("--%s: upstream's default is ours again (%q): drop its keep line", name, up)
			}
			continue
		}
		if up != "?" && !sameDefault(up, def) {
			t.Errorf("--%s default = %q, upstream's is %q", name, def, up)
		}
	}
	checkOurs(t, l, "flag", "--", ours, l.flags)
}

// checkStale fails on keep and ours lines of kind that name nothing: a
// keep line for what upstream no longer has, an ours line for what we no
// longer have.
func checkStale[O, U any](t *testing.T, l *upstreamList, kind, prefix string, ours map[string]O, upstream map[string]U) {
	t.Helper()
	for k, names := range l.keep {
		if !strings.HasPrefix(k, kind+"-") {
			continue
		}
		for name := range names {
			if _, ok := upstream[name]; !ok {
				t.Errorf("%s%s: keep %s line, but upstream does not have it: drop the line", prefix, name, k)
			}
		}
	}
	for name := range l.ours[kind] {
		if _, ok := ours[name]; !ok {
			t.Errorf("%s%s: ours line, but we do not have it: drop the line", prefix, name)
		}
	}
}

func checkFunctions(t *testing.T, l *upstreamList) {
	src := scan.NewSource(dirTree(".."), "k8s.io/autoscaler/cluster-autoscaler")
	ours := map[string]bool{}
	for _, v := range src.ConstsOfType("metrics", "", "Function") {
		ours[v] = true
	}
	if len(ours) < 5 {
		t.Fatalf("read only %d Function* constants in metrics/", len(ours))
	}
	compareSets(t, l, "function", "function=", ours, l.functions)
}

// compareSets compares names of kind (functions, events): each upstream
// name ours or kept missing, each of ours upstream's or listed as ours.
func compareSets(t *testing.T, l *upstreamList, kind, prefix string, ours, upstream map[string]bool) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(upstream)) {
		_, kept := l.keep[kind+"-missing"][name]
		switch {
		case kept && ours[name]:
			t.Errorf("%s%s: kept as missing, but ours has it: drop its keep line", prefix, name)
		case !kept && !ours[name]:
			t.Errorf("%s%s: upstream's, not ours", prefix, name)
		}
	}
	checkOurs(t, l, kind, prefix, ours, upstream)
}

// checkOurs checks each of our names of kind against upstream's: one
// upstream has now must lose its ours line, one it does not have must
// have one; then that no keep or ours line is stale (checkStale).
func checkOurs[O, U any](t *testing.T, l *upstreamList, kind, prefix string, ours map[string]O, upstream map[string]U) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(ours)) {
		_, isUpstream := upstream[name]
		_, listed := l.ours[kind][name]
		switch {
		case isUpstream && listed:
			t.Errorf("%s%s: listed as ours, but upstream has it now: drop its ours line", prefix, name)
		case !isUpstream && !listed:
			t.Errorf("%s%s: ours, not upstream's, and not listed as ours", prefix, name)
		}
	}
	checkStale(t, l, kind, prefix, ours, upstream)
}

func checkEvents(t *testing.T, l *upstreamList) {
	tree := dirTree("..")
	files, err := tree.Files(".", true)
	if err != nil {
		t.Fatal(err)
	}
	src := scan.NewSource(tree, "k8s.io/autoscaler/cluster-autoscaler")
	sites, err := src.Events(files)
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	dynamic := map[string]bool{}
	for _, s := range sites {
		if s.Known {
			r := s.Reason
			if r == "" {
				r = "-"
			}
			ours[r] = true
			continue
		}
		file, _, _ := strings.Cut(s.Where, ":")
		key := file + ":" + s.Func
		dynamic[key] = true
		if _, listed := l.ours["event-site"][key]; !listed {
			t.Errorf("%s (%s): an event whose reason is not a constant; list the reasons it records as an "+
				"`ours | event-site | %s | ...` line", s.Where, s.Func, key)
		}
	}
	if len(ours) < 10 {
		t.Fatalf("read only %d event reasons in our source", len(ours))
	}
	for key := range l.ours["event-site"] {
		if !dynamic[key] {
			t.Errorf("event site %s: listed, but records no event with a variable reason now: drop the line", key)
		}
	}
	delete(l.ours, "event-site")
	compareSets(t, l, "event", "event reason ", ours, l.events)
}

// dirTree is our own source tree, for scan.
type dirTree string

func (d dirTree) ReadFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(string(d), filepath.FromSlash(name)))
}

// Files lists product code: not tests, not test/ or hack/ or generated
// clients.
func (d dirTree) Files(dir string, recursive bool) ([]string, error) {
	root := filepath.Join(string(d), filepath.FromSlash(dir))
	var out []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(string(d), p)
		rel = filepath.ToSlash(rel)
		if e.IsDir() {
			switch {
			case p == root:
				return nil
			case !recursive, strings.HasPrefix(e.Name(), "."), e.Name() == "testdata", e.Name() == "_output",
				rel == "test", rel == "hack":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			out = append(out, rel)
		}
		return nil
	})
	return out, err
}
