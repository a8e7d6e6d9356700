package externalgrpc

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc/protos"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

func ids(groups []cloudprovider.NodeGroup) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g.Id())
	}
	return out
}

func node(providerID string) *apiv1.Node {
	n := &apiv1.Node{}
	n.Name, n.Spec.ProviderID = providerID, providerID
	return n
}

func TestCachingUntilRefresh(t *testing.T) {
	ctx := context.Background()
	s := newFakeServer()
	s.addGroup("a", 0, 10, 2)
	s.addGroup("b", 1, 5, 1)
	s.gpuLabel = "gpu.example/type"
	p := serve(t, s)

	for loop := 1; loop <= 2; loop++ {
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			groups, err := p.NodeGroups(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"a", "b"}, ids(groups)); diff != "" {
				t.Fatalf("groups (-want +got):\n%s", diff)
			}
			for _, g := range groups {
				if _, err := g.TargetSize(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := g.Nodes(ctx); err != nil {
					t.Fatal(err)
				}
			}
			g, err := p.NodeGroupForNode(ctx, node("a-1"))
			if err != nil || g == nil || g.Id() != "a" {
				t.Fatalf("NodeGroupForNode(a-1) = %v, %v", g, err)
			}
			if g, err := p.NodeGroupForNode(ctx, node("elsewhere")); err != nil || g != nil {
				t.Fatalf("NodeGroupForNode(elsewhere) = %v, %v; want nil, nil", g, err)
			}
			if got := p.GPULabel(); got != "gpu.example/type" {
				t.Errorf("GPULabel = %q", got)
			}
		}
		// Targets and instances are read when the groups are listed and
		// handed to the first caller; the two later rounds ask again.
		want := map[string]int{"Refresh": loop, "NodeGroups": loop, "NodeGroupTargetSize": 6 * loop,
			"NodeGroupNodes": 6 * loop, "GPULabel": 1,
			// a-1 is found among the instances a listed; only the other node is asked about.
			"NodeGroupForNode": loop}
		for rpc, n := range want {
			if got := s.callsOf(rpc); got != n {
				t.Errorf("loop %d: %s called %d times, want %d", loop, rpc, got, n)
			}
		}
	}

	// A change voids the group's cached target and instances.
	groups, _ := p.NodeGroups(ctx)
	if err := groups[0].IncreaseSize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if got, err := groups[0].TargetSize(ctx); err != nil || got != 5 {
		t.Errorf("target after increase = %d, %v; want 5", got, err)
	}
}

func TestTemplateReadOncePerGroupObject(t *testing.T) {
	ctx := context.Background()
	s := newFakeServer()
	s.addGroup("a", 0, 10, 0)
	tmpl := &apiv1.Node{}
	tmpl.Name = "t"
	tmpl.Labels = map[string]string{"pool": "a"}
	b, err := tmpl.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s.templates["a"] = b
	p := serve(t, s)
	groups, err := p.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ni, err := groups[0].TemplateNodeInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ni.Node.Labels["pool"] != "a" {
			t.Errorf("template labels = %v", ni.Node.Labels)
		}
		ni.Node.Labels["pool"] = "changed by the caller"
	}
	if got := s.callsOf("NodeGroupTemplateNodeInfo"); got != 1 {
		t.Errorf("template read %d times, want 1", got)
	}
}

func TestUnimplementedIsNotImplemented(t *testing.T) {
	ctx := context.Background()
	s := newFakeServer()
	s.addGroup("a", 0, 10, 0)
	p := serve(t, s)
	groups, err := p.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := groups[0]
	pm, _ := p.Pricing(ctx)
	_, priceErr := pm.NodePrice(ctx, node("a-0"), time.Now(), time.Now().Add(time.Hour))
	_, tmplErr := g.TemplateNodeInfo(ctx)
	_, optErr := g.GetOptions(ctx, config.NodeGroupAutoscalingOptions{})
	_, hasErr := p.HasInstance(ctx, node("a-0"))
	for name, err := range map[string]error{
		"NodePrice": priceErr, "TemplateNodeInfo": tmplErr, "GetOptions": optErr, "HasInstance": hasErr,
		"AtomicIncreaseSize": g.AtomicIncreaseSize(ctx, 1), "ForceDeleteNodes": g.ForceDeleteNodes(ctx, nil),
	} {
		if !errors.Is(err, cloudprovider.ErrNotImplemented) {
			t.Errorf("%s: err = %v, want ErrNotImplemented", name, err)
		}
	}
	if err := p.Cleanup(ctx); err != nil {
		t.Errorf("Cleanup of a server without it: %v", err)
	}
}

