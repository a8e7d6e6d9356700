package metrics

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func labelNames(f *dto.MetricFamily) []string {
	seen := map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			seen[l.GetName()] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func gpuNode(labels map[string]string, gpus string) *apiv1.Node {
	n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}}
	n.Status.Capacity = apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("8")}
	if gpus != "" {
		n.Status.Capacity["nvidia.com/gpu"] = resource.MustParse(gpus)
	}
	return n
}

// TestEventOnlyFamilies: the families that appear only once their event
// happened have upstream's type and label names.
func TestEventOnlyFamilies(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	gpu := GPU{ResourceName: "nvidia.com/gpu", Name: "t4"}
	m.RegisterScaleUp(2, gpu)
	m.RegisterFailedScaleUp(CloudProviderError, 3, gpu)
	m.RegisterScaleDown("empty", 1, gpu)
	m.RegisterNodeGroupCreation("autoprovisioned")
	m.RegisterNodeGroupDeletion("autoprovisioned")
	m.ObserveBinpackingHeterogeneity(gpuNode(map[string]string{apiv1.LabelInstanceTypeStable: "n1"}, ""), 2, 3)
	m.UpdateNodeTaintsCount([]*apiv1.Node{{Spec: apiv1.NodeSpec{Taints: []apiv1.Taint{{Key: "x"}}}}}, TaintKinds{})
	fams := gather(t, reg)
	for name, want := range map[string]struct {
		typ    dto.MetricType
		labels []string
	}{
		"cluster_autoscaler_scaled_up_gpu_nodes_total":   {dto.MetricType_COUNTER, []string{"gpu_name", "gpu_resource_name"}},
		"cluster_autoscaler_failed_gpu_scale_ups_total":  {dto.MetricType_COUNTER, []string{"gpu_name", "gpu_resource_name", "reason"}},
		"cluster_autoscaler_scaled_down_gpu_nodes_total": {dto.MetricType_COUNTER, []string{"gpu_name", "gpu_resource_name", "reason"}},
		"cluster_autoscaler_created_node_groups_total":   {dto.MetricType_COUNTER, []string{"group_type"}},
		"cluster_autoscaler_deleted_node_groups_total":   {dto.MetricType_COUNTER, []string{"group_type"}},
		"cluster_autoscaler_binpacking_heterogeneity":    {dto.MetricType_HISTOGRAM, []string{"cpu_count", "instance_type", "namespace_count"}},
		"cluster_autoscaler_node_taints_count":           {dto.MetricType_GAUGE, []string{"type"}},
	} {
		f := fams[name]
		if f == nil {
			t.Errorf("%s missing", name)
			continue
		}
		if f.GetType() != want.typ {
			t.Errorf("%s is a %v, want %v", name, f.GetType(), want.typ)
		}
		if diff := cmp.Diff(want.labels, labelNames(f)); diff != "" {
			t.Errorf("%s labels (-want +got):\n%s", name, diff)
		}
	}
	if got := fams["cluster_autoscaler_failed_node_creations_total"]; got == nil {
		t.Fatal("failed_node_creations_total missing")
	} else {
		for _, s := range got.GetMetric() {
			if s.GetLabel()[0].GetValue() == "cloudProviderError" && s.GetCounter().GetValue() != 3 {
				t.Errorf("failed_node_creations_total{reason=cloudProviderError} = %v, want 3", s.GetCounter().GetValue())
			}
		}
	}
}

// TestBucketsAreUpstreams: queries on le keep working.
func TestBucketsAreUpstreams(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.UpdateDuration(FunctionMain, time.Second)
	m.ObserveNodeRemoval(true, time.Minute)
	m.ObserveBinpackingHeterogeneity(nil, 1, 1)
	fams := gather(t, reg)
	bounds := func(name string) []float64 {
		var out []float64
		for _, b := range fams[name].GetMetric()[0].GetHistogram().GetBucket() {
			out = append(out, b.GetUpperBound())
		}
		return out
	}
	for name, want := range map[string][]float64{
		"cluster_autoscaler_function_duration_seconds":    prometheus.ExponentialBucketsRange(0.1, 1800, 150),
		"cluster_autoscaler_node_removal_latency_seconds": prometheus.ExponentialBuckets(1, 1.5, 19),
		"cluster_autoscaler_binpacking_heterogeneity":     {1, 2, 4, 8, 16, 32},
	} {
		if diff := cmp.Diff(want, bounds(name)); diff != "" {
			t.Errorf("%s buckets (-want +got):\n%s", name, diff)
		}
	}
}

