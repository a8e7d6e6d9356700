package clusterapi

import (
	"context"
	"fmt"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Scale-from-zero annotations on the scalable resource (upstream's keys).
const (
	capacityPrefix        = "capacity.cluster-autoscaler.kubernetes.io/"
	CPUAnnotation         = capacityPrefix + "cpu"
	MemoryAnnotation      = capacityPrefix + "memory"
	DiskAnnotation        = capacityPrefix + "ephemeral-disk"
	MaxPodsAnnotation     = capacityPrefix + "maxPods"
	GPUTypeAnnotation     = capacityPrefix + "gpu-type"
	GPUCountAnnotation    = capacityPrefix + "gpu-count"
	LabelsAnnotation      = capacityPrefix + "labels"
	TaintsAnnotation      = capacityPrefix + "taints"
	defaultMaxPods        = 110
	defaultGPUResourceKey = "nvidia.com/gpu"
)

// TemplateNodeInfo builds a node from the capacity annotations; without cpu
// and memory annotations it returns ErrNotImplemented so that the autoscaler
// copies a real node of the group. Annotations that do not parse are an
// error of this group only.
func (g *NodeGroup) TemplateNodeInfo(context.Context) (*cloudprovider.NodeInfo, error) {
	node, err := templateNode(g.Id(), g.obj.GetName(), g.obj.GetAnnotations())
	if err != nil {
		return nil, fmt.Errorf("template of node group %q: %w", g.Id(), err)
	}
	return &cloudprovider.NodeInfo{Node: node}, nil
}

func templateNode(id, name string, a map[string]string) (*apiv1.Node, error) {
	cpuS, hasCPU := a[CPUAnnotation]
	memS, hasMem := a[MemoryAnnotation]
	if !hasCPU || !hasMem {
		return nil, fmt.Errorf("%w: no %s and %s annotations", cloudprovider.ErrNotImplemented, CPUAnnotation, MemoryAnnotation)
	}
	capacity := apiv1.ResourceList{}
	for _, r := range []struct {
		key  string
		name apiv1.ResourceName
		val  string
	}{{CPUAnnotation, apiv1.ResourceCPU, cpuS}, {MemoryAnnotation, apiv1.ResourceMemory, memS}} {
		q, err := parseQuantity(r.key, r.val)
		if err != nil {
			return nil, err
		}
		capacity[r.name] = q
	}
	if v, ok := a[DiskAnnotation]; ok {
		q, err := parseQuantity(DiskAnnotation, v)
		if err != nil {
			return nil, err
		}
		capacity[apiv1.ResourceEphemeralStorage] = q
	}
	pods := int64(defaultMaxPods)
	if v, ok := a[MaxPodsAnnotation]; ok {
		n, err := parseCount(MaxPodsAnnotation, v)
		if err != nil {
			return nil, err
		}
		pods = int64(n)
	}
	capacity[apiv1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
	if v, ok := a[GPUCountAnnotation]; ok {
		n, err := parseCount(GPUCountAnnotation, v)
		if err != nil {
			return nil, err
		}
		gpu := apiv1.ResourceName(defaultGPUResourceKey)
		if t := strings.TrimSpace(a[GPUTypeAnnotation]); t != "" {
			gpu = apiv1.ResourceName(t)
		}
		if n > 0 {
			capacity[gpu] = *resource.NewQuantity(int64(n), resource.DecimalSI)
		}
	}
	nodeName := fmt.Sprintf("template-node-for-%s", strings.ToLower(name))
	labels := map[string]string{
		"kubernetes.io/os":   "linux",
		"kubernetes.io/arch": "amd64",
	}
	extra, err := parseLabels(a[LabelsAnnotation])
	if err != nil {
		return nil, err
	}
	for k, v := range extra {
		labels[k] = v
	}
	labels["kubernetes.io/hostname"] = nodeName
	taints, err := parseTaints(a[TaintsAnnotation])
	if err != nil {
		return nil, err
	}
	return &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: labels},
		Spec:       apiv1.NodeSpec{ProviderID: PlaceholderPrefix + "template/" + id, Taints: taints},
		Status: apiv1.NodeStatus{
			Capacity: capacity, Allocatable: capacity.DeepCopy(),
			Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}},
		},
	}, nil
}

func parseQuantity(key, s string) (resource.Quantity, error) {
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%s %q: %w", key, s, err)
	}
	if q.Sign() < 0 {
		return resource.Quantity{}, fmt.Errorf("%s %q is negative", key, s)
	}
	return q, nil
}

// parseLabels parses "k1=v1,k2=v2".
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s: %q is not <key>=<value>", LabelsAnnotation, kv)
		}
		out[k] = v
	}
	return out, nil
}

// parseTaints parses "k1=v1:NoSchedule,k2:NoExecute".
func parseTaints(s string) ([]apiv1.Taint, error) {
	var out []apiv1.Taint
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		kv, effect, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not <key>[=<value>]:<effect>", TaintsAnnotation, t)
		}
		switch e := apiv1.TaintEffect(effect); e {
		case apiv1.TaintEffectNoSchedule, apiv1.TaintEffectPreferNoSchedule, apiv1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("%s: %q has unknown effect %q", TaintsAnnotation, t, effect)
		}
		k, v, _ := strings.Cut(kv, "=")
		if k == "" {
			return nil, fmt.Errorf("%s: %q has no key", TaintsAnnotation, t)
		}
		out = append(out, apiv1.Taint{Key: k, Value: v, Effect: apiv1.TaintEffect(effect)})
	}
	return out, nil
}
