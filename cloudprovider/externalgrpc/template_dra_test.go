package externalgrpc

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// TestTemplateResourceSlicesFromNodeAnnotations: the protocol's template is
// a Node only; upstream's dra-driver and gpu-count capacity annotations on
// that Node give the template its ResourceSlice (a fresh copy per call), and
// annotations that do not parse make the template a bad answer.
func TestTemplateResourceSlicesFromNodeAnnotations(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		ann         map[string]string
		wantDevices []string
		wantBad     bool
	}{
		{name: "no annotations: no slices"},
		{name: "driver and count", ann: map[string]string{cloudprovider.DRADriverAnnotation: "gpu.example.com",
			cloudprovider.GPUCountAnnotation: "2"}, wantDevices: []string{"gpu.example.com/gpu-0", "gpu.example.com/gpu-1"}},
		{name: "count without driver: no slices", ann: map[string]string{cloudprovider.GPUCountAnnotation: "2"}},
		{name: "count not a number", ann: map[string]string{cloudprovider.DRADriverAnnotation: "gpu.example.com",
			cloudprovider.GPUCountAnnotation: "two"}, wantBad: true},
		{name: "bad driver name", ann: map[string]string{cloudprovider.DRADriverAnnotation: "Not_A_Driver",
			cloudprovider.GPUCountAnnotation: "1"}, wantBad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeServer()
			s.addGroup("a", 0, 10, 0)
			tmpl := &apiv1.Node{}
			tmpl.Name, tmpl.Annotations = "t", tc.ann
			b, err := tmpl.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			s.templates["a"] = b
			p := serve(t, s)
			groups, err := p.NodeGroups(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				ni, err := groups[0].TemplateNodeInfo(ctx)
				if tc.wantBad {
					if !errors.Is(err, ErrBadAnswer) {
						t.Fatalf("err = %v, want ErrBadAnswer", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, sl := range ni.ResourceSlices {
					if sl.Spec.NodeName == nil || *sl.Spec.NodeName != "t" {
						t.Errorf("slice %s not bound to the template node", sl.Name)
					}
					for _, d := range sl.Spec.Devices {
						got = append(got, sl.Spec.Driver+"/"+d.Name)
					}
					sl.Spec.Devices = nil // the next call must not see this
				}
				if diff := cmp.Diff(tc.wantDevices, got); diff != "" {
					t.Errorf("devices (-want +got):\n%s", diff)
				}
			}
		})
	}
}
