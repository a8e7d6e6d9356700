package aws

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// BenchmarkRefresh100Groups5000Instances: one loop's Refresh (and the
// NodeGroups / Nodes / TargetSize calls the core makes of every group) at
// 100 Auto Scaling groups of 50 instances each, through the real SDK and
// the fake over loopback HTTP. It reports the AWS calls per loop.
func BenchmarkRefresh100Groups5000Instances(b *testing.B) {
	s := startFakeTB(b)
	var nodes []string
	for i := range 100 {
		name := fmt.Sprintf("ng-%03d", i)
		s.AddGroup(groupOf(name, 50))
		nodes = append(nodes, "0:100:"+name)
	}
	p := newTestProviderTB(b, nodes, nil)
	ctx := klog.NewContext(context.Background(), logr.Discard())
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := p.Refresh(ctx); err != nil {
			b.Fatal(err)
		}
		if len(p.current().byInstance) == 5000 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d instances listed, want 5000", len(p.current().byInstance))
		}
		time.Sleep(100 * time.Millisecond)
	}
	before := totalCalls(s.Calls())
	b.ResetTimer()
	for range b.N {
		if err := p.Refresh(ctx); err != nil {
			b.Fatal(err)
		}
		groups, _ := p.NodeGroups(ctx)
		for _, g := range groups {
			_, _ = g.TargetSize(ctx)
			_, _ = g.Nodes(ctx)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(totalCalls(s.Calls())-before)/float64(b.N), "calls/loop")
}

func totalCalls(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
