package aws

import (
	"fmt"
	"sort"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Tag prefixes of an Auto Scaling group that shape its template node
// (upstream's keys).
const (
	LabelTagPrefix    = "k8s.io/cluster-autoscaler/node-template/label/"
	TaintTagPrefix    = "k8s.io/cluster-autoscaler/node-template/taint/"
	ResourceTagPrefix = "k8s.io/cluster-autoscaler/node-template/resources/"
)

// GPULabel is the node label that carries the GPU type on AWS.
const GPULabel = "k8s.amazonaws.com/accelerator"

// EBSZoneLabel is the zone label of the EBS CSI driver's nodes: the key
// its volumes' node affinity pins (older releases pin only this one).
const EBSZoneLabel = "topology.ebs.csi.aws.com/zone"

// gpuResource is the extended resource of NVIDIA GPUs; amdGPUResource of AMD ones.
const (
	gpuResource    apiv1.ResourceName = "nvidia.com/gpu"
	amdGPUResource apiv1.ResourceName = "amd.com/gpu"
)

// defaultMaxPods is the pods capacity of a template node whose instance
// type does not say how many addresses its ENIs have.
const defaultMaxPods = 110

// templateSpec is what the tags of a group add to its template.
type templateSpec struct {
	Labels    map[string]string
	Taints    []apiv1.Taint
	Resources apiv1.ResourceList
}

// parseTemplateTags reads the node-template tags; a malformed one is an
// error naming it.
func parseTemplateTags(tags map[string]string) (templateSpec, error) {
	s := templateSpec{Labels: map[string]string{}, Resources: apiv1.ResourceList{}}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := tags[k]
		switch {
		case strings.HasPrefix(k, LabelTagPrefix):
			name := strings.TrimPrefix(k, LabelTagPrefix)
			if errs := validation.IsQualifiedName(name); len(errs) > 0 {
				return s, fmt.Errorf("tag %q: label key %q: %s", k, name, strings.Join(errs, "; "))
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				return s, fmt.Errorf("tag %q: label value %q: %s", k, v, strings.Join(errs, "; "))
			}
			s.Labels[name] = v
		case strings.HasPrefix(k, TaintTagPrefix):
			t, err := parseTaintTag(strings.TrimPrefix(k, TaintTagPrefix), v)
			if err != nil {
				return s, fmt.Errorf("tag %q: %w", k, err)
			}
			s.Taints = append(s.Taints, t)
		case strings.HasPrefix(k, ResourceTagPrefix):
			name := strings.TrimPrefix(k, ResourceTagPrefix)
			if errs := validation.IsQualifiedName(name); len(errs) > 0 {
				return s, fmt.Errorf("tag %q: resource name %q: %s", k, name, strings.Join(errs, "; "))
			}
			q, err := resource.ParseQuantity(strings.TrimSpace(v))
			if err != nil || q.Sign() < 0 {
				return s, fmt.Errorf("tag %q: resource quantity %q is not a non-negative quantity", k, v)
			}
			s.Resources[apiv1.ResourceName(name)] = q
		}
	}
	return s, nil
}

// parseTaintTag reads a taint tag: key <k>, value "<value>:<Effect>" (a
// value alone, without effect, is refused: the effect matters).
func parseTaintTag(key, v string) (apiv1.Taint, error) {
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return apiv1.Taint{}, fmt.Errorf("taint key %q: %s", key, strings.Join(errs, "; "))
	}
	i := strings.LastIndex(v, ":")
	if i < 0 {
		return apiv1.Taint{}, fmt.Errorf("taint value %q: want <value>:<effect>", v)
	}
	val, effect := v[:i], apiv1.TaintEffect(v[i+1:])
	switch effect {
	case apiv1.TaintEffectNoSchedule, apiv1.TaintEffectPreferNoSchedule, apiv1.TaintEffectNoExecute:
	default:
		return apiv1.Taint{}, fmt.Errorf("taint value %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", v, effect)
	}
	if val != "" {
		if errs := validation.IsValidLabelValue(val); len(errs) > 0 {
			return apiv1.Taint{}, fmt.Errorf("taint value %q: %s", val, strings.Join(errs, "; "))
		}
	}
	return apiv1.Taint{Key: key, Value: val, Effect: effect}, nil
}

