package main

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc/protos"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// TestRoundTrip serves the fake provider with this server and reads it back
// through the externalgrpc client: what goes in comes out.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	fp := fake.NewProvider()
	tmpl := &apiv1.Node{}
	tmpl.Name = "tmpl"
	tmpl.Labels = map[string]string{"pool": "a"}
	a := fp.AddNodeGroup("a", 0, 5, 2, tmpl)
	fp.AddNodeGroup("b", 1, 3, 0, nil)
	for _, name := range []string{"a-1", "a-2"} {
		n := &apiv1.Node{}
		n.Name = name
		fp.AddNode("a", n)
	}
	stockout := &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating, ErrorInfo: &cloudprovider.InstanceErrorInfo{
		ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "STOCKOUT", ErrorMessage: "none"}}
	fp.SetInstanceStatus("a", "fake://a-2", stockout)
	opts := config.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.3, ScaleDownUnneededTime: 3 * time.Minute,
		ZeroOrMaxNodeScaling: true}
	a.SetOptions(&opts)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	protos.RegisterCloudProviderServer(srv, newServer(fp))
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	p, err := externalgrpc.New(ctx, &externalgrpc.Config{Address: lis.Addr().String(), Timeout: externalgrpc.Duration{Duration: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.GPULabel(); got != "fake.gpu/type" {
		t.Errorf("GPULabel = %q", got)
	}
	groups, err := p.NodeGroups(ctx)
	if err != nil || len(groups) != 2 {
		t.Fatalf("NodeGroups = %v, %v", groups, err)
	}
	ga, gb := groups[0], groups[1]
	if ga.Id() != "a" || ga.MaxSize() != 5 || gb.MinSize() != 1 {
		t.Errorf("groups %s %d, %s %d", ga.Id(), ga.MaxSize(), gb.Id(), gb.MinSize())
	}
	ins, err := ga.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []cloudprovider.Instance{{Id: "fake://a-1", Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}},
		{Id: "fake://a-2", Status: stockout}}
	if diff := cmp.Diff(want, ins); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
	ni, err := ga.TemplateNodeInfo(ctx)
	if err != nil || ni.Node.Labels["pool"] != "a" {
		t.Errorf("template of a = %v, %v", ni, err)
	}
	if _, err := gb.TemplateNodeInfo(ctx); !errors.Is(err, cloudprovider.ErrNotImplemented) {
		t.Errorf("template of b: err = %v, want ErrNotImplemented", err)
	}
	got, err := ga.GetOptions(ctx, config.NodeGroupAutoscalingOptions{ScaleDownUnreadyTime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&opts, got); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
	if _, err := gb.GetOptions(ctx, config.NodeGroupAutoscalingOptions{}); !errors.Is(err, cloudprovider.ErrNotImplemented) {
		t.Errorf("options of b: err = %v, want ErrNotImplemented", err)
	}
	n1 := &apiv1.Node{}
	n1.Name, n1.Spec.ProviderID = "a-1", "fake://a-1"
	if g, err := p.NodeGroupForNode(ctx, n1); err != nil || g == nil || g.Id() != "a" {
		t.Errorf("NodeGroupForNode(a-1) = %v, %v", g, err)
	}
	if err := ga.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fp.InjectIncreaseError("a", cloudprovider.NewOutOfResourcesError("STOCKOUT", errors.New("none left")), 1, false)
	var su *cloudprovider.ScaleUpError
	if err := ga.IncreaseSize(ctx, 1); !errors.As(err, &su) || su.Class != cloudprovider.OutOfResourcesErrorClass {
		t.Errorf("increase out of resources: err = %v, want an out-of-resources ScaleUpError", err)
	}
	if err := ga.DeleteNodes(ctx, []*apiv1.Node{n1}); err != nil {
		t.Fatal(err)
	}
	if target, err := ga.TargetSize(ctx); err != nil || target != 2 {
		t.Errorf("target after +1 and -1 = %d, %v; want 2", target, err)
	}
}
