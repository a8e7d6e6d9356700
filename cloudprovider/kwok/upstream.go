package kwok

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// Upstream's kwok provider format: a config naming where template nodes
// come from (a ConfigMap of Node objects, or the cluster's own nodes) and
// how they are grouped (by a label or an annotation), with the group sizes
// in annotations of the template nodes. It is read as well as this
// provider's own format, so an upstream kwok set-up works unchanged.
const (
	// UpstreamConfigMapEnv overrides the name of the config ConfigMap, as upstream.
	UpstreamConfigMapEnv = "KWOK_PROVIDER_CONFIGMAP"
	// UpstreamNamespaceEnv names the namespace of the ConfigMaps, as upstream.
	UpstreamNamespaceEnv = "POD_NAMESPACE"

	upstreamMinAnnotation     = "cluster-autoscaler.kwok.nodegroup/min-count"
	upstreamMaxAnnotation     = "cluster-autoscaler.kwok.nodegroup/max-count"
	upstreamDesiredAnnotation = "cluster-autoscaler.kwok.nodegroup/desired-count"
	upstreamNameAnnotation    = "cluster-autoscaler.kwok.nodegroup/name"
	upstreamDefaultMaxSize    = 200
	upstreamTemplatesConfig   = "kwok-provider-templates"
	upstreamTemplatesKey      = "templates"
	// UpstreamTaintKey is the taint upstream puts on the nodes it creates
	// (unless nodes.skipTaint), so that real workloads stay off them.
	UpstreamTaintKey = "kwok-provider"
)

type upstreamConfig struct {
	APIVersion    string `json:"apiVersion"`
	ReadNodesFrom string `json:"readNodesFrom"`
	Nodegroups    *struct {
		FromNodeLabelKey      string `json:"fromNodeLabelKey"`
		FromNodeAnnotationKey string `json:"fromNodeAnnotationKey"`
	} `json:"nodegroups"`
	Nodes *struct {
		SkipTaint bool `json:"skipTaint"`
		GPUConfig *struct {
			GPULabelKey       string              `json:"gpuLabelKey"`
			AvailableGPUTypes map[string]struct{} `json:"availableGPUTypes"`
		} `json:"gpuConfig"`
	} `json:"nodes"`
	ConfigMap *struct {
		Name string `json:"name"`
		Key  string `json:"key"`
	} `json:"configmap"`
	Kwok map[string]any `json:"kwok"`
}

// isUpstreamFormat tells upstream's format from this provider's: upstream's
// has apiVersion or readNodesFrom at the top, this one nodeGroups.
func isUpstreamFormat(data []byte) bool {
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return false
	}
	_, v := top["apiVersion"]
	_, r := top["readNodesFrom"]
	return v || r
}