// templateInput is everything a template node is built from.
type templateInput struct {
	Group  string
	Region string
	Zone   string
	Type   instanceType
	Tags   map[string]string
	// Managed is what the group's EKS managed node group adds (eks.go).
	Managed managedSpec
	// Capacity is how the group's new instances are bought: On-Demand and
	// Spot label the template (capacitytype.go), mixed or unknown do not.
	Capacity capacityType
}

// buildTemplate builds the node a group would add: the instance type's
// capacity, the well-known labels, the labels and taints of its EKS managed
// node group (adding keys only), its capacity type's labels (adding keys
// only), then what the tags add (tags win).
func buildTemplate(in templateInput) (*apiv1.Node, error) {
	spec, err := parseTemplateTags(in.Tags)
	if err != nil {
		return nil, fmt.Errorf("node-template tags of Auto Scaling group %q: %w", in.Group, err)
	}
	t := in.Type
	name := "template-node-for-" + in.Group
	node := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	pods := int64(defaultMaxPods)
	if t.MaxPods > 0 {
		pods = t.MaxPods
	}
	capacity := apiv1.ResourceList{
		apiv1.ResourceCPU:    *resource.NewQuantity(t.VCPU, resource.DecimalSI),
		apiv1.ResourceMemory: *resource.NewQuantity(t.MemoryMiB*1024*1024, resource.BinarySI),
		apiv1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
	}
	if t.GPUs > 0 {
		if !hasDRADevices(in.Tags, t) {
			capacity[gpuResourceOf(t)] = *resource.NewQuantity(t.GPUs, resource.DecimalSI)
		}
		node.Labels[GPULabel] = gpuType(t)
	}
	for k, q := range spec.Resources {
		capacity[k] = q
	}
	labels := map[string]string{
		apiv1.LabelOSStable:                "linux",
		apiv1.LabelArchStable:              t.Arch,
		apiv1.LabelInstanceTypeStable:      t.Name,
		apiv1.LabelInstanceType:            t.Name,
		"beta.kubernetes.io/os":            "linux",
		"beta.kubernetes.io/arch":          t.Arch,
		apiv1.LabelHostname:                name,
		apiv1.LabelTopologyRegion:          in.Region,
		apiv1.LabelFailureDomainBetaRegion: in.Region,
	}
	if in.Zone != "" {
		labels[apiv1.LabelTopologyZone] = in.Zone
		labels[apiv1.LabelFailureDomainBetaZone] = in.Zone
		labels[EBSZoneLabel] = in.Zone
	}
	for k, v := range labels {
		if v != "" {
			node.Labels[k] = v
		}
	}
	for k, v := range in.Managed.Labels {
		if _, set := node.Labels[k]; !set {
			node.Labels[k] = v
		}
	}
	ct := in.Capacity
	if in.Tags[EKSNodegroupTag] != "" {
		// An EKS managed node group's capacity type is what EKS says
		// (none when DescribeNodegroup is refused or says something else).
		ct = capacityOfLabels(in.Managed.Labels)
	}
	for k, v := range capacityLabels(ct) {
		if _, set := node.Labels[k]; !set {
			node.Labels[k] = v
		}
	}
	for k, v := range spec.Labels {
		node.Labels[k] = v
	}
	node.Spec.Taints = mergeTaints(spec.Taints, in.Managed.Taints)
	node.Status = apiv1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy(),
		Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}}
	return node, nil
}

func gpuResourceOf(t instanceType) apiv1.ResourceName {
	if strings.EqualFold(t.GPUManufacturer, "AMD") {
		return amdGPUResource
	}
	return gpuResource
}

// gpuType names the GPU of a type for the GPU label: "<manufacturer>-<name>"
// in lower case, e.g. "nvidia-t4" (a label tag overrides it).
func gpuType(t instanceType) string {
	s := strings.ToLower(strings.TrimSpace(t.GPUManufacturer + "-" + t.GPUName))
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-._")
	if len(out) > 63 {
		out = strings.Trim(out[:63], "-._")
	}
	if out == "" {
		return "gpu"
	}
	return out
}
