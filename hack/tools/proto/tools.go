//go:build tools

// The plug-ins hack/update-proto.sh builds from this module.
package main

import (
	_ "google.golang.org/grpc/cmd/protoc-gen-go-grpc"
	_ "google.golang.org/protobuf/cmd/protoc-gen-go"
)
