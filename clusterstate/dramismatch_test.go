package clusterstate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// poolSlice is one slice of pool on node: devices named names, each with a
// uuid attribute (value per node) and memory of mem.
func poolSlice(node, driver, pool string, sliceCount int64, mem string, names ...string) *resourceapi.ResourceSlice {
	sl := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver + "-" + pool},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: sliceCount}}}
	for _, n := range names {
		sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{Name: n,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"uuid": {StringValue: ptr.To(node + "/" + n)}},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse(mem)}}})
	}
	return sl
}

// TestDRATemplateMismatches: the ready nodes of a group whose template has
// ResourceSlices are compared pool by pool with the template; per-device
// identifiers (the uuid attribute's values) do not count as a difference.
func TestDRATemplateMismatches(t *testing.T) {
	const gpu, nic, fpga = "gpu.example.com", "nic.example.com", "fpga.example.com"
	fp := fakeprovider.NewProvider()
	fp.AddNodeGroup("dra", 0, 10, 5, node("dra-template", true, t0))
	tmpl := []*resourceapi.ResourceSlice{
		poolSlice("dra-template", gpu, "dra-template", 1, "80Gi", "gpu-0", "gpu-1"),
		poolSlice("dra-template", nic, "dra-template", 1, "1", "nic-0"),
	}
	old := t0.Add(-time.Hour)
	same, smaller, split, more, young := node("same", true, old), node("smaller", true, old), node("split", true, old),
		node("more", true, old), node("young", false, t0.Add(-time.Minute))
	nodes := []*apiv1.Node{same, smaller, split, more, young}
	for _, n := range nodes {
		fp.AddNode("dra", n)
	}
	lister := &sliceList{list: []*resourceapi.ResourceSlice{
		// same: as the template, uuids aside.
		poolSlice("same", gpu, "same", 1, "80Gi", "gpu-0", "gpu-1"),
		poolSlice("same", nic, "same", 1, "1", "nic-0"),
		// smaller: GPUs with less memory than the template says.
		poolSlice("smaller", gpu, "smaller", 1, "40Gi", "gpu-0", "gpu-1"),
		poolSlice("smaller", nic, "smaller", 1, "1", "nic-0"),
		// split: the NIC in a pool of another name (the template's is
		// missing, this one extra).
		poolSlice("split", gpu, "split", 1, "80Gi", "gpu-0", "gpu-1"),
		poolSlice("split", nic, "split-uplink", 1, "1", "nic-0"),
		// more: an FPGA driver the template lacks, and a GPU pool of which
		// only one of two slices is published.
		poolSlice("more", gpu, "more", 2, "80Gi", "gpu-0", "gpu-1"),
		poolSlice("more", nic, "more", 1, "1", "nic-0"),
		poolSlice("more", fpga, "more", 1, "1", "fpga-0"),
		// young: not ready, not compared.
		poolSlice("young", fpga, "young", 1, "1", "fpga-0"),
	}}
	p := slicedProvider{Provider: fp, tmplSlices: map[string][]*resourceapi.ResourceSlice{"dra": tmpl}}
	r := NewRegistry(DefaultOptions(), WithResourceSlices(lister))
	update(t, r, p, nodes, t0)
	if got := r.Group("dra").Counts.Ready; got != 4 {
		t.Fatalf("%d ready nodes, want 4", got)
	}
	want := map[DRAMismatch]int{
		{Driver: gpu, Type: DRAPoolMismatch}: 1, // smaller
		{Driver: nic, Type: DRAPoolMissing}:  1, // split
		{Driver: nic, Type: DRAPoolExtra}:    1, // split
		{Driver: fpga, Type: DRAPoolExtra}:   1, // more
		{Driver: gpu, Type: DRAPoolUnknown}:  1, // more
	}
	if diff := cmp.Diff(want, r.DRATemplateMismatches()); diff != "" {
		t.Errorf("mismatches (-want +got):\n%s", diff)
	}

	// Once the nodes publish what the template says, the counts are gone.
	lister.list = []*resourceapi.ResourceSlice{
		poolSlice("same", gpu, "same", 1, "80Gi", "gpu-0", "gpu-1"), poolSlice("same", nic, "same", 1, "1", "nic-0")}
	update(t, r, p, []*apiv1.Node{same}, t0.Add(time.Minute))
	if got := r.DRATemplateMismatches(); len(got) != 0 {
		t.Errorf("mismatches %v, want none", got)
	}
}

// Without a provider template with slices there is no prediction to check.
func TestDRATemplateMismatchesNeedATemplate(t *testing.T) {
	fp := fakeprovider.NewProvider()
	fp.AddNodeGroup("g", 0, 10, 1, node("g-template", true, t0))
	n := node("n", true, t0.Add(-time.Hour))
	fp.AddNode("g", n)
	lister := &sliceList{list: []*resourceapi.ResourceSlice{poolSlice("n", "gpu.example.com", "n", 1, "80Gi", "gpu-0")}}
	r := NewRegistry(DefaultOptions(), WithResourceSlices(lister))
	update(t, r, fp, []*apiv1.Node{n}, t0)
	if got := r.DRATemplateMismatches(); len(got) != 0 {
		t.Errorf("mismatches %v, want none", got)
	}
}
