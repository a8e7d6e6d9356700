package grpc

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"k8s.io/autoscaler/cluster-autoscaler/expander/grpc/protos"
)

// Whatever bytes a server sends back, decoding and mapping them to the
// options sent never panics, and what is chosen is among those options.
func FuzzBestOptionsReply(f *testing.F) {
	for _, r := range []*protos.BestOptionsResponse{
		{},
		{Options: []*protos.Option{{NodeGroupId: "b", NodeCount: 3}}},
		{Options: []*protos.Option{{NodeGroupId: "a"}, {NodeGroupId: "a"}, {NodeGroupId: "c", NodeCount: -1}}},
		{Options: []*protos.Option{{NodeGroupId: "zzz", PodBytes: [][]byte{{0xff}}}}},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		options, _ := world(t)
		var resp protos.BestOptionsResponse
		if err := proto.Unmarshal(data, &resp); err != nil {
			return // the gRPC layer rejects it before us
		}
		got, reason, err := pick(options, &resp)
		if err != nil {
			if reason == "" {
				t.Errorf("error %v without a fallback reason", err)
			}
			return
		}
		if len(got) == 0 {
			t.Error("no option and no error")
		}
		sent := map[string]bool{"a": true, "b": true, "c": true}
		for _, o := range got {
			if !sent[o.NodeGroup.Id()] {
				t.Errorf("chose %s, which was not sent", o.NodeGroup.Id())
			}
		}
	})
}
