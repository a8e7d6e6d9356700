package core

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestReportingClusterEvents: the scale-up and scale-down events carry
// upstream's reasons and messages, and go nowhere without a status ConfigMap.
func TestReportingClusterEvents(t *testing.T) {
	ctx := context.Background()
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("ng", 0, 10, 1, nil)
	groups, _ := p.NodeGroups(ctx)
	rec := record.NewFakeRecorder(100)
	status := &apiv1.ObjectReference{Kind: "ConfigMap", Namespace: "kube-system", Name: "cluster-autoscaler-status"}
	r := NewReporting(metrics.New(prometheus.NewRegistry()), p, rec, status)
	node := &apiv1.Node{}
	node.Name = "n1"
	r.ScaleUpStarting(ctx, groups[0], 1, 3)
	r.ScaledUp(ctx, groups[0], nil, 1, 3)
	r.ScaleUpFailed(ctx, groups[0], nil, 2, false, errors.New("quota"))
	r.MaxNodesTotalReached(ctx, 5)
	r.RemovingNode(ctx, node, true, 0, nil)
	r.ScaledDown(ctx, node, "empty")
	r.RemovingNode(ctx, node, false, 0.25, []string{"ns/a", "ns/b"})
	r.ScaledDown(ctx, node, "underutilized")
	want := []string{
		"Normal ScaledUpGroup Scale-up: setting group ng size to 3 instead of 1 (max: 10)",
		"Normal ScaledUpGroup Scale-up: group ng size set to 3 instead of 1 (max: 10)",
		"Warning FailedToScaleUpGroup Scale-up failed for group ng: quota",
		"Warning MaxNodesTotalReached Max total nodes in cluster reached: 5",
		`Normal ScaleDownEmpty Scale-down: removing empty node "n1"`,
		"Normal ScaleDownEmpty Scale-down: empty node n1 removed",
		"Normal ScaleDown Scale-down: removing node n1, utilization: 0.25, pods to reschedule: ns/a,ns/b",
		"Normal ScaleDown Scale-down: node n1 removed with drain",
	}
	if diff := cmp.Diff(want, drain(rec)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	quiet := NewReporting(metrics.New(prometheus.NewRegistry()), p, rec, nil)
	quiet.ScaledUp(ctx, groups[0], nil, 1, 2)
	if got := drain(rec); len(got) != 0 {
		t.Errorf("events without a status ConfigMap: %v", got)
	}
}
