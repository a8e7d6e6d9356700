package clusterapi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Cluster API names this provider reads and writes.
const (
	DefaultGroup = "cluster.x-k8s.io"
	// GroupEnv and VersionEnv override the API group and version.
	GroupEnv   = "CAPI_GROUP"
	VersionEnv = "CAPI_VERSION"

	// MinSizeAnnotation and MaxSizeAnnotation make a scalable resource a node group.
	MinSizeAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	MaxSizeAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
	// DeleteMachineAnnotation makes Cluster API delete that Machine first
	// when its MachineSet shrinks.
	DeleteMachineAnnotation = "cluster.x-k8s.io/delete-machine"
	// NodeMachineAnnotation is set by Cluster API on a Node: its Machine's name.
	NodeMachineAnnotation = "cluster.x-k8s.io/machine"
	// ClusterNameLabel names an object's Cluster.
	ClusterNameLabel = "cluster.x-k8s.io/cluster-name"
	// PlaceholderPrefix starts the instance id of a Machine without a provider ID.
	PlaceholderPrefix = "clusterapi://"

	kindMachineDeployment = "MachineDeployment"
	kindMachineSet        = "MachineSet"
	kindMachinePool       = "MachinePool"
	kindMachine           = "Machine"
)

// resourceOf maps the kinds this provider reads to their plural resource names.
var resourceOf = map[string]string{
	kindMachineDeployment: "machinedeployments",
	kindMachineSet:        "machinesets",
	kindMachinePool:       "machinepools",
	kindMachine:           "machines",
}

// discoverySpec is one --node-group-auto-discovery=clusterapi:... filter; an
// object matches when every given key matches.
type discoverySpec struct {
	namespace   string
	clusterName string
	labels      map[string]string
}

// parseDiscoverySpecs parses the clusterapi auto-discovery specs; specs of
// other discoverers are an error, as this provider cannot act on them.
func parseDiscoverySpecs(specs []string) ([]discoverySpec, error) {
	var out []discoverySpec
	for _, s := range specs {
		rest, ok := strings.CutPrefix(s, "clusterapi:")
		if !ok {
			return nil, fmt.Errorf("--node-group-auto-discovery %q: the clusterapi provider understands only clusterapi:<key>=<value>,...", s) //nolint:staticcheck // ST1005: the "..." is the syntax's, not punctuation
		}
		d := discoverySpec{labels: map[string]string{}}
		for _, kv := range strings.Split(rest, ",") {
			if kv == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || v == "" {
				return nil, fmt.Errorf("--node-group-auto-discovery %q: %q is not <key>=<value>", s, kv)
			}
			switch k {
			case "namespace":
				d.namespace = v
			case "clusterName":
				d.clusterName = v
			default:
				d.labels[k] = v
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// matches reports whether obj passes this filter.
func (d discoverySpec) matches(obj *unstructured.Unstructured) bool {
	if d.namespace != "" && obj.GetNamespace() != d.namespace {
		return false
	}
	if d.clusterName != "" && clusterName(obj) != d.clusterName {
		return false
	}
	labels := obj.GetLabels()
	for k, v := range d.labels {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// matchesAny is true with no specs, or when one spec matches.
func matchesAny(specs []discoverySpec, obj *unstructured.Unstructured) bool {
	if len(specs) == 0 {
		return true
	}
	for _, d := range specs {
		if d.matches(obj) {
			return true
		}
	}
	return false
}

// namespaceOf returns the one namespace every spec restricts to, or "" for all.
func namespaceOf(specs []discoverySpec) string {
	if len(specs) == 0 {
		return ""
	}
	ns := specs[0].namespace
	for _, d := range specs[1:] {
		if d.namespace != ns {
			return ""
		}
	}
	return ns
}

func clusterName(obj *unstructured.Unstructured) string {
	if c, _, _ := unstructured.NestedString(obj.Object, "spec", "clusterName"); c != "" {
		return c
	}
	return obj.GetLabels()[ClusterNameLabel]
}

// errNotAGroup says an object has neither size annotation.
var errNotAGroup = errors.New("no size annotations")

// parseSizes reads and validates the size annotations of obj.
func parseSizes(obj *unstructured.Unstructured) (minSize, maxSize int, err error) {
	a := obj.GetAnnotations()
	minS, hasMin := a[MinSizeAnnotation]
	maxS, hasMax := a[MaxSizeAnnotation]
	if !hasMin && !hasMax {
		return 0, 0, errNotAGroup
	}
	if !hasMin || !hasMax {
		return 0, 0, fmt.Errorf("both %s and %s are needed", MinSizeAnnotation, MaxSizeAnnotation)
	}
	minSize, err = parseCount(MinSizeAnnotation, minS)
	if err != nil {
		return 0, 0, err
	}
	maxSize, err = parseCount(MaxSizeAnnotation, maxS)
	if err != nil {
		return 0, 0, err
	}
	if minSize > maxSize {
		return 0, 0, fmt.Errorf("min size %d is above max size %d", minSize, maxSize)
	}
	return minSize, maxSize, nil
}

func parseCount(key, s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%s %q is not an integer", key, s)
	}
	if n < 0 {
		return 0, fmt.Errorf("%s %d is negative", key, n)
	}
	return n, nil
}

// replicas returns spec.replicas; a missing field counts as 0 for groups
// and is reported so that callers can tell.
func replicas(obj *unstructured.Unstructured) (int, bool) {
	n, found, err := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if err != nil || !found {
		return 0, false
	}
	return int(n), true
}

// ownerOfKind returns the name of obj's owner of kind, or "".
func ownerOfKind(obj *unstructured.Unstructured, group, kind string) string {
	for _, o := range obj.GetOwnerReferences() {
		if g, _, _ := strings.Cut(o.APIVersion, "/"); o.Kind == kind && g == group {
			return o.Name
		}
	}
	return ""
}

// machineInstanceID is the Machine's provider ID, or a stable placeholder
// for a Machine that has none yet.
func machineInstanceID(m *unstructured.Unstructured) string {
	if id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); id != "" {
		return id
	}
	return PlaceholderPrefix + m.GetNamespace() + "/" + m.GetName()
}

func nodeRefName(m *unstructured.Unstructured) string {
	n, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
	return n
}
