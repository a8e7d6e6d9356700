package externalgrpc

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc/protos"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// FuzzDecodeReplies feeds arbitrary bytes to the decoding and validation of
// every reply the provider reads: it must return an error or a valid value,
// never panic. The seeds run under plain go test.
func FuzzDecodeReplies(f *testing.F) {
	seed := func(m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(&protos.NodeGroupsResponse{NodeGroups: []*protos.NodeGroup{{Id: "a", MinSize: 1, MaxSize: 3}, {Id: "a", MinSize: -1}}})
	seed(&protos.NodeGroupNodesResponse{Instances: []*protos.Instance{{Id: "x", Status: &protos.InstanceStatus{
		InstanceState: 2, ErrorInfo: &protos.InstanceErrorInfo{ErrorCode: "STOCKOUT", InstanceErrorClass: 1}}}, {Id: "x"}}})
	seed(&protos.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.5, ScaleDownUnneededDuration: durationpb.New(-1)})
	node := &apiv1.Node{}
	node.Name = "template"
	node.Labels = map[string]string{"a": "b"}
	nb, err := node.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	seed(&protos.NodeGroupTemplateNodeInfoResponse{NodeBytes: nb})
	f.Add(nb)
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, b []byte) {
		groups := &protos.NodeGroupsResponse{}
		if proto.Unmarshal(b, groups) == nil {
			count := map[string]int{}
			for _, g := range groups.GetNodeGroups() {
				count[g.GetId()]++
			}
			for _, g := range groups.GetNodeGroups() {
				if checkGroup(g, count[g.GetId()]) == nil && (g.GetMinSize() < 0 || g.GetMaxSize() < g.GetMinSize()) {
					t.Fatalf("accepted group %v", g)
				}
			}
		}
		nodes := &protos.NodeGroupNodesResponse{}
		if proto.Unmarshal(b, nodes) == nil {
			if ins, err := decodeInstances("g", nodes); err == nil {
				seen := map[string]bool{}
				for _, in := range ins {
					if in.Id == "" || seen[in.Id] {
						t.Fatalf("accepted instances %v", ins)
					}
					seen[in.Id] = true
				}
			}
		}
		opts := &protos.NodeGroupAutoscalingOptions{}
		if proto.Unmarshal(b, opts) == nil {
			if o, err := decodeOptions("g", opts, config.NodeGroupAutoscalingOptions{}); err == nil && o != nil &&
				(o.ScaleDownUnneededTime < 0 || o.ScaleDownUtilizationThreshold > 1) {
				t.Fatalf("accepted options %+v", o)
			}
		}
		tmpl := &protos.NodeGroupTemplateNodeInfoResponse{}
		if proto.Unmarshal(b, tmpl) == nil {
			if n, err := decodeTemplate("g", tmpl.GetNodeBytes()); err == nil && (n == nil || n.Name == "") {
				t.Fatalf("accepted template %v", n)
			}
		}
		if n, err := decodeTemplate("g", b); err == nil && n == nil {
			t.Fatal("nil template without an error")
		}
	})
}
