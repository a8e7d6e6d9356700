// Package protocheck holds the checked-in code generated from a .proto file
// (hack/update-proto.sh) to that file: a test compiles the .proto afresh
// with protocompile and compares its descriptor with the one the generated
// package embeds, so an edit of either alone fails make test.
package protocheck

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Matches fails t unless the .proto file at path (relative to the
// repository root root, as generated) compiles to the descriptor of
// generated.
func Matches(t testing.TB, root, path string, generated protoreflect.FileDescriptor) {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		ImportPaths: []string{root}})}
	files, err := c.Compile(context.Background(), filepath.ToSlash(path))
	if err != nil {
		t.Fatalf("compiling %s: %v", path, err)
	}
	fresh := protodesc.ToFileDescriptorProto(files[0])
	checkedIn := protodesc.ToFileDescriptorProto(generated)
	// Source positions and comments are not part of the generated code's
	// descriptor.
	fresh.SourceCodeInfo, checkedIn.SourceCodeInfo = nil, nil
	if !proto.Equal(fresh, checkedIn) {
		t.Errorf("the generated code of %s is out of date: run hack/update-proto.sh", path)
	}
}
