package core

import (
	"context"
	"sort"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// draDriversSeries lists, for the counted series of name,
// "<dra_drivers>=<count>".
func draDriversSeries(t *testing.T, reg *prometheus.Registry, name string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "dra_drivers" && m.GetCounter().GetValue() > 0 {
					out = append(out, l.GetValue()+"="+strconv.FormatFloat(m.GetCounter().GetValue(), 'f', -1, 64))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestReportingLabelsDRADrivers: scale-ups are labelled with the DRA
// drivers of the group template's slices and scale-downs with those of the
// removed node's published slices (dra.net is a NIC: a node needs no GPU to
// carry the label); without slices the label stays empty.
func TestReportingLabelsDRADrivers(t *testing.T) {
	ctx := context.Background()
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("ng", 0, 10, 1, nil)
	groups, _ := p.NodeGroups(ctx)
	reg := prometheus.NewRegistry()
	r := NewReporting(metrics.New(reg), p, nil, nil)
	slice := func(node, driver string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
			Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node)}}
	}
	r.UseResourceSlices(func() ([]*resourceapi.ResourceSlice, error) {
		return []*resourceapi.ResourceSlice{slice("n1", "dra.net"), slice("n1", "gpu.nvidia.com"), slice("n2", "x.example.com")}, nil
	})
	template := &cloudprovider.NodeInfo{Node: &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tmpl"}},
		ResourceSlices: []*resourceapi.ResourceSlice{slice("tmpl", "gpu.nvidia.com")}}
	r.ScaledUp(ctx, groups[0], template, 1, 3)
	r.ScaledUp(ctx, groups[0], &cloudprovider.NodeInfo{Node: &apiv1.Node{}}, 3, 4)
	for _, name := range []string{"n1", "n2", "n3"} {
		n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		r.ScaledDown(ctx, n, "empty")
	}
	if diff := cmp.Diff([]string{"=1", "gpu.nvidia.com=2"},
		draDriversSeries(t, reg, "cluster_autoscaler_scaled_up_nodes_total")); diff != "" {
		t.Errorf("scaled_up_nodes_total (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"=1", "custom.driver=1", "dra.net,gpu.nvidia.com=1"},
		draDriversSeries(t, reg, "cluster_autoscaler_scaled_down_nodes_total")); diff != "" {
		t.Errorf("scaled_down_nodes_total (-want +got):\n%s", diff)
	}
}
