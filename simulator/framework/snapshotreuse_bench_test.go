package framework

import (
	"fmt"
	"testing"

	apiv1 "k8s.io/api/core/v1"
)

// BenchmarkResetUnchanged times a Reset given the same Node and pod objects
// as the one before (a quiet loop's), shuffled as the informers list them.
//
//	go test -run '^$' -bench BenchmarkResetUnchanged -benchmem ./simulator/framework
func BenchmarkResetUnchanged(b *testing.B) {
	for _, size := range []struct{ nodes, perNode int }{{1000, 10}, {15000, 30}} {
		b.Run(fmt.Sprintf("nodes=%d,pods=%d", size.nodes, size.nodes*size.perNode), func(b *testing.B) {
			var nodes []*apiv1.Node
			var pods []*apiv1.Pod
			for i := range size.nodes {
				n := makeNode(fmt.Sprintf("node-%05d", i), "16").Obj()
				nodes = append(nodes, n)
				for j := range size.perNode {
					pods = append(pods, makePod(fmt.Sprintf("p-%d-%d", i, j), "300m").On(n.Name).Obj())
				}
			}
			// Another order than the nodes': pod j of every node, then j+1.
			order := make([]*apiv1.Pod, 0, len(pods))
			for j := range size.perNode {
				for i := range size.nodes {
					order = append(order, pods[i*size.perNode+j])
				}
			}
			s := NewSnapshot(nodes, order)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				s.Reset(nodes, order)
			}
		})
	}
}
