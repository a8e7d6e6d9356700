package explain

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestExplainIsALeaf: the loop's packages import explain, so explain
// imports nothing of this module (doc.go).
func TestExplainIsALeaf(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(path, "k8s.io/autoscaler/cluster-autoscaler") {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}
