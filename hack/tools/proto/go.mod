// Module proto pins the protobuf compiler library and the protoc plug-ins
// that hack/update-proto.sh runs to generate the checked-in gRPC code.
module k8s.io/autoscaler/cluster-autoscaler/hack/tools/proto

go 1.26.0

require (
	github.com/bufbuild/protocompile v0.14.1
	google.golang.org/grpc/cmd/protoc-gen-go-grpc v1.6.2
	google.golang.org/protobuf v1.36.12
)

require golang.org/x/sync v0.8.0 // indirect
