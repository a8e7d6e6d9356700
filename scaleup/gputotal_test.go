package scaleup

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// TestGPUTotalCountsDRADevices: a group whose template has no extended GPU
// resource but publishes 2 GPU devices of a DRA driver per node is capped by
// --gpu-total for that driver (the type a node without GPU label counts its
// DRA GPUs under); the devices of a driver that is not a GPU's are not.
func TestGPUTotalCountsDRADevices(t *testing.T) {
	ctx := context.Background()
	slice := func(driver string) *resourceapi.ResourceSlice {
		sl := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dra-" + driver},
			Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To("dra"),
				Pool: resourceapi.ResourcePool{Name: "dra", ResourceSliceCount: 1}}}
		for i := 0; i < 2; i++ {
			sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
		}
		return sl
	}
	for _, tc := range []struct {
		name, driver, limit string
		want                int
	}{
		{name: "no limit", driver: "gpu.example.com", want: 3},
		{name: "4 GPUs of gpu.example.com: 2 nodes", driver: "gpu.example.com", limit: "gpu.example.com", want: 2},
		{name: "a limit of another type", driver: "gpu.example.com", limit: "a100", want: 3},
		{name: "a NIC driver is not limited", driver: "dra.net", limit: "dra.net", want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			provider.AddNodeGroup("dra", 0, 10, 0, templateNode("dra", "4")).
				SetTemplateResourceSlices([]*resourceapi.ResourceSlice{slice(tc.driver)})
			o := newOrchestrator(t, provider, func(o *Options) {
				if tc.limit != "" {
					o.GPUTotal = []config.GPULimit{{Type: tc.limit, Min: 0, Max: 4}}
				}
			})
			res, err := runLoop(ctx, o, Input{Now: time.Now(), Pending: pendingPods(12, "1")})
			if err != nil {
				t.Fatal(err)
			}
			if got := increases(res)["dra"]; got != tc.want {
				t.Errorf("dra +%d, want +%d", got, tc.want)
			}
			if tc.want < 3 {
				found := false
				for _, reason := range res.Remaining {
					found = found || strings.Contains(reason, "--gpu-total")
				}
				if !found {
					t.Errorf("no remaining pod names the GPU limit: %v", res.Remaining)
				}
			}
		})
	}
}
