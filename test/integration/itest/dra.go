package itest

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// CreateDeviceClass creates a DeviceClass selecting driver's devices,
// deleted when the test ends.
func CreateDeviceClass(e *framework.Env, name, driver string) {
	e.T.Helper()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)}}}}}
	if _, err := e.Client.ResourceV1().DeviceClasses().Create(e.Context(), class, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() {
		_ = e.Client.ResourceV1().DeviceClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}
