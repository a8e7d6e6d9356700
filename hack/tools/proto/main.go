// Command protogen compiles .proto files with protocompile (no protoc
// needed) and runs protoc plug-ins on them, writing what they generate
// beside the sources (paths=source_relative). hack/update-proto.sh runs it
// with protoc-gen-go and protoc-gen-go-grpc built from this module.
//
//	protogen -root <dir> -plugin <protoc-gen-x> [-plugin ...] <file.proto relative to root>...
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

type plugins []string

func (p *plugins) String() string     { return strings.Join(*p, ",") }
func (p *plugins) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	root := flag.String("root", ".", "import root; outputs are written under it")
	var plugs plugins
	flag.Var(&plugs, "plugin", "path of a protoc plug-in to run (repeatable)")
	flag.Parse()
	if err := run(*root, plugs, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}

func run(root string, plugs []string, files []string) error {
	if len(files) == 0 || len(plugs) == 0 {
		return fmt.Errorf("need -plugin and .proto files")
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{root}})}
	compiled, err := c.Compile(context.Background(), files...)
	if err != nil {
		return err
	}
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: files, Parameter: proto.String("paths=source_relative")}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range compiled {
		add(f)
	}
	in, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	for _, plug := range plugs {
		cmd := exec.Command(plug)
		var out bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", plug, err)
		}
		var resp pluginpb.CodeGeneratorResponse
		if err := proto.Unmarshal(out.Bytes(), &resp); err != nil {
			return fmt.Errorf("%s: reading its answer: %w", plug, err)
		}
		if resp.Error != nil {
			return fmt.Errorf("%s: %s", plug, resp.GetError())
		}
		for _, f := range resp.File {
			path := filepath.Join(root, f.GetName())
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
