package externalgrpc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// BenchmarkLoop measures the provider's share of one autoscaler loop against
// an in-process server on a loopback listener: 100 node groups of 50
// instances each (5,000 in all), each registered as a node. One loop is what
// clusterstate and the planners ask: Refresh, the groups, each group's target
// size, options and instances, and the group of every node.
func BenchmarkLoop(b *testing.B) { benchmarkLoop(b, 0) }

// BenchmarkLoopRemote is BenchmarkLoop with 1 ms added to every call, as a
// server across a network would.
func BenchmarkLoopRemote(b *testing.B) { benchmarkLoop(b, time.Millisecond) }

func benchmarkLoop(b *testing.B, latency time.Duration) {
	const groups, perGroup = 100, 50
	s := newFakeServer()
	var nodes []*apiv1.Node
	for g := range groups {
		id := fmt.Sprintf("group-%03d", g)
		s.addGroup(id, 0, 1000, perGroup)
		for i := range perGroup {
			nodes = append(nodes, node(fmt.Sprintf("%s-%d", id, i)))
		}
	}
	p := serve(b, s, grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo,
		h grpc.UnaryHandler) (any, error) {
		time.Sleep(latency)
		return h(ctx, req)
	}))
	ctx := context.Background()
	defaults := config.NodeGroupAutoscalingOptions{}
	loop := func() {
		if err := p.Refresh(ctx); err != nil {
			b.Fatal(err)
		}
		ngs, err := p.NodeGroups(ctx)
		if err != nil || len(ngs) != groups {
			b.Fatalf("NodeGroups: %d, %v", len(ngs), err)
		}
		for _, ng := range ngs {
			if _, err := ng.TargetSize(ctx); err != nil {
				b.Fatal(err)
			}
			_, _ = ng.GetOptions(ctx, defaults)
			if ins, err := ng.Nodes(ctx); err != nil || len(ins) != perGroup {
				b.Fatalf("Nodes: %d, %v", len(ins), err)
			}
		}
		for _, n := range nodes {
			if g, err := p.NodeGroupForNode(ctx, n); err != nil || g == nil {
				b.Fatalf("NodeGroupForNode(%s): %v, %v", n.Name, g, err)
			}
		}
		// The planners ask again within the loop: served from the caches.
		for _, n := range nodes {
			if _, err := p.NodeGroupForNode(ctx, n); err != nil {
				b.Fatal(err)
			}
		}
	}
	loop() // warm the connection
	start := p.Calls()
	b.ResetTimer()
	for range b.N {
		loop()
	}
	b.StopTimer()
	b.ReportMetric(float64(p.Calls()-start)/float64(b.N), "calls/loop")
}
