package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
