package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/builder"
)

// The README's layout table names every top-level folder of the repository
// that holds code or docs, so that a new package is placed in it.
func TestREADMELayoutTableNamesEveryFolder(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z][a-z0-9-]*)/").FindAllStringSubmatch(string(readme), -1) {
		listed[m[1]] = true
	}
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			continue
		}
		if !listed[name] {
			t.Errorf("folder %s/ is missing from the README's layout table", name)
		}
	}
	// And the other way: a listed folder that is planned says "to come".
	for name := range listed {
		if _, err := os.Stat(filepath.Join("..", name)); err != nil && !strings.Contains(string(readme), "| `"+name+"/` | (to come)") {
			t.Errorf("the README's layout table lists %s/, which does not exist and is not marked (to come)", name)
		}
	}
}

// TestStatusPagesNameTheRegisteredProviders: the README's status paragraph
// and the FAQ's "What does this version do today?" name exactly the cloud
// providers the binary registers (issue 30: both said kwok was the only one
// long after others shipped).
func TestStatusPagesNameTheRegisteredProviders(t *testing.T) {
	want := builder.NewProviderRegistry().Names()
	for _, page := range []struct{ file, section string }{
		{"../README.md", "**Status.**"},
		{"../FAQ.md", "## What does this version do today?"},
	} {
		body, err := os.ReadFile(page.file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(body)
		i := strings.Index(text, page.section)
		if i < 0 {
			t.Errorf("%s: no section %q", page.file, page.section)
			continue
		}
		text = text[i:]
		if end := strings.Index(text[len(page.section):], "\n## "); end >= 0 {
			text = text[:len(page.section)+end]
		}
		m := regexp.MustCompile("\\*\\*Cloud providers\\*\\* \\(`--cloud-provider`\\): ([^.;]*)[.;]").FindStringSubmatch(text)
		if m == nil {
			t.Errorf("%s %q: no sentence \"**Cloud providers** (`--cloud-provider`): ...\"", page.file, page.section)
			continue
		}
		var got []string
		for _, n := range regexp.MustCompile("`([a-z0-9-]+)`").FindAllStringSubmatch(m[1], -1) {
			got = append(got, n[1])
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s %q names the providers %v; the binary registers %v (sorted)", page.file, page.section, got, want)
		}
	}
}

// TestPagesCarryNoMergeConflictMarkers: a merge once left both versions of
// README's status paragraph between conflict markers, and every other test
// of the page still passed.
func TestPagesCarryNoMergeConflictMarkers(t *testing.T) {
	for _, file := range []string{"../README.md", "../FAQ.md", "../docs/benchmarks.md", "../docs/reliability.md"} {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "<<<<<<< ") || strings.HasPrefix(line, ">>>>>>> ") {
				t.Errorf("%s:%d: merge conflict marker %q", file, i+1, line)
			}
		}
	}
}
