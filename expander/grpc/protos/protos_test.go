package protos

import (
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/test/protocheck"
)

func TestGeneratedCodeMatchesTheProto(t *testing.T) {
	protocheck.Matches(t, "../../..", "expander/grpc/protos/expander.proto", File_expander_grpc_protos_expander_proto)
}
