package kwok

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// TemplateHashAnnotation is written on every Node the provider creates: a
// hash of what the group's template gave the Node (templateHash). A group
// whose template changed since (the provider's config is read when the
// autoscaler starts, so after a restart with another config) reports the
// Node as drifted. A Node without it (made by an older version of the
// provider, or by someone else) is never reported drifted.
const TemplateHashAnnotation = "cluster-autoscaler.kubernetes.io/kwok-template-hash"

// templateHashVersion starts every hash; a hash of another version (the
// hashed fields changed) says nothing, and the Node is not drifted.
const templateHashVersion = "v1-"

var _ cloudprovider.DriftDetector = (*NodeGroup)(nil)

// hashedTemplate is what the hash covers, in a canonical form: the Node's
// labels but its hostname (the instance type label, the os and arch
// labels and the template's labels), its taints, its capacity and
// allocatable (by exact value: "4" and "4000m" are one), and the DRA
// devices of the group. Left out: annotations, the price, the sizes, the
// fault knobs and options, which do not change what a node is.
type hashedTemplate struct {
	Labels      [][2]string     `json:"labels"`
	Taints      [][3]string     `json:"taints"`
	Capacity    [][2]string     `json:"capacity"`
	Allocatable [][2]string     `json:"allocatable"`
	Devices     []DriverDevices `json:"devices,omitempty"`
}

// templateHash returns the hash of the template fields of node (as newNode
// built it) and of the group's devices.
func templateHash(node *apiv1.Node, devices []DriverDevices) string {
	h := hashedTemplate{Devices: devices}
	for k, v := range node.Labels {
		if k != apiv1.LabelHostname {
			h.Labels = append(h.Labels, [2]string{k, v})
		}
	}
	sort.Slice(h.Labels, func(i, j int) bool { return h.Labels[i][0] < h.Labels[j][0] })
	for _, t := range node.Spec.Taints {
		h.Taints = append(h.Taints, [3]string{t.Key, t.Value, string(t.Effect)})
	}
	sort.Slice(h.Taints, func(i, j int) bool {
		return strings.Join(h.Taints[i][:], "\x00") < strings.Join(h.Taints[j][:], "\x00")
	})
	h.Capacity = exactResources(node.Status.Capacity)
	h.Allocatable = exactResources(node.Status.Allocatable)
	b, err := json.Marshal(h)
	if err != nil {
		// Only plain strings and API types: cannot happen; an empty hash
		// makes the Node "not drifted" rather than failing its creation.
		return ""
	}
	sum := sha256.Sum256(b)
	return templateHashVersion + hex.EncodeToString(sum[:16])
}

// exactResources lists a resource list by name with exact values.
func exactResources(rl apiv1.ResourceList) [][2]string {
	out := make([][2]string, 0, len(rl))
	for name, q := range rl {
		out = append(out, [2]string{string(name), exactQuantity(q)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// exactQuantity writes a quantity's exact value as a reduced fraction, so
// that one value written two ways ("16Gi", "17179869184") is one string.
func exactQuantity(q resource.Quantity) string {
	d := q.AsDec()
	r := new(big.Rat).SetInt(d.UnscaledBig())
	if s := int64(d.Scale()); s != 0 {
		pow := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(abs(s)), nil))
		if s > 0 {
			r.Quo(r, pow)
		} else {
			r.Mul(r, pow)
		}
	}
	return r.RatString()
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// currentTemplateHash is the hash a Node made by the group now carries.
func (g *NodeGroup) currentTemplateHash() string {
	return g.newNode("drift-probe").Annotations[TemplateHashAnnotation]
}

// Drifted implements cloudprovider.DriftDetector: node is drifted when the
// template hash it was created with differs from the hash of the group's
// current template. A node that is not an instance of the group, or that
// carries no hash of this version, is not drifted (with an error saying
// why).
func (g *NodeGroup) Drifted(_ context.Context, node *apiv1.Node) (bool, string, error) {
	p := g.provider
	p.mu.Lock()
	in := p.instanceOf(node)
	p.mu.Unlock()
	if in == nil || in.Group != g.cfg.Name {
		return false, "", fmt.Errorf("node %s is not an instance of kwok node group %s", node.Name, g.cfg.Name)
	}
	have := node.Annotations[TemplateHashAnnotation]
	if !strings.HasPrefix(have, templateHashVersion) {
		return false, "", fmt.Errorf("node %s carries no %s annotation of version %s (made by an older provider or by hand): "+
			"its template is unknown", node.Name, TemplateHashAnnotation, strings.TrimSuffix(templateHashVersion, "-"))
	}
	want := g.currentTemplateHash()
	if want == "" || have == want {
		return false, "", nil
	}
	return true, fmt.Sprintf("kwok template %s, now %s", have, want), nil
}
