package framework

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// NothingToRun reports whether go test's -run (and -bench, -fuzz, -list)
// select none of the package's tests, so that its TestMain need not build
// the binary under test nor start a control plane: `go test -run TestX ./...`
// then starts one control plane, not one per package. It reads the test
// functions of the package's _test.go files (go test runs a test binary in
// its package's directory); whenever it cannot tell, it answers false.
func NothingToRun() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	value := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	run := value("test.run")
	if run == "" || value("test.bench") != "" || value("test.fuzz") != "" || value("test.list") != "" {
		return false
	}
	names, err := testFunctions(".")
	if err != nil {
		return false
	}
	return selectsNone(run, names)
}

// selectsNone reports whether the -run pattern run matches none of the
// top-level test names; false when run does not compile or names is empty.
func selectsNone(run string, names []string) bool {
	first, _, _ := strings.Cut(topLevelElements(run), "\x00")
	re, err := regexp.Compile(first)
	if err != nil || len(names) == 0 {
		return false // the testing package reports a bad pattern
	}
	for _, n := range names {
		if re.MatchString(n) {
			return false
		}
	}
	return true
}

// topLevelElements splits a -run pattern at the slashes outside brackets
// and parentheses, as the testing package does, joining the elements with
// NUL: the first one selects the top-level tests.
func topLevelElements(pattern string) string {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && i+1 < len(pattern):
			b.WriteByte(c)
			i++
			c = pattern[i]
		case c == '[' || c == '(':
			depth++
		case (c == ']' || c == ')') && depth > 0:
			depth--
		case c == '/' && depth == 0:
			c = 0
		}
		b.WriteByte(c)
	}
	return b.String()
}

var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Example)\w*)\(`)

// testFunctions lists the Test, Fuzz and Example functions of the _test.go
// files in dir.
func testFunctions(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range testFunc.FindAllSubmatch(b, -1) {
			if name := string(m[1]); name != "TestMain" {
				names = append(names, name)
			}
		}
	}
	return names, nil
}
