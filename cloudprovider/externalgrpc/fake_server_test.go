package externalgrpc

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc/protos"
)

// fakeServer is an in-process server whose answers the test sets; it
// counts the calls of each RPC.
type fakeServer struct {
	protos.UnimplementedCloudProviderServer

	mu        sync.Mutex
	groups    []*protos.NodeGroup
	targets   map[string]int32
	instances map[string][]*protos.Instance
	templates map[string][]byte
	forNode   map[string]string // provider id -> group id
	gpuLabel  string
	increase  error
	deleted   []string
	calls     map[string]int
}

func newFakeServer() *fakeServer {
	return &fakeServer{targets: map[string]int32{}, instances: map[string][]*protos.Instance{},
		templates: map[string][]byte{}, forNode: map[string]string{}, calls: map[string]int{}}
}

// addGroup adds a group of n running instances "<id>-<i>".
func (s *fakeServer) addGroup(id string, min, max, n int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups = append(s.groups, &protos.NodeGroup{Id: id, MinSize: min, MaxSize: max})
	s.targets[id] = n
	for i := int32(0); i < n; i++ {
		iid := id + "-" + itoa(int(i))
		s.instances[id] = append(s.instances[id], &protos.Instance{Id: iid,
			Status: &protos.InstanceStatus{InstanceState: protos.InstanceStatus_instanceRunning}})
		s.forNode[iid] = id
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

func (s *fakeServer) count(rpc string) {
	s.mu.Lock()
	s.calls[rpc]++
	s.mu.Unlock()
}

func (s *fakeServer) callsOf(rpc string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[rpc]
}

func (s *fakeServer) group(id string) *protos.NodeGroup {
	for _, g := range s.groups {
		if g.Id == id {
			return g
		}
	}
	return nil
}

func (s *fakeServer) NodeGroups(context.Context, *protos.NodeGroupsRequest) (*protos.NodeGroupsResponse, error) {
	s.count("NodeGroups")
	s.mu.Lock()
	defer s.mu.Unlock()
	return &protos.NodeGroupsResponse{NodeGroups: s.groups}, nil
}

func (s *fakeServer) NodeGroupForNode(_ context.Context, req *protos.NodeGroupForNodeRequest) (*protos.NodeGroupForNodeResponse, error) {
	s.count("NodeGroupForNode")
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.forNode[req.GetNode().GetProviderID()]
	if g := s.group(id); g != nil {
		return &protos.NodeGroupForNodeResponse{NodeGroup: g}, nil
	}
	return &protos.NodeGroupForNodeResponse{NodeGroup: &protos.NodeGroup{Id: id}}, nil
}

func (s *fakeServer) GPULabel(context.Context, *protos.GPULabelRequest) (*protos.GPULabelResponse, error) {
	s.count("GPULabel")
	return &protos.GPULabelResponse{Label: s.gpuLabel}, nil
}

func (s *fakeServer) Refresh(context.Context, *protos.RefreshRequest) (*protos.RefreshResponse, error) {
	s.count("Refresh")
	return &protos.RefreshResponse{}, nil
}

func (s *fakeServer) NodeGroupTargetSize(_ context.Context, req *protos.NodeGroupTargetSizeRequest) (*protos.NodeGroupTargetSizeResponse, error) {
	s.count("NodeGroupTargetSize")
	s.mu.Lock()
	defer s.mu.Unlock()
	return &protos.NodeGroupTargetSizeResponse{TargetSize: s.targets[req.GetId()]}, nil
}

func (s *fakeServer) NodeGroupIncreaseSize(_ context.Context, req *protos.NodeGroupIncreaseSizeRequest) (*protos.NodeGroupIncreaseSizeResponse, error) {
	s.count("NodeGroupIncreaseSize")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.increase != nil {
		return nil, s.increase
	}
	s.targets[req.GetId()] += req.GetDelta()
	return &protos.NodeGroupIncreaseSizeResponse{}, nil
}

func (s *fakeServer) NodeGroupDeleteNodes(_ context.Context, req *protos.NodeGroupDeleteNodesRequest) (*protos.NodeGroupDeleteNodesResponse, error) {
	s.count("NodeGroupDeleteNodes")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range req.GetNodes() {
		s.deleted = append(s.deleted, n.GetProviderID())
	}
	return &protos.NodeGroupDeleteNodesResponse{}, nil
}

func (s *fakeServer) NodeGroupDecreaseTargetSize(_ context.Context, req *protos.NodeGroupDecreaseTargetSizeRequest) (*protos.NodeGroupDecreaseTargetSizeResponse, error) {
	s.count("NodeGroupDecreaseTargetSize")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targets[req.GetId()] += req.GetDelta()
	return &protos.NodeGroupDecreaseTargetSizeResponse{}, nil
}

func (s *fakeServer) NodeGroupNodes(_ context.Context, req *protos.NodeGroupNodesRequest) (*protos.NodeGroupNodesResponse, error) {
	s.count("NodeGroupNodes")
	s.mu.Lock()
	defer s.mu.Unlock()
	return &protos.NodeGroupNodesResponse{Instances: s.instances[req.GetId()]}, nil
}

func (s *fakeServer) NodeGroupTemplateNodeInfo(_ context.Context, req *protos.NodeGroupTemplateNodeInfoRequest) (*protos.NodeGroupTemplateNodeInfoResponse, error) {
	s.count("NodeGroupTemplateNodeInfo")
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.templates[req.GetId()]
	if !ok {
		return nil, status.Error(codes.Unimplemented, "no templates")
	}
	return &protos.NodeGroupTemplateNodeInfoResponse{NodeBytes: b}, nil
}

// serve runs s on a loopback listener and returns a provider connected to it.
func serve(t testing.TB, s *fakeServer, opts ...grpc.ServerOption) *Provider {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	protos.RegisterCloudProviderServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	p, err := New(context.Background(), &Config{Address: lis.Addr().String(), Timeout: Duration{2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.conn.Close() })
	return p
}