func TestBadAnswersLeaveTheGroupOut(t *testing.T) {
	ctx := context.Background()
	running := &protos.InstanceStatus{InstanceState: protos.InstanceStatus_instanceRunning}
	tests := []struct {
		name   string
		break_ func(s *fakeServer)
	}{
		{"negative min", func(s *fakeServer) { s.groups[1].MinSize = -1 }},
		{"max below min", func(s *fakeServer) { s.groups[1].MinSize = 11 }},
		{"absurd max", func(s *fakeServer) { s.groups[1].MaxSize = MaxSize + 1 }},
		{"no id", func(s *fakeServer) { s.groups[1] = &protos.NodeGroup{MaxSize: 3} }},
		{"duplicate id", func(s *fakeServer) { s.groups = append(s.groups, &protos.NodeGroup{Id: "bad", MaxSize: 9}) }},
		{"negative target", func(s *fakeServer) { s.targets["bad"] = -2 }},
		{"target below instances", func(s *fakeServer) { s.targets["bad"] = 1 }},
		{"duplicate instance", func(s *fakeServer) {
			s.instances["bad"] = append(s.instances["bad"], &protos.Instance{Id: "bad-0", Status: running})
		}},
		{"instance without id", func(s *fakeServer) {
			s.instances["bad"] = append(s.instances["bad"], &protos.Instance{Status: running})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeServer()
			s.addGroup("good", 0, 10, 1)
			s.addGroup("bad", 0, 10, 2)
			tc.break_(s)
			p := serve(t, s)
			groups, err := p.NodeGroups(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"good"}, ids(groups)); diff != "" {
				t.Fatalf("groups (-want +got):\n%s", diff)
			}
			if g, err := p.NodeGroupForNode(ctx, node("bad-1")); err == nil || g != nil {
				t.Errorf("NodeGroupForNode of a left-out group's node = %v, %v; want an error", g, err)
			}
		})
	}
}

func TestBadGroupForNodeAndTemplate(t *testing.T) {
	ctx := context.Background()
	s := newFakeServer()
	s.addGroup("a", 0, 10, 1)
	s.forNode["ghost-1"] = "ghost"
	s.templates["a"] = []byte{0xff, 0x01, 0x02}
	p := serve(t, s)
	if _, err := p.NodeGroupForNode(ctx, node("ghost-1")); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("node of an unlisted group: err = %v, want ErrBadAnswer", err)
	}
	groups, _ := p.NodeGroups(ctx)
	if _, err := groups[0].TemplateNodeInfo(ctx); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("undecodable template: err = %v, want ErrBadAnswer", err)
	}
	// The same group described with other sizes is refused (for a node
	// the group's instances do not list, so the server is asked).
	s.mu.Lock()
	s.groups = []*protos.NodeGroup{{Id: "a", MinSize: 0, MaxSize: 99}}
	s.forNode["a-unlisted"] = "a"
	s.mu.Unlock()
	if _, err := p.NodeGroupForNode(ctx, node("a-unlisted")); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("group described twice differently: err = %v, want ErrBadAnswer", err)
	}
}

