package clusterstate

import (
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// Kinds of difference between the resource pools a node group's template
// says its nodes publish and those a ready node of the group publishes: the
// mismatch_type label of dra_node_template_resources_mismatch, upstream's.
const (
	// DRAPoolMissing: a pool of the template the node does not publish.
	DRAPoolMissing = "missing"
	// DRAPoolExtra: a pool the node publishes that the template lacks.
	DRAPoolExtra = "extra"
	// DRAPoolMismatch: a pool of both whose devices differ (names,
	// attribute names, capacities).
	DRAPoolMismatch = "mismatch"
	// DRAPoolUnknown: a pool of the node whose newest generation is not
	// all published yet (fewer slices than its resourceSliceCount), so its
	// devices cannot be compared.
	DRAPoolUnknown = "unknown"
)

// DRAMismatch is one (driver, kind) series of
// dra_node_template_resources_mismatch.
type DRAMismatch struct {
	Driver, Type string
}

// DRATemplateMismatches are the last Update's pool mismatches between the
// ready nodes of node groups whose provider template has ResourceSlices
// and those templates, counted per driver and kind (one per pool and
// node). Empty without WithResourceSlices.
func (r *Registry) DRATemplateMismatches() map[DRAMismatch]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[DRAMismatch]int, len(r.draMismatches))
	for k, v := range r.draMismatches {
		out[k] = v
	}
	return out
}

// templateMismatches adds to out the pool mismatches between the
// node-local slices node publishes and those of its group's template.
func (d *deviceCheck) templateMismatches(node string, gs *GroupState, out map[DRAMismatch]int) {
	if d.slices == nil || gs == nil {
		return
	}
	tmpl := d.template(gs.NodeGroup)
	if tmpl == nil || tmpl.Node == nil || len(tmpl.ResourceSlices) == 0 {
		return // no prediction of the provider's to check
	}
	d.publishedOn(node)
	if d.listFailed {
		return
	}
	want := poolsOf(tmpl.ResourceSlices, tmpl.Node.Name)
	have := poolsOf(d.nodeSlices[node], node)
	for k, p := range have {
		if d.incomplete[p.driver+"/"+p.name] {
			out[DRAMismatch{Driver: p.driver, Type: DRAPoolUnknown}]++
			continue
		}
		w, ok := want[k]
		switch {
		case !ok:
			out[DRAMismatch{Driver: p.driver, Type: DRAPoolExtra}]++
		case !sameDevices(w.devices, p.devices):
			out[DRAMismatch{Driver: p.driver, Type: DRAPoolMismatch}]++
		}
	}
	for k, w := range want {
		if _, ok := have[k]; !ok {
			out[DRAMismatch{Driver: w.driver, Type: DRAPoolMissing}]++
		}
	}
}

// pool is one resource pool of a node's node-local slices.
type pool struct {
	driver, name string
	devices      []resourceapi.Device
}

// poolsOf groups slices into pools keyed by driver and the pool's name with
// the node's name taken out (a template's pools are named after the
// template node, a node's after the node).
func poolsOf(slices []*resourceapi.ResourceSlice, node string) map[string]*pool {
	out := map[string]*pool{}
	for _, sl := range slices {
		if sl == nil || sl.Spec.NodeName == nil {
			continue
		}
		key := sl.Spec.Driver + "/" + poolKey(sl.Spec.Pool.Name, node)
		p := out[key]
		if p == nil {
			p = &pool{driver: sl.Spec.Driver, name: sl.Spec.Pool.Name}
			out[key] = p
		}
		p.devices = append(p.devices, sl.Spec.Devices...)
	}
	return out
}

func poolKey(name, node string) string {
	if node == "" {
		return name
	}
	name = strings.TrimSuffix(name, "-"+node)
	return strings.ReplaceAll(name, node, "<node>")
}

// sameDevices compares two pools' devices by name, attribute names and
// capacities. Attribute values are not compared: drivers publish
// per-device identifiers (UUIDs, PCI addresses) no template can predict.
func sameDevices(a, b []resourceapi.Device) bool {
	if len(a) != len(b) {
		return false
	}
	byName := func(ds []resourceapi.Device) []resourceapi.Device {
		out := append([]resourceapi.Device(nil), ds...)
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out
	}
	a, b = byName(a), byName(b)
	for i := range a {
		if a[i].Name != b[i].Name || len(a[i].Attributes) != len(b[i].Attributes) ||
			!apiequality.Semantic.DeepEqual(a[i].Capacity, b[i].Capacity) {
			return false
		}
		for name := range a[i].Attributes {
			if _, ok := b[i].Attributes[name]; !ok {
				return false
			}
		}
	}
	return true
}