// translateUpstream reads an upstream kwok config and its template nodes
// and returns the equivalent config in this provider's format.
func translateUpstream(ctx context.Context, client kubernetes.Interface, namespace string, data []byte) (*Config, error) {
	var u upstreamConfig
	if err := yaml.UnmarshalStrict(data, &u); err != nil {
		return nil, fmt.Errorf("parsing upstream's kwok provider config: %w", err)
	}
	if u.APIVersion != "v1alpha1" {
		return nil, fmt.Errorf("apiVersion %q: upstream's kwok config has v1alpha1", u.APIVersion)
	}
	byLabel, byAnnotation := "", ""
	if u.Nodegroups != nil {
		byLabel, byAnnotation = u.Nodegroups.FromNodeLabelKey, u.Nodegroups.FromNodeAnnotationKey
	}
	switch {
	case byLabel != "" && byAnnotation != "":
		return nil, errors.New("nodegroups: set fromNodeLabelKey or fromNodeAnnotationKey, not both")
	case byLabel == "" && byAnnotation == "":
		return nil, errors.New("nodegroups: set fromNodeLabelKey or fromNodeAnnotationKey")
	}
	var templates []apiv1.Node
	switch u.ReadNodesFrom {
	case "configmap", "":
		name, key := upstreamTemplatesConfig, upstreamTemplatesKey
		if u.ConfigMap != nil && u.ConfigMap.Name != "" {
			name = u.ConfigMap.Name
		}
		if u.ConfigMap != nil && u.ConfigMap.Key != "" {
			key = u.ConfigMap.Key
		}
		cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading the template nodes' ConfigMap %s/%s: %w", namespace, name, err)
		}
		text, ok := cm.Data[key]
		if !ok && key != upstreamTemplatesKey {
			text, ok = cm.Data[upstreamTemplatesKey]
		}
		if !ok {
			return nil, fmt.Errorf("ConfigMap %s/%s has no key %q with the template nodes", namespace, name, key)
		}
		if templates, err = parseTemplateNodes(text); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", namespace, name, key, err)
		}
	case "cluster":
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing the cluster's nodes as templates: %w", err)
		}
		templates = list.Items
	default:
		return nil, fmt.Errorf("readNodesFrom %q: want configmap or cluster", u.ReadNodesFrom)
	}
	cfg := &Config{}
	if u.Nodes != nil && u.Nodes.GPUConfig != nil {
		cfg.GPULabel = u.Nodes.GPUConfig.GPULabelKey
		for t := range u.Nodes.GPUConfig.AvailableGPUTypes {
			cfg.AvailableGPUTypes = append(cfg.AvailableGPUTypes, t)
		}
		sort.Strings(cfg.AvailableGPUTypes)
	}
	skipTaint := u.Nodes != nil && u.Nodes.SkipTaint
	seen := map[string]bool{}
	for i := range templates {
		n := &templates[i]
		group := n.Annotations[upstreamNameAnnotation]
		if group == "" && byLabel != "" {
			group = n.Labels[byLabel]
		}
		if group == "" && byAnnotation != "" {
			group = n.Annotations[byAnnotation]
		}
		if group == "" {
			continue // not in any group
		}
		name := groupName(group)
		if seen[name] {
			continue // the first node of a group is its template
		}
		seen[name] = true
		g, err := groupFromTemplateNode(n, name, skipTaint)
		if err != nil {
			return nil, fmt.Errorf("template node %s: %w", n.Name, err)
		}
		if name != group {
			klog.FromContext(ctx).Info("Renamed an upstream kwok node group to a valid name", "group", group, "name", name)
		}
		cfg.NodeGroups = append(cfg.NodeGroups, g)
	}
	if len(cfg.NodeGroups) == 0 {
		return nil, fmt.Errorf("no template node carries the grouping %s", strings.TrimSpace("label "+byLabel+" annotation "+byAnnotation))
	}
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// parseTemplateNodes reads Node objects: one List (kubectl get nodes -o
// yaml) or several YAML documents of one Node each.
func parseTemplateNodes(text string) ([]apiv1.Node, error) {
	var out []apiv1.Node
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(text, -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var head struct {
			Kind  string       `json:"kind"`
			Items []apiv1.Node `json:"items"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, err
		}
		switch head.Kind {
		case "List", "NodeList":
			out = append(out, head.Items...)
		case "Node":
			var n apiv1.Node
			if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
				return nil, err
			}
			out = append(out, n)
		default:
			return nil, fmt.Errorf("kind %q: want Node objects or a List of them", head.Kind)
		}
	}
	return out, nil
}

var invalidNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// groupName turns an upstream group name (often a label value such as an
// instance type, "m5.xlarge") into a DNS label, the names this provider uses.
func groupName(s string) string {
	n := strings.Trim(invalidNameChars.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(n) > 63 {
		n = strings.Trim(n[:63], "-")
	}
	if n == "" {
		n = "group"
	}
	return n
}

func groupFromTemplateNode(n *apiv1.Node, name string, skipTaint bool) (NodeGroupConfig, error) {
	count := func(key string, def int) (int, error) {
		v, ok := n.Annotations[key]
		if !ok || v == "" {
			return def, nil
		}
		c, err := strconv.Atoi(v)
		if err != nil || c < 0 {
			return 0, fmt.Errorf("annotation %s %q is not a whole number", key, v)
		}
		return c, nil
	}
	minSize, err := count(upstreamMinAnnotation, 0)
	if err != nil {
		return NodeGroupConfig{}, err
	}
	maxSize, err := count(upstreamMaxAnnotation, upstreamDefaultMaxSize)
	if err != nil {
		return NodeGroupConfig{}, err
	}
	desired, err := count(upstreamDesiredAnnotation, minSize)
	if err != nil {
		return NodeGroupConfig{}, err
	}
	if desired < minSize || desired > maxSize {
		return NodeGroupConfig{}, fmt.Errorf("desired-count %d is outside min-count %d .. max-count %d", desired, minSize, maxSize)
	}
	labels := map[string]string{}
	for k, v := range n.Labels {
		if k != "kubernetes.io/hostname" {
			labels[k] = v
		}
	}
	annotations := map[string]string{}
	for k, v := range n.Annotations {
		switch k {
		case upstreamMinAnnotation, upstreamMaxAnnotation, upstreamDesiredAnnotation, upstreamNameAnnotation,
			"kubectl.kubernetes.io/last-applied-configuration":
			continue
		}
		annotations[k] = v
	}
	taints := append([]apiv1.Taint(nil), n.Spec.Taints...)
	hasTaint := slices.ContainsFunc(taints, func(t apiv1.Taint) bool {
		return t.Key == UpstreamTaintKey && t.Effect == apiv1.TaintEffectNoSchedule
	})
	if !skipTaint && !hasTaint {
		// A node this provider made (readNodesFrom: cluster) has it already.
		taints = append(taints, apiv1.Taint{Key: UpstreamTaintKey, Value: "true", Effect: apiv1.TaintEffectNoSchedule})
	}
	capacity := n.Status.Capacity.DeepCopy()
	if capacity == nil {
		capacity = n.Status.Allocatable.DeepCopy()
	}
	return NodeGroupConfig{
		Name: name, MinSize: minSize, MaxSize: maxSize, InitialSize: desired,
		Template: TemplateConfig{Labels: labels, Annotations: annotations, Taints: taints,
			Capacity: capacity, Allocatable: n.Status.Allocatable.DeepCopy()},
	}, nil
}

// upstreamLocation returns the namespace and name of the config ConfigMap:
// POD_NAMESPACE and KWOK_PROVIDER_CONFIGMAP when set (upstream's
// variables), else --namespace and kwok-provider-config.
func upstreamLocation(namespace string) (string, string) {
	name := ConfigMapName
	if v := os.Getenv(UpstreamConfigMapEnv); v != "" {
		name = v
	}
	if v := os.Getenv(UpstreamNamespaceEnv); v != "" {
		namespace = v
	}
	return namespace, name
}

// FilterByDiscovery keeps the node groups that --node-group-auto-discovery
// selects: each spec kwok:<label>=<value>,... selects the groups whose
// template has every one of those labels (a key alone: the label with any
// value); several specs are ORed. No spec keeps every group. A spec of
// another discoverer, or a malformed one, is an error.
func (c *Config) FilterByDiscovery(specs []string) error {
	if len(specs) == 0 {
		return nil
	}
	type pair struct{ key, value string }
	var filters [][]pair
	for _, spec := range specs {
		disc, rest, ok := strings.Cut(spec, ":")
		if !ok || disc != Name {
			return fmt.Errorf("--node-group-auto-discovery %q: the kwok provider takes kwok:<label>=<value>,...", spec) //nolint:staticcheck // ST1005: the "..." is the syntax's, not punctuation
		}
		var f []pair
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
			if k == "" {
				return fmt.Errorf("--node-group-auto-discovery %q: empty label key", spec)
			}
			f = append(f, pair{k, v})
		}
		filters = append(filters, f)
	}
	matches := func(labels map[string]string, f []pair) bool {
		for _, p := range f {
			v, ok := labels[p.key]
			if !ok || (p.value != "" && v != p.value) {
				return false
			}
		}
		return true
	}
	var kept []NodeGroupConfig
	for _, g := range c.NodeGroups {
		for _, f := range filters {
			if matches(g.Template.Labels, f) {
				kept = append(kept, g)
				break
			}
		}
	}
	c.NodeGroups = kept
	return nil
}
