// Package protos holds the external gRPC cloud provider protocol: the .proto
// written from the protocol's wire facts and the Go code generated from it by
// hack/update-proto.sh. It holds no hand-written logic and imports nothing of
// the autoscaler.
package protos
