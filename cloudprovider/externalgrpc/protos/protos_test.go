package protos

import (
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/test/protocheck"
)

func TestGeneratedCodeMatchesTheProto(t *testing.T) {
	protocheck.Matches(t, "../../..", "cloudprovider/externalgrpc/protos/externalgrpc.proto",
		File_cloudprovider_externalgrpc_protos_externalgrpc_proto)
}
