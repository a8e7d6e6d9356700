package core

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The loop knows ProvisioningRequests, CapacityBuffers, providers and the composition root
// only through the processors and interfaces it is given (doc.go).
func TestCoreImportsNoRequestProviderOrMain(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	const module = "k8s.io/autoscaler/cluster-autoscaler/"
	forbidden := []string{module + "provreq", module + "processors/provreqs", module + "cluster-autoscaler",
		module + "cloudprovider/", module + "capacitybuffer", module + "processors/capacitybuffers"}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if strings.HasPrefix(path, bad) {
					t.Errorf("%s imports %s", f, path)
				}
			}
		}
	}
}
