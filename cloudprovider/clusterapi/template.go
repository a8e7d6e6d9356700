package clusterapi

import (
	"context"
	"fmt"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Scale-from-zero annotations on the scalable resource (upstream's keys).
const (
	capacityPrefix     = "capacity.cluster-autoscaler.kubernetes.io/"
	CPUAnnotation      = capacityPrefix + "cpu"
	MemoryAnnotation   = capacityPrefix + "memory"
	DiskAnnotation     = capacityPrefix + "ephemeral-disk"
	MaxPodsAnnotation  = capacityPrefix + "maxPods"
	GPUTypeAnnotation  = capacityPrefix + "gpu-type"
	GPUCountAnnotation = capacityPrefix + "gpu-count"
	LabelsAnnotation   = capacityPrefix + "labels"
	TaintsAnnotation   = capacityPrefix + "taints"
	// DRADriverAnnotation names the DRA driver of the group's GPUs: with
	// it, gpu-count devices are published as a ResourceSlice of that driver
	// instead of an extended resource.
	DRADriverAnnotation = capacityPrefix + "dra-driver"
	// maxTemplateDevices bounds gpu-count for DRA (a ResourceSlice holds at
	// most 128 devices).
	maxTemplateDevices    = 128
	defaultMaxPods        = 110
	defaultGPUResourceKey = "nvidia.com/gpu"
)

// TemplateNodeInfo builds a node from the capacity annotations and, under
// them, the status.capacity (and status.nodeInfo) of the group's
// infrastructure machine template, Cluster API's scale-from-zero contract.
// Without cpu and memory from either it returns ErrNotImplemented so that
// the autoscaler copies a real node of the group. Values that do not parse
// are an error of this group only.
func (g *NodeGroup) TemplateNodeInfo(ctx context.Context) (*cloudprovider.NodeInfo, error) {
	infra, err := g.infraTemplate(ctx)
	if err != nil {
		return nil, fmt.Errorf("template of node group %q: %w", g.Id(), err)
	}
	node, err := templateNode(g.Id(), g.obj.GetName(), g.obj.GetAnnotations(), infra, specTaints(ctx, g.obj))
	if err != nil {
		return nil, fmt.Errorf("template of node group %q: %w", g.Id(), err)
	}
	slices, err := templateSlices(node.Name, g.obj.GetAnnotations())
	if err != nil {
		return nil, fmt.Errorf("template of node group %q: %w", g.Id(), err)
	}
	return &cloudprovider.NodeInfo{Node: node, ResourceSlices: slices}, nil
}

// infraFacts is what an infrastructure machine template says of its machines.
type infraFacts struct {
	capacity  apiv1.ResourceList
	arch, os  string
	reference string // kind/namespace/name, for messages
}

// infraTemplate reads the group's infrastructure machine template
// (spec.template.spec.infrastructureRef: apiGroup in v1beta2, apiVersion in
// v1beta1). A template that cannot be found or read is logged and ignored
// (nil): the annotations, or a copy of a node, still work.
func (g *NodeGroup) infraTemplate(ctx context.Context) (*infraFacts, error) {
	if g.provider.mapper == nil {
		return nil, nil
	}
	ref, ok, _ := unstructured.NestedMap(g.obj.Object, "spec", "template", "spec", "infrastructureRef")
	if !ok {
		return nil, nil
	}
	kind, _ := ref["kind"].(string)
	name, _ := ref["name"].(string)
	group, _ := ref["apiGroup"].(string)
	if group == "" {
		if av, _ := ref["apiVersion"].(string); av != "" {
			gv, err := schema.ParseGroupVersion(av)
			if err != nil {
				return nil, fmt.Errorf("infrastructureRef apiVersion %q: %w", av, err)
			}
			group = gv.Group
		}
	}
	if kind == "" || name == "" || group == "" {
		return nil, nil
	}
	logger := klog.FromContext(ctx)
	where := fmt.Sprintf("%s/%s/%s", kind, g.obj.GetNamespace(), name)
	key := group + "/" + where
	now := g.provider.clock.Now()
	g.provider.infraMu.Lock()
	cached, hit := g.provider.infraCache[key]
	g.provider.infraMu.Unlock()
	if hit && now.Sub(cached.read) < infraCacheTTL {
		return cached.facts, cached.err
	}
	facts, err := g.readInfraTemplate(ctx, logger, group, kind, name, where)
	g.provider.infraMu.Lock()
	if g.provider.infraCache == nil {
		g.provider.infraCache = map[string]infraCacheEntry{}
	}
	g.provider.infraCache[key] = infraCacheEntry{facts: facts, err: err, read: now}
	g.provider.infraMu.Unlock()
	return facts, err
}

// infraCacheTTL is how long what an infrastructure template says is reused
// before it is read again: its status changes rarely, and reading it for
// every group in every loop would cost an API call each.
const infraCacheTTL = time.Minute

type infraCacheEntry struct {
	facts *infraFacts
	err   error
	read  time.Time
}

func (g *NodeGroup) readInfraTemplate(ctx context.Context, logger klog.Logger, group, kind, name, where string) (*infraFacts, error) {
	mapping, err := g.provider.mapper.RESTMapping(schema.GroupKind{Group: group, Kind: kind})
	if err != nil {
		logger.V(4).Info("Cannot map the infrastructure template of a Cluster API node group", "nodeGroup", g.Id(), "template", where, "err", err)
		return nil, nil
	}
	obj, err := g.provider.client.Resource(mapping.Resource).Namespace(g.obj.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		logger.V(4).Info("Cannot read the infrastructure template of a Cluster API node group", "nodeGroup", g.Id(), "template", where, "err", err)
		return nil, nil
	}
	facts := &infraFacts{capacity: apiv1.ResourceList{}, reference: where}
	capacity, _, err := unstructured.NestedStringMap(obj.Object, "status", "capacity")
	if err != nil {
		return nil, fmt.Errorf("%s status.capacity: %w", where, err)
	}
	for k, v := range capacity {
		q, err := parseQuantity(where+" status.capacity."+k, v)
		if err != nil {
			return nil, err
		}
		facts.capacity[apiv1.ResourceName(k)] = q
	}
	facts.arch, _, _ = unstructured.NestedString(obj.Object, "status", "nodeInfo", "architecture")
	facts.os, _, _ = unstructured.NestedString(obj.Object, "status", "nodeInfo", "operatingSystem")
	return facts, nil
}

// templateNode builds the template node from the annotations a, the
// infrastructure template's facts and the taints of the group's own spec
// (specTaints), which the taints annotation overrides (mergeTaints).
func templateNode(id, name string, a map[string]string, infra *infraFacts, spec []apiv1.Taint) (*apiv1.Node, error) {
	capacity := apiv1.ResourceList{}
	if infra != nil {
		for k, v := range infra.capacity {
			capacity[k] = v.DeepCopy()
		}
	}
	for _, r := range []struct {
		key  string
		name apiv1.ResourceName
	}{{CPUAnnotation, apiv1.ResourceCPU}, {MemoryAnnotation, apiv1.ResourceMemory}, {DiskAnnotation, apiv1.ResourceEphemeralStorage}} {
		v, ok := a[r.key]
		if !ok {
			continue
		}
		q, err := parseQuantity(r.key, v)
		if err != nil {
			return nil, err
		}
		capacity[r.name] = q
	}
	_, hasCPU := capacity[apiv1.ResourceCPU]
	_, hasMem := capacity[apiv1.ResourceMemory]
	if !hasCPU || !hasMem {
		return nil, fmt.Errorf("%w: no cpu and memory in the %s and %s annotations or the infrastructure template's status.capacity",
			cloudprovider.ErrNotImplemented, CPUAnnotation, MemoryAnnotation)
	}
	pods := int64(defaultMaxPods)
	if q, ok := capacity[apiv1.ResourcePods]; ok {
		pods = q.Value()
	}
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
		t := strings.TrimSpace(a[GPUTypeAnnotation])
		if t != "" {
			gpu = apiv1.ResourceName(t)
		}
		// With a DRA driver the GPUs are its devices (templateSlices); an
		// extended resource only when gpu-type names one as well, as upstream.
		dra := strings.TrimSpace(a[DRADriverAnnotation]) != ""
		if n > 0 && (!dra || t != "") {
			capacity[gpu] = *resource.NewQuantity(int64(n), resource.DecimalSI)
		}
	}
	nodeName := fmt.Sprintf("template-node-for-%s", strings.ToLower(name))
	labels := map[string]string{
		"kubernetes.io/os":   "linux",
		"kubernetes.io/arch": "amd64",
	}
	if infra != nil && infra.arch != "" {
		labels["kubernetes.io/arch"] = infra.arch
	}
	if infra != nil && infra.os != "" {
		labels["kubernetes.io/os"] = infra.os
	}
	extra, err := parseLabels(a[LabelsAnnotation])
	if err != nil {
		return nil, err
	}
	for k, v := range extra {
		labels[k] = v
	}
	labels["kubernetes.io/hostname"] = nodeName
	annotated, err := parseTaints(a[TaintsAnnotation])
	if err != nil {
		return nil, err
	}
	taints := mergeTaints(spec, annotated)
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

// specTaints reads spec.template.spec.taints of a scalable resource: the
// taints Cluster API (v1.12 and later, feature gate MachineTaintPropagation)
// puts on the Machines' Nodes. Their propagation field is not looked at, as
// upstream. An entry without a key or with an effect a Node cannot have is
// logged at --v=4 and left out (Cluster API's validation rejects both).
func specTaints(ctx context.Context, obj *unstructured.Unstructured) []apiv1.Taint {
	items, found, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "taints")
	if !found || err != nil {
		return nil
	}
	var out []apiv1.Taint
	for _, item := range items {
		m, _ := item.(map[string]any)
		key, _ := m["key"].(string)
		value, _ := m["value"].(string)
		effect, _ := m["effect"].(string)
		switch e := apiv1.TaintEffect(effect); {
		case key == "":
		case e == apiv1.TaintEffectNoSchedule, e == apiv1.TaintEffectPreferNoSchedule, e == apiv1.TaintEffectNoExecute:
			out = append(out, apiv1.Taint{Key: key, Value: value, Effect: e})
			continue
		}
		klog.FromContext(ctx).V(4).Info("Ignoring an invalid taint in spec.template.spec.taints", "object", klog.KObj(obj), "taint", item)
	}
	return out
}

// mergeTaints is the template's taints: those of the spec, in order, each
// replaced in place by an annotation taint of the same key and effect, then
// the other annotation taints in order (upstream's precedence: the
// annotation wins).
func mergeTaints(spec, annotated []apiv1.Taint) []apiv1.Taint {
	out := append([]apiv1.Taint(nil), spec...)
	for _, t := range annotated {
		replaced := false
		for i := range out {
			if out[i].Key == t.Key && out[i].Effect == t.Effect {
				out[i], replaced = t, true
				break
			}
		}
		if !replaced {
			out = append(out, t)
		}
	}
	return out
}

// templateSlices is the ResourceSlice the template node nodeName publishes
// when the dra-driver annotation names a driver, with gpu-count devices
// (cloudprovider.GPUTemplateSlices). Without the annotation, or with no
// gpu-count, there is none.
func templateSlices(nodeName string, a map[string]string) ([]*resourceapi.ResourceSlice, error) {
	driver := strings.TrimSpace(a[DRADriverAnnotation])
	if driver == "" {
		return nil, nil
	}
	v, ok := a[GPUCountAnnotation]
	if !ok {
		return nil, nil
	}
	n, err := parseCount(GPUCountAnnotation, v)
	if err != nil {
		return nil, err
	}
	return cloudprovider.GPUTemplateSlices(nodeName, driver, n)
}
