package clusterstate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func node(name string, ready bool, created time.Time) *apiv1.Node {
	status := apiv1.ConditionFalse
	if ready {
		status = apiv1.ConditionTrue
	}
	return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Status: apiv1.NodeStatus{Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: status}}}}
}

// addNodes registers n nodes of group id, ready or not, created at created.
func addNodes(p *fakeprovider.Provider, id string, n int, ready bool, created time.Time) []*apiv1.Node {
	var out []*apiv1.Node
	for i := 0; i < n; i++ {
		nd := node(fmt.Sprintf("%s-%t-%d", id, ready, i), ready, created)
		p.AddNode(id, nd)
		out = append(out, nd)
	}
	return out
}

func update(t *testing.T, r *Registry, p cloudprovider.CloudProvider, nodes []*apiv1.Node, now time.Time) {
	t.Helper()
	if err := r.Update(context.Background(), p, nodes, now); err != nil {
		t.Fatal(err)
	}
}

func TestRegistryCountsAndScaleUpLifecycle(t *testing.T) {
	ctx := context.Background()
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("a", 0, 10, 2, nil)
	nodes := addNodes(p, "a", 2, true, t0.Add(-time.Hour))
	r := NewRegistry(DefaultOptions())
	update(t, r, p, nodes, t0)
	if c := r.Group("a").Counts; c.Ready != 2 || c.Registered() != 2 || c.Unregistered != 0 {
		t.Fatalf("counts %+v, want 2 ready", c)
	}

	// Scale up by 2: two instances without nodes.
	ngs, _ := p.NodeGroups(ctx)
	if err := ngs[0].IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	r.RegisterScaleUp("a", 2, t0)
	update(t, r, p, nodes, t0.Add(10*time.Second))
	gs := r.Group("a")
	if gs.Counts.Unregistered != 2 || gs.ScaleUp == nil || !r.ScaleUpInProgress() {
		t.Fatalf("after the increase: counts %+v, scale-up %+v; want 2 unregistered and a request", gs.Counts, gs.ScaleUp)
	}

	// One registers (not ready yet: not started), the other never does.
	instances, _ := ngs[0].Nodes(ctx)
	late := node("a-new-1", false, t0.Add(time.Minute))
	late.Spec.ProviderID = instances[2].Id
	nodes = append(nodes, late)
	update(t, r, p, nodes, t0.Add(2*time.Minute))
	gs = r.Group("a")
	if gs.Counts.NotStarted != 1 || gs.Counts.Unregistered != 1 || len(gs.NotStartedNodes) != 1 {
		t.Fatalf("counts %+v, want 1 not started and 1 unregistered", gs.Counts)
	}

	// Past the provision time (15m) the request times out: back-off with
	// reason timeout, and the missing instance is long unregistered.
	update(t, r, p, nodes, t0.Add(16*time.Minute))
	gs = r.Group("a")
	f := r.Failures()
	if len(f) != 1 || f[0].Reason.ErrorCode != TimeoutErrorCode || !gs.BackedOff || gs.ScaleUp != nil {
		t.Fatalf("failures %+v, backed off %v, request %+v; want one timeout back-off and no request", f, gs.BackedOff, gs.ScaleUp)
	}
	if gs.Counts.LongUnregistered != 1 || gs.Counts.Unregistered != 0 {
		t.Errorf("counts %+v, want the missing instance long unregistered", gs.Counts)
	}
	if c := r.ClusterCounts(); c.LongUnregistered != 1 || c.Ready != 2 {
		t.Errorf("cluster counts %+v", c)
	}
	// The failure is reported once.
	update(t, r, p, nodes, t0.Add(17*time.Minute))
	if f := r.Failures(); len(f) != 0 {
		t.Errorf("failures reported again: %+v", f)
	}
}

func TestRegistryFulfilledScaleUpEnds(t *testing.T) {
	ctx := context.Background()
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("a", 0, 10, 0, nil)
	ngs, _ := p.NodeGroups(ctx)
	_ = ngs[0].IncreaseSize(ctx, 1)
	r := NewRegistry(DefaultOptions())
	update(t, r, p, nil, t0)
	r.RegisterScaleUp("a", 1, t0)
	instances, _ := ngs[0].Nodes(ctx)
	n := node("a-1", true, t0.Add(time.Minute))
	n.Spec.ProviderID = instances[0].Id
	update(t, r, p, []*apiv1.Node{n}, t0.Add(time.Minute))
	if r.ScaleUpInProgress() || r.Group("a").ScaleUp != nil {
		t.Error("a scale-up whose node registered is still in progress")
	}
	update(t, r, p, []*apiv1.Node{n}, t0.Add(time.Hour))
	if f := r.Failures(); len(f) != 0 {
		t.Errorf("a fulfilled scale-up timed out: %+v", f)
	}
}

