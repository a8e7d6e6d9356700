package cloudprovider

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Upstream's scale-from-zero annotations for DRA GPUs (Cluster API names
// them on the scalable resource; the external gRPC provider reads them on
// the template Node).
const (
	DRADriverAnnotation = "capacity.cluster-autoscaler.kubernetes.io/dra-driver"
	GPUCountAnnotation  = "capacity.cluster-autoscaler.kubernetes.io/gpu-count"
	// MaxSliceDevices is how many devices one ResourceSlice holds at most.
	MaxSliceDevices = 128
)

// GPUTemplateSlices is the ResourceSlice a template node nodeName publishes
// for count GPUs of DRA driver: one pool named after the node, in one
// slice, devices gpu-0..gpu-<count-1>, each with the attribute type=gpu
// (upstream's shape). count 0 gives none; a driver name that is not a DNS
// subdomain, or more than MaxSliceDevices devices, is an error.
func GPUTemplateSlices(nodeName, driver string, count int) ([]*resourceapi.ResourceSlice, error) {
	if errs := validation.IsDNS1123Subdomain(driver); len(errs) > 0 {
		return nil, fmt.Errorf("%s %q is not a DNS subdomain: %s", DRADriverAnnotation, driver, strings.Join(errs, "; "))
	}
	if count < 0 || count > MaxSliceDevices {
		return nil, fmt.Errorf("%s %d with %s: want 0..%d devices (one ResourceSlice)", GPUCountAnnotation, count,
			DRADriverAnnotation, MaxSliceDevices)
	}
	if count == 0 {
		return nil, nil
	}
	gpuType := "gpu"
	sl := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-" + driver},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: &nodeName,
			Pool: resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1}},
	}
	for i := 0; i < count; i++ {
		sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": {StringValue: &gpuType}}})
	}
	return []*resourceapi.ResourceSlice{sl}, nil
}
