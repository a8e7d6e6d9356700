package grpc

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/expander/grpc/protos"
	"k8s.io/autoscaler/cluster-autoscaler/test/certs"
)

// fakeServer answers as told and records what it received.
type fakeServer struct {
	protos.UnimplementedExpanderServer
	answer func(*protos.BestOptionsRequest) (*protos.BestOptionsResponse, error)
	mu     sync.Mutex
	got    *protos.BestOptionsRequest
}

func (s *fakeServer) BestOptions(ctx context.Context, req *protos.BestOptionsRequest) (*protos.BestOptionsResponse, error) {
	s.mu.Lock()
	s.got = req
	s.mu.Unlock()
	return s.answer(req)
}

// serve starts s on a loopback port (TLS when creds is set) and returns its address.
func serve(t *testing.T, s *fakeServer, opts ...grpclib.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpclib.NewServer(opts...)
	protos.RegisterExpanderServer(g, s)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

type counted struct {
	mu      sync.Mutex
	reasons []string
}

func (c *counted) ExpanderFallback(expander, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reasons = append(c.reasons, expander+"/"+reason)
}

// firstOnly is a fallback filter that keeps the first option.
type firstOnly struct{}

func (firstOnly) BestOptions(_ context.Context, o []expander.Option, _ map[string]*cloudprovider.NodeInfo) []expander.Option {
	return o[:1]
}

// world is three options over groups a, b, c with templates labelled by price.
func world(t *testing.T) ([]expander.Option, map[string]*cloudprovider.NodeInfo) {
	provider := fakeprovider.NewProvider()
	var options []expander.Option
	infos := map[string]*cloudprovider.NodeInfo{}
	for i, id := range []string{"a", "b", "c"} {
		node := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "template-" + id, Labels: map[string]string{"price": fmt.Sprint(3 - i)}}}
		ng := provider.AddNodeGroup(id, 0, 10, 0, node)
		pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-" + id}}
		options = append(options, expander.Option{NodeGroup: ng, NodeCount: i + 1, Pods: []*apiv1.Pod{pod}, Debug: id})
		infos[id] = &cloudprovider.NodeInfo{Node: node}
	}
	return options, infos
}

func ids(options []expander.Option) string {
	var out []string
	for _, o := range options {
		out = append(out, o.NodeGroup.Id())
	}
	return strings.Join(out, ",")
}

func choose(id string) func(*protos.BestOptionsRequest) (*protos.BestOptionsResponse, error) {
	return func(*protos.BestOptionsRequest) (*protos.BestOptionsResponse, error) {
		return &protos.BestOptionsResponse{Options: []*protos.Option{{NodeGroupId: id, NodeCount: 99}}}, nil
	}
}

// The server's choice is taken; what it was sent is the options and the
// templates in the Kubernetes protobuf encoding.
func TestTheServersChoiceIsTaken(t *testing.T) {
	s := &fakeServer{answer: choose("b")}
	addr := serve(t, s)
	m := &counted{}
	e, err := New(Options{URL: addr, Timeout: 5 * time.Second}, firstOnly{}, m)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	options, infos := world(t)
	got := e.BestOptions(context.Background(), options, infos)
	if ids(got) != "b" || got[0].NodeCount != 2 {
		t.Fatalf("chose %s (count %d), want b with its own count 2", ids(got), got[0].NodeCount)
	}
	if len(m.reasons) != 0 {
		t.Errorf("fallbacks counted: %v", m.reasons)
	}
	req := s.got
	if len(req.GetOptions()) != 3 || req.GetOptions()[1].GetNodeCount() != 2 || req.GetOptions()[1].GetDebug() != "b" {
		t.Fatalf("request options %v", req.GetOptions())
	}
	var node apiv1.Node
	if err := node.Unmarshal(req.GetNodeBytesMap()["c"]); err != nil || node.Labels["price"] != "1" {
		t.Errorf("template of c decoded to %v (%v), want its price label", node.Labels, err)
	}
	var pod apiv1.Pod
	if err := pod.Unmarshal(req.GetOptions()[0].GetPodBytes()[0]); err != nil || pod.Name != "p-a" {
		t.Errorf("pod bytes decoded to %q (%v), want p-a", pod.Name, err)
	}
}