func TestRegistryCreationFailureBacksOffOnce(t *testing.T) {
	ctx := context.Background()
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("a", 0, 10, 0, nil)
	ngs, _ := p.NodeGroups(ctx)
	_ = ngs[0].IncreaseSize(ctx, 2)
	instances, _ := ngs[0].Nodes(ctx)
	p.SetInstanceStatus("a", instances[0].Id, &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating,
		ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "STOCKOUT",
			ErrorMessage: strings.Repeat("x", 600)}})
	r := NewRegistry(DefaultOptions())
	update(t, r, p, nil, t0)
	gs := r.Group("a")
	if gs.Counts.Failed != 1 || gs.Counts.Unregistered != 1 || !gs.BackedOff || gs.BackoffReason.ErrorCode != "STOCKOUT" {
		t.Fatalf("counts %+v backed off %v %+v", gs.Counts, gs.BackedOff, gs.BackoffReason)
	}
	if f := r.Failures(); len(f) != 1 || f[0].Class != cloudprovider.OutOfResourcesErrorClass.String() {
		t.Errorf("failures %+v", f)
	}
	update(t, r, p, nil, t0.Add(10*time.Second))
	if f := r.Failures(); len(f) != 0 {
		t.Errorf("the same failed instance counted twice: %+v", f)
	}
	// The status says Backoff with the truncated message.
	st := r.Status(t0.Add(10*time.Second), nil)
	up := st.NodeGroups[0].ScaleUp
	if up.Status != ScaleUpBackoff || !strings.HasSuffix(up.BackoffInfo.ErrorMessage, "<truncated>") ||
		len(up.BackoffInfo.ErrorMessage) != maxStatusMessage+len("<truncated>") {
		t.Errorf("scale-up status %+v", up)
	}
}

func TestRegistryHealth(t *testing.T) {
	for _, tc := range []struct {
		name           string
		ready, unready int
		okCount        int
		pct            float64
		healthy        bool
	}{
		{name: "few unready", ready: 1, unready: 3, okCount: 3, pct: 45, healthy: true},
		{name: "over count but under percentage", ready: 10, unready: 4, okCount: 3, pct: 45, healthy: true},
		{name: "over both", ready: 4, unready: 4, okCount: 3, pct: 45, healthy: false},
		{name: "zero tolerance", ready: 9, unready: 1, okCount: 0, pct: 0, healthy: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fakeprovider.NewProvider()
			p.AddNodeGroup("a", 0, 100, tc.ready+tc.unready, nil)
			nodes := append(addNodes(p, "a", tc.ready, true, t0.Add(-time.Hour)),
				addNodes(p, "a", tc.unready, false, t0.Add(-time.Hour))...)
			opts := DefaultOptions()
			opts.OkTotalUnreadyCount, opts.MaxTotalUnreadyPercentage = tc.okCount, tc.pct
			r := NewRegistry(opts)
			update(t, r, p, nodes, t0)
			if r.ClusterHealthy() != tc.healthy || r.Group("a").Healthy != tc.healthy {
				t.Errorf("cluster healthy %v, group healthy %v; want %v", r.ClusterHealthy(), r.Group("a").Healthy, tc.healthy)
			}
		})
	}
}

func TestStatusFormat(t *testing.T) {
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("pool-a", 1, 12, 3, nil)
	nodes := append(addNodes(p, "pool-a", 2, true, t0.Add(-time.Hour)), addNodes(p, "pool-a", 1, false, t0.Add(-time.Hour))...)
	r := NewRegistry(DefaultOptions())
	update(t, r, p, nodes, t0)
	r.ScaleDownProbed(t0)
	st := r.Status(t0, func(g string) int {
		if g == "" || g == "pool-a" {
			return 1
		}
		return 0
	})
	body, err := yaml.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	for _, want := range []string{
		"autoscalerStatus: Running",
		"time: 2026-01-01 00:00:00 +0000 UTC",
		"clusterWide:\n  health:\n    lastProbeTime: \"2026-01-01T00:00:00Z\"",
		"status: Healthy",
		"unready:\n          resourceUnready: 0\n          total: 1",
		"cloudProviderTarget: 3",
		"minSize: 1",
		"maxSize: 12",
		"longUnregistered: 0",
		"unregistered: 0",
		"status: NoActivity",
		"candidates: 1",
		"status: CandidatesPresent",
		"name: pool-a",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}
	// Transition times stay put while the status does not change; a
	// change starts at the probe (the Update, or scale-down's planning)
	// that saw it.
	update(t, r, p, nodes, t0.Add(time.Minute))
	r.ScaleDownProbed(t0.Add(time.Minute))
	later := r.Status(t0.Add(time.Minute), nil)
	if !later.ClusterWide.Health.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("health transition moved to %v", later.ClusterWide.Health.LastTransitionTime)
	}
	if !later.ClusterWide.ScaleDown.LastTransitionTime.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("scale-down went from candidates to none but its transition time is %v", later.ClusterWide.ScaleDown.LastTransitionTime)
	}
}
