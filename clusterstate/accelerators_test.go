package clusterstate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

func withResource(n *apiv1.Node, name apiv1.ResourceName, count int64) *apiv1.Node {
	n = n.DeepCopy()
	q := *resource.NewQuantity(count, resource.DecimalSI)
	n.Status.Capacity = apiv1.ResourceList{name: q}
	n.Status.Allocatable = apiv1.ResourceList{name: q}
	return n
}

// Every accelerator counted as a GPU takes part in the readiness of GPU
// nodes: a labelled node with its accelerator allocatable is ready (not
// resource unready for lack of nvidia.com/gpu), and a node of a group whose
// template has the accelerator is resource unready until the node has it.
func TestRegistryReadinessOfEveryAccelerator(t *testing.T) {
	for _, res := range []apiv1.ResourceName{"nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/xe", "habana.ai/gaudi"} {
		t.Run(string(res), func(t *testing.T) {
			fp := fakeprovider.NewProvider()
			created := t0.Add(-time.Hour) // past the startup time: late devices mean unready
			fp.AddNodeGroup("labelled", 0, 10, 2, nil)
			fp.AddNodeGroup("templated", 0, 10, 2, withResource(node("t", true, t0), res, 8))
			ready := withResource(node("labelled-ready", true, created), res, 8)
			ready.Labels = map[string]string{fp.GPULabel(): "acc"}
			late := node("labelled-late", true, created)
			late.Labels = map[string]string{fp.GPULabel(): "acc"}
			tmplReady := withResource(node("templated-ready", true, created), res, 8)
			tmplLate := node("templated-late", true, created)
			fp.AddNode("labelled", ready)
			fp.AddNode("labelled", late)
			fp.AddNode("templated", tmplReady)
			fp.AddNode("templated", tmplLate)
			r := NewRegistry(DefaultOptions(), WithResourceSlices(&sliceList{list: []*resourceapi.ResourceSlice{}}))
			update(t, r, fp, []*apiv1.Node{ready, late, tmplReady, tmplLate}, t0)
			for _, g := range []string{"labelled", "templated"} {
				want := NodeCounts{Ready: 1, Unready: 1, ResourceUnready: 1}
				if diff := cmp.Diff(want, r.Group(g).Counts); diff != "" {
					t.Errorf("group %s counts (-want +got):\n%s", g, diff)
				}
			}
		})
	}
}