func TestGPUOf(t *testing.T) {
	cfg := &cloudprovider.GpuConfig{Label: "gpu-type", ExtendedResourceName: "nvidia.com/gpu"}
	for _, tc := range []struct {
		name      string
		cfg       *cloudprovider.GpuConfig
		node      *apiv1.Node
		available map[string]struct{}
		want      GPU
	}{
		{name: "no GPU", node: gpuNode(nil, "")},
		{name: "typed", cfg: cfg, node: gpuNode(map[string]string{"gpu-type": "t4"}, "1"),
			want: GPU{ResourceName: "nvidia.com/gpu", Name: "t4"}},
		{name: "no type label", cfg: cfg, node: gpuNode(nil, "1"), want: GPU{ResourceName: "nvidia.com/gpu", Name: GPUGeneric}},
		{name: "type not listed", cfg: cfg, node: gpuNode(map[string]string{"gpu-type": "x"}, "1"),
			available: map[string]struct{}{"t4": {}}, want: GPU{ResourceName: "nvidia.com/gpu", Name: GPUNotListed}},
		{name: "labelled but no device", cfg: cfg, node: gpuNode(map[string]string{"gpu-type": "t4"}, ""),
			want: GPU{ResourceName: "nvidia.com/gpu", Name: GPUMissing}},
		{name: "DRA", cfg: &cloudprovider.GpuConfig{Label: "gpu-type", DraDriverName: "gpu.nvidia.com"},
			node: gpuNode(map[string]string{"gpu-type": "h100"}, ""),
			want: GPU{ResourceName: "dra_gpu.nvidia.com", Name: "h100", DRADrivers: "gpu.nvidia.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, GPUOf(tc.cfg, tc.node, tc.available)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnremovableReasonLabels(t *testing.T) {
	for reason, want := range map[string]string{"NoReason": "0", "ScaleDownDisabledAnnotation": "1", "NotAutoscaled": "3",
		"NotUnneededLongEnough": "4", "NodeGroupMinSizeReached": "6", "AtomicScaleDownFailed": "8",
		"MinimalResourceLimitExceeded": "9", "CurrentlyBeingDeleted": "10", "NotUnderutilized": "11",
		"NoPlaceToMovePods": "14", "BlockedByPod": "15", "BookedCapacity": "12", "NodeGroupScaleDownBlocked": "12", "NotStarted": "5", "unknown": "0"} {
		if got := UnremovableReasonLabel(reason); got != want {
			t.Errorf("%s -> %q, want %q", reason, got, want)
		}
	}
}

func TestNodeTaintTypes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	taints := func(keys ...string) *apiv1.Node {
		n := &apiv1.Node{}
		for _, k := range keys {
			n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: k, Effect: apiv1.TaintEffectNoSchedule})
		}
		return n
	}
	nodes := []*apiv1.Node{taints("ToBeDeletedByClusterAutoscaler", "node.kubernetes.io/not-ready", "mine"),
		taints("startup-taint.cluster-autoscaler.kubernetes.io/a", "my-startup", "status-taint.cluster-autoscaler.kubernetes.io/b",
			"ignore-taint.cluster-autoscaler.kubernetes.io/c")}
	m.UpdateNodeTaintsCount(nodes, TaintKinds{Startup: []string{"my-startup"}})
	got := map[string]float64{}
	for _, s := range gather(t, reg)["cluster_autoscaler_node_taints_count"].GetMetric() {
		got[s.GetLabel()[0].GetValue()] = s.GetGauge().GetValue()
	}
	want := map[string]float64{"ToBeDeletedByClusterAutoscaler": 1, "node.kubernetes.io/not-ready": 1, "other": 1,
		"startup-taint": 2, "status-taint": 1, "ignore-taint.cluster-autoscaler.kubernetes.io/": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A type gone from the nodes goes to zero.
	m.UpdateNodeTaintsCount(nil, TaintKinds{})
	for _, s := range gather(t, reg)["cluster_autoscaler_node_taints_count"].GetMetric() {
		if s.GetGauge().GetValue() != 0 {
			t.Errorf("%s still %v", s.GetLabel()[0].GetValue(), s.GetGauge().GetValue())
		}
	}
}