func TestDeletionsAreChecked(t *testing.T) {
	ctx := context.Background()
	s := newFakeServer()
	s.addGroup("a", 1, 10, 3)
	s.addGroup("b", 0, 10, 1)
	p := serve(t, s)
	groups, _ := p.NodeGroups(ctx)
	a := groups[0]
	if err := a.DeleteNodes(ctx, []*apiv1.Node{node("a-0"), node("b-0")}); err == nil || !strings.Contains(err.Error(), "not an instance") {
		t.Errorf("deleting a node of another group: err = %v", err)
	}
	if err := a.DeleteNodes(ctx, []*apiv1.Node{node("a-0"), node("a-1"), node("a-2")}); err == nil || !strings.Contains(err.Error(), "minimum") {
		t.Errorf("deleting below min: err = %v", err)
	}
	if err := a.DecreaseTargetSize(ctx, -1); err == nil || !strings.Contains(err.Error(), "live instances") {
		t.Errorf("decreasing below the instances: err = %v", err)
	}
	if n := s.callsOf("NodeGroupDeleteNodes") + s.callsOf("NodeGroupDecreaseTargetSize"); n != 0 {
		t.Fatalf("%d destructive calls reached the server", n)
	}
	if err := a.DeleteNodes(ctx, []*apiv1.Node{node("a-2"), node("a-2")}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a-2"}, s.deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
}

func TestIncreaseErrors(t *testing.T) {
	ctx := context.Background()
	s := newFakeServer()
	s.addGroup("a", 0, 3, 1)
	p := serve(t, s)
	groups, _ := p.NodeGroups(ctx)
	if err := groups[0].IncreaseSize(ctx, 3); err == nil || !strings.Contains(err.Error(), "exceeds max") {
		t.Errorf("increase beyond max: err = %v", err)
	}
	s.increase = status.Error(codes.ResourceExhausted, "no capacity")
	var su *cloudprovider.ScaleUpError
	if err := groups[0].IncreaseSize(ctx, 1); !errors.As(err, &su) || su.Class != cloudprovider.OutOfResourcesErrorClass {
		t.Errorf("ResourceExhausted: err = %v, want an out-of-resources ScaleUpError", err)
	}
	s.increase = status.Error(codes.Unavailable, "down")
	if err := groups[0].IncreaseSize(ctx, 1); !errors.Is(err, cloudprovider.ErrTransient) {
		t.Errorf("Unavailable: err = %v, want ErrTransient", err)
	}
}

func TestServerDownFailsFast(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	p, err := New(context.Background(), &Config{Address: addr, Timeout: Duration{2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.conn.Close() }()
	start := time.Now()
	if err := p.Refresh(context.Background()); !errors.Is(err, cloudprovider.ErrTransient) {
		t.Errorf("Refresh with the server down: err = %v, want ErrTransient", err)
	}
	if _, err := p.NodeGroups(context.Background()); err == nil {
		t.Error("NodeGroups with the server down succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("calls with the server down took %v", d)
	}
}

func TestInstanceStatusMapping(t *testing.T) {
	resp := &protos.NodeGroupNodesResponse{Instances: []*protos.Instance{
		{Id: "plain"},
		{Id: "creating", Status: &protos.InstanceStatus{InstanceState: protos.InstanceStatus_instanceCreating}},
		{Id: "stockout", Status: &protos.InstanceStatus{InstanceState: protos.InstanceStatus_instanceCreating,
			ErrorInfo: &protos.InstanceErrorInfo{ErrorCode: "STOCKOUT", ErrorMessage: "none left", InstanceErrorClass: 1}}},
		{Id: "odd", Status: &protos.InstanceStatus{InstanceState: 42,
			ErrorInfo: &protos.InstanceErrorInfo{ErrorCode: "X", InstanceErrorClass: 7}}},
	}}
	got, err := decodeInstances("g", resp)
	if err != nil {
		t.Fatal(err)
	}
	want := []cloudprovider.Instance{
		{Id: "plain"},
		{Id: "creating", Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}},
		{Id: "stockout", Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating,
			ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "STOCKOUT", ErrorMessage: "none left"}}},
		{Id: "odd", Status: &cloudprovider.InstanceStatus{
			ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OtherErrorClass, ErrorCode: "X"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
}

func TestInstanceClaimedByTwoGroupsAsksTheServer(t *testing.T) {
	ctx := context.Background()
	s := newFakeServer()
	s.addGroup("a", 0, 10, 1)
	s.addGroup("b", 0, 10, 1)
	s.instances["b"] = append(s.instances["b"], &protos.Instance{Id: "a-0"})
	s.targets["b"] = 2
	p := serve(t, s)
	g, err := p.NodeGroupForNode(ctx, node("a-0"))
	if err != nil || g == nil || g.Id() != "a" {
		t.Fatalf("NodeGroupForNode(a-0) = %v, %v; want a", g, err)
	}
	if got := s.callsOf("NodeGroupForNode"); got != 1 {
		t.Errorf("the server was asked %d times, want 1", got)
	}
}

func TestHungServerTimesOut(t *testing.T) {
	s := newFakeServer()
	s.addGroup("a", 0, 10, 1)
	release := make(chan struct{})
	defer close(release)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo,
		h grpc.UnaryHandler) (any, error) {
		// A hung server never answers: the client's own deadline must end
		// the call. (Answering once the server-side deadline passed raced
		// the client's timer and could deliver a success.)
		select {
		case <-release:
			return h(ctx, req)
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}))
	protos.RegisterCloudProviderServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	p, err := New(context.Background(), &Config{Address: lis.Addr().String(), Timeout: Duration{300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.conn.Close() }()
	start := time.Now()
	if err := p.Refresh(context.Background()); !errors.Is(err, cloudprovider.ErrTransient) {
		t.Errorf("Refresh of a hung server: err = %v, want a transient timeout", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Refresh of a hung server took %v with a 300ms timeout", d)
	}
}

func TestBadListingNeverDeletes(t *testing.T) {
	ctx := context.Background()
	s := newFakeServer()
	s.addGroup("a", 0, 10, 2)
	p := serve(t, s)
	groups, err := p.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// After the listing the server starts answering nonsense.
	s.mu.Lock()
	s.instances["a"] = append(s.instances["a"], &protos.Instance{Id: "a-0"})
	s.mu.Unlock()
	if err := groups[0].DeleteNodes(ctx, []*apiv1.Node{node("a-0")}); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("DeleteNodes over a bad listing: err = %v, want ErrBadAnswer", err)
	}
	s.mu.Lock()
	s.instances["a"] = s.instances["a"][:2]
	s.targets["a"] = -1
	s.mu.Unlock()
	if err := groups[0].DeleteNodes(ctx, []*apiv1.Node{node("a-0")}); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("DeleteNodes with a negative target: err = %v, want ErrBadAnswer", err)
	}
	if err := groups[0].DecreaseTargetSize(ctx, -1); !errors.Is(err, ErrBadAnswer) {
		t.Errorf("DecreaseTargetSize with a negative target: err = %v, want ErrBadAnswer", err)
	}
	if n := s.callsOf("NodeGroupDeleteNodes") + s.callsOf("NodeGroupDecreaseTargetSize"); n != 0 {
		t.Errorf("%d destructive calls reached the server", n)
	}
}
