package clusterapi

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// TestTemplateResourceSlicesFromAnnotations: upstream's dra-driver
// annotation with gpu-count gives the template one ResourceSlice of that
// driver (pool named after the template node, devices gpu-0.. typed gpu)
// instead of an extended resource, which only an explicit gpu-type adds;
// --gpu-total then counts the devices. Bad values are this group's error.
func TestTemplateResourceSlicesFromAnnotations(t *testing.T) {
	base := map[string]string{CPUAnnotation: "8", MemoryAnnotation: "32Gi"}
	with := func(kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	tests := []struct {
		name        string
		ann         map[string]string
		wantErr     string
		wantDevices []string // driver/device
		wantGPURes  string   // the extended resource's quantity, "" for none
	}{
		{name: "no DRA driver: extended resource as before", ann: with(GPUCountAnnotation, "2"), wantGPURes: "2"},
		{name: "DRA driver and count", ann: with(DRADriverAnnotation, "gpu.nvidia.com", GPUCountAnnotation, "2"),
			wantDevices: []string{"gpu.nvidia.com/gpu-0", "gpu.nvidia.com/gpu-1"}},
		{name: "DRA driver, count and an explicit gpu-type: both",
			ann:         with(DRADriverAnnotation, "gpu.nvidia.com", GPUCountAnnotation, "1", GPUTypeAnnotation, "nvidia.com/gpu"),
			wantDevices: []string{"gpu.nvidia.com/gpu-0"}, wantGPURes: "1"},
		{name: "DRA driver without count: no slice", ann: with(DRADriverAnnotation, "gpu.nvidia.com")},
		{name: "count 0: no slice", ann: with(DRADriverAnnotation, "gpu.nvidia.com", GPUCountAnnotation, "0")},
		{name: "driver not a DNS subdomain", ann: with(DRADriverAnnotation, "GPU_driver", GPUCountAnnotation, "1"),
			wantErr: "dra-driver"},
		{name: "too many devices", ann: with(DRADriverAnnotation, "gpu.nvidia.com", GPUCountAnnotation, "129"),
			wantErr: "want 0..128 devices"},
		{name: "bad count", ann: with(DRADriverAnnotation, "gpu.nvidia.com", GPUCountAnnotation, "two"), wantErr: "gpu-count"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := makeObj(kindMachineDeployment, "ns", "md").sizes("0", "3").replicas(0)
			for k, v := range tc.ann {
				o.ann(k, v)
			}
			p, _ := newProvider(t, nil, o)
			ni, err := onlyGroup(t, p).TemplateNodeInfo(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, sl := range ni.ResourceSlices {
				if sl.Spec.NodeName == nil || *sl.Spec.NodeName != ni.Node.Name || sl.Spec.Pool.Name != ni.Node.Name ||
					sl.Spec.Pool.ResourceSliceCount != 1 {
					t.Errorf("slice %s is not the template node's own pool: %+v", sl.Name, sl.Spec)
				}
				for _, d := range sl.Spec.Devices {
					if typ := d.Attributes["type"].StringValue; typ == nil || *typ != "gpu" {
						t.Errorf("device %s has no type=gpu attribute", d.Name)
					}
					got = append(got, sl.Spec.Driver+"/"+d.Name)
				}
			}
			if diff := cmp.Diff(tc.wantDevices, got); diff != "" {
				t.Errorf("devices (-want +got):\n%s", diff)
			}
			gotRes := ""
			if q, ok := ni.Node.Status.Capacity[apiv1.ResourceName(defaultGPUResourceKey)]; ok {
				gotRes = q.String()
			}
			if gotRes != tc.wantGPURes {
				t.Errorf("extended GPU resource = %q, want %q", gotRes, tc.wantGPURes)
			}
			if len(tc.wantDevices) > 0 && tc.wantGPURes == "" {
				typ, n := cloudprovider.GPUsWithDevices(context.Background(), fakeprovider.NewProvider(), ni.Node, ni.ResourceSlices)
				if want := fmt.Sprintf("gpu.nvidia.com:%d", len(tc.wantDevices)); fmt.Sprintf("%s:%d", typ, n) != want {
					t.Errorf("--gpu-total counts %s:%d, want %s", typ, n, want)
				}
			}
		})
	}
}
