package scaleup

import (
	"context"
	"testing"
	"time"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// tickingClock moves on by step every time it is read.
type tickingClock struct {
	t    time.Time
	step time.Duration
}

func (c *tickingClock) Now() time.Time                  { c.t = c.t.Add(c.step); return c.t }
func (c *tickingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// --max-binpacking-time: once a scale-up's estimates used it up, the
// options already estimated are all the expander chooses from.
func TestMaxBinpackingTime(t *testing.T) {
	for _, tc := range []struct {
		budget time.Duration
		want   map[string]int
	}{
		{5 * time.Minute, map[string]int{"b-small": 3}},  // least-waste prefers three small nodes
		{15 * time.Second, map[string]int{"a-large": 1}}, // each group's turn takes 10 s: only the first is estimated
	} {
		provider := fakeprovider.NewProvider()
		provider.AddNodeGroup("a-large", 0, 10, 0, templateNode("a-large", "16"))
		provider.AddNodeGroup("b-small", 0, 10, 0, templateNode("b-small", "4"))
		o := newOrchestrator(t, provider, func(o *Options) { o.MaxBinpackingTime = tc.budget })
		o.clock = &tickingClock{t: time.Now(), step: 10 * time.Second}
		res, err := runLoop(context.Background(), o, Input{Now: time.Now(), Pending: pendingPods(10, "1")})
		if err != nil {
			t.Fatal(err)
		}
		if got := increases(res); len(got) != len(tc.want) || got["a-large"] != tc.want["a-large"] || got["b-small"] != tc.want["b-small"] {
			t.Errorf("budget %v: increases %v, want %v", tc.budget, got, tc.want)
		}
	}
}