// Every way the server can fail to choose falls back and is counted.
func TestBadAnswersFallBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(*protos.BestOptionsRequest) (*protos.BestOptionsResponse, error)
		reason string
	}{
		{"error", func(*protos.BestOptionsRequest) (*protos.BestOptionsResponse, error) {
			return nil, status.Error(codes.Internal, "broken")
		}, ReasonError},
		{"empty", func(*protos.BestOptionsRequest) (*protos.BestOptionsResponse, error) {
			return &protos.BestOptionsResponse{}, nil
		}, ReasonEmpty},
		{"unknown node group", choose("zzz"), ReasonUnknownGroup},
		{"timeout", func(*protos.BestOptionsRequest) (*protos.BestOptionsResponse, error) {
			time.Sleep(time.Second)
			return nil, nil
		}, ReasonTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t, &fakeServer{answer: tc.answer})
			options, infos := world(t)
			// With a fallback filter (grpc ends the chain): it decides.
			m := &counted{}
			e, err := New(Options{URL: addr, Timeout: 200 * time.Millisecond}, firstOnly{}, m)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if got := ids(e.BestOptions(context.Background(), options, infos)); got != "a" {
				t.Errorf("with a fallback filter: %s, want a (the fallback's)", got)
			}
			// Without (others follow grpc): every option goes on.
			e2, err := New(Options{URL: addr, Timeout: 200 * time.Millisecond}, nil, m)
			if err != nil {
				t.Fatal(err)
			}
			defer e2.Close()
			if got := ids(e2.BestOptions(context.Background(), options, infos)); got != "a,b,c" {
				t.Errorf("without a fallback filter: %s, want all", got)
			}
			want := "grpc/" + tc.reason
			if len(m.reasons) != 2 || m.reasons[0] != want || m.reasons[1] != want {
				t.Errorf("fallbacks counted %v, want two %s", m.reasons, want)
			}
		})
	}
}

// A server that is down when the autoscaler starts is no start-up error;
// calls fall back until it is up.
func TestServerDownAtStartUp(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	m := &counted{}
	e, err := New(Options{URL: addr, Timeout: time.Second}, firstOnly{}, m)
	if err != nil {
		t.Fatalf("New with the server down: %v", err)
	}
	defer e.Close()
	options, infos := world(t)
	if got := ids(e.BestOptions(context.Background(), options, infos)); got != "a" || len(m.reasons) != 1 {
		t.Errorf("server down: %s, fallbacks %v; want the fallback's a, one fallback", got, m.reasons)
	}
}

// TLS: the server's certificate is checked against --grpc-expander-cert.
func TestTLS(t *testing.T) {
	f := certs.Write(t, t.TempDir())
	creds, err := credentials.NewServerTLSFromFile(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, &fakeServer{answer: choose("c")}, grpclib.Creds(creds))
	m := &counted{}
	e, err := New(Options{URL: addr, CertFile: f.CA, Timeout: 5 * time.Second}, firstOnly{}, m)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	options, infos := world(t)
	if got := ids(e.BestOptions(context.Background(), options, infos)); got != "c" || len(m.reasons) != 0 {
		t.Errorf("over TLS: %s, fallbacks %v; want c and none", got, m.reasons)
	}
	// A client that trusts another CA does not talk to it.
	other := certs.Write(t, t.TempDir())
	e2, err := New(Options{URL: addr, CertFile: other.CA, Timeout: 5 * time.Second}, firstOnly{}, m)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if got := ids(e2.BestOptions(context.Background(), options, infos)); got != "a" || len(m.reasons) != 1 {
		t.Errorf("untrusted server: %s, fallbacks %v; want the fallback's a", got, m.reasons)
	}
	if _, err := New(Options{URL: addr, CertFile: "/no/such/file", Timeout: time.Second}, nil, m); err == nil {
		t.Error("a missing certificate file is no error")
	}
}

func TestServerName(t *testing.T) {
	for in, want := range map[string]string{"127.0.0.1:7000": "127.0.0.1", "dns:///expander.svc:7000": "expander.svc",
		"expander.svc:7000": "expander.svc", "[::1]:7000": "::1"} {
		if got := serverName(in); got != want {
			t.Errorf("serverName(%q) = %q, want %q", in, got, want)
		}
	}
}
