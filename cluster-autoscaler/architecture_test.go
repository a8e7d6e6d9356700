package main

import (
	"os"
	"os/exec"
	"path"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const modulePath = "k8s.io/autoscaler/cluster-autoscaler"

// modulePackages lists the packages of `go list ./...`, relative to the
// module's root ("cluster-autoscaler" for package main).
func modulePackages(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	var pkgs []string
	for _, line := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(line, modulePath+"/")
		if !ok {
			t.Fatalf("go list named %q, outside module %s", line, modulePath)
		}
		pkgs = append(pkgs, rel)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list named only %d packages: %q", len(pkgs), out)
	}
	return pkgs
}

// TestArchitectureDocNamesEveryPackage: docs/architecture.md gives each
// package its one job, one table row each, so a new package is placed on a
// floor and described. Test-only packages under test/ may be named by their
// folder (`test/integration/...`), which covers the packages below it.
func TestArchitectureDocNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, p := range modulePackages(t) {
		if strings.Contains(text, "\n| `"+p+"` |") {
			continue
		}
		named := false
		for dir := p; strings.HasPrefix(dir, "test/"); dir = path.Dir(dir) {
			if strings.Contains(text, "\n| `"+dir+"/...` |") {
				named = true
				break
			}
		}
		if !named {
			t.Errorf("package %s is missing from docs/architecture.md (add a row \"| `%s` | its one job |\" to its floor's table)", p, p)
		}
	}
}

// golangciConfig is the part of .golangci.yaml the floors test reads.
type golangciConfig struct {
	Linters struct {
		Settings struct {
			Depguard struct {
				Rules map[string]struct {
					Files []string `json:"files"`
					Deny  []struct {
						Pkg string `json:"pkg"`
					} `json:"deny"`
				} `json:"rules"`
			} `json:"depguard"`
		} `json:"settings"`
	} `json:"linters"`
}

// floor is one floorN-... depguard rule: the package globs of its files and
// its deny list, sorted as depguard sorts it.
type floor struct {
	name  string
	globs []string
	deny  []string
}

// holds reports whether a files glob of a floor rule ("dir/*.go": that
// package; "dir/**": the folder and every package below it) names pkg.
func (f floor) holds(pkg string) bool {
	for _, g := range f.globs {
		if dir, ok := strings.CutSuffix(g, "/*.go"); ok && pkg == dir {
			return true
		}
		if dir, ok := strings.CutSuffix(g, "/**"); ok && (pkg == dir || strings.HasPrefix(pkg, dir+"/")) {
			return true
		}
	}
	return false
}

// denies answers as depguard (v2, list-mode lax, no allow list) does: it
// takes the greatest entry (with any "$" trimmed) not after the import, and
// matches that one only, exactly when it ends in "$", else as a prefix.
func (f floor) denies(importPath string) bool {
	i := sort.Search(len(f.deny), func(i int) bool { return strings.TrimRight(f.deny[i], "$") > importPath }) - 1
	if i < 0 {
		return false
	}
	if exact, ok := strings.CutSuffix(f.deny[i], "$"); ok {
		return importPath == exact
	}
	return strings.HasPrefix(importPath, f.deny[i])
}

// readFloors reads the floorN-... rules of ../.golangci.yaml, in order.
func readFloors(t *testing.T) []floor {
	t.Helper()
	raw, err := os.ReadFile("../.golangci.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg golangciConfig
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf(".golangci.yaml: %v", err)
	}
	name := regexp.MustCompile(`^floor([0-9])-`)
	var floors []floor
	for rule, r := range cfg.Linters.Settings.Depguard.Rules {
		if !name.MatchString(rule) {
			continue
		}
		f := floor{name: rule}
		for _, g := range r.Files {
			if strings.HasPrefix(g, "!") {
				continue
			}
			rel, ok := strings.CutPrefix(g, "${config-path}/")
			if !ok || !(strings.HasSuffix(rel, "/*.go") || strings.HasSuffix(rel, "/**")) {
				t.Fatalf("rule %s: files glob %q is not ${config-path}/dir/*.go or ${config-path}/dir/**", rule, g)
			}
			f.globs = append(f.globs, rel)
		}
		for _, d := range r.Deny {
			f.deny = append(f.deny, d.Pkg)
		}
		sort.Strings(f.deny)
		floors = append(floors, f)
	}
	sort.Slice(floors, func(i, j int) bool { return floors[i].name < floors[j].name })
	for i, f := range floors {
		if got := name.FindStringSubmatch(f.name)[1]; got != string(rune('0'+i)) {
			t.Fatalf("the floor rules are not numbered 0, 1, 2, ...: %s is the %dth", f.name, i)
		}
	}
	if len(floors) < 2 {
		t.Fatalf(".golangci.yaml has %d floor rules", len(floors))
	}
	return floors
}

// TestFloorsNameEveryPackage keeps the floors of .golangci.yaml whole: every
// package (but test support and tools, on no floor) is on exactly one
// floor, and each floor's deny list names every package above it, none at
// or below it, and test support and tools.
func TestFloorsNameEveryPackage(t *testing.T) {
	floors := readFloors(t)
	for _, p := range modulePackages(t) {
		importPath := modulePath + "/" + p
		if strings.HasPrefix(p, "test/") || strings.HasPrefix(p, "hack/") {
			for _, f := range floors {
				if !f.denies(importPath) {
					t.Errorf("%s: its deny list lets product code import %s", f.name, p)
				}
			}
			continue
		}
		on := -1
		for i, f := range floors {
			if !f.holds(p) {
				continue
			}
			if on >= 0 {
				t.Errorf("package %s is on two floors: %s and %s", p, floors[on].name, f.name)
			}
			on = i
		}
		if on < 0 {
			t.Errorf("package %s is on no floor of .golangci.yaml: add it to one floor's files, and to the deny lists of the floors below", p)
			continue
		}
		for i, f := range floors {
			switch denied := f.denies(importPath); {
			case i < on && !denied:
				t.Errorf("%s: its deny list misses %s (on %s, above it)", f.name, p, floors[on].name)
			case i >= on && denied:
				t.Errorf("%s: its deny list names %s (on %s, not above it)", f.name, p, floors[on].name)
			}
		}
	}
}
