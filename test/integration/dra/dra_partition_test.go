package dra

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// migGroupYAML is a kwok group (8 CPUs, 32Gi) whose nodes have one GPU of
// driver cut MIG-like: counter set gpu-0 of 7 compute slices and 40Gi,
// consumed by the whole GPU (all of it) and by seven 1g, three 2g and two
// 3g partitions (1, 2, 3 slices), each with the attribute profile.
func migGroupYAML(e *framework.Env, name, driver string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "- name: %s\n  minSize: 0\n  maxSize: 10\n  template:\n", name)
	fmt.Fprintf(&b, "    labels: {%s: %s, pool: %s}\n", framework.TestNamespaceLabel, e.Namespace, name)
	b.WriteString("    capacity: {cpu: \"8\", memory: 32Gi, pods: \"110\"}\n")
	fmt.Fprintf(&b, "    devices:\n    - driver: %s\n", driver)
	b.WriteString("      sharedCounters:\n      - name: gpu-0\n        counters: {slices: {value: \"7\"}, memory: {value: 40Gi}}\n")
	b.WriteString("      devices:\n")
	device := func(name, profile string, slices int, memory string) {
		fmt.Fprintf(&b, "      - name: %s\n        attributes: {profile: {string: %s}}\n", name, profile)
		fmt.Fprintf(&b, "        consumesCounters:\n        - counterSet: gpu-0\n          counters: {slices: {value: \"%d\"}, memory: {value: %s}}\n",
			slices, memory)
	}
	device("gpu-0", "whole", 7, "40Gi")
	for i := 0; i < 7; i++ {
		device(fmt.Sprintf("gpu-0-1g-%d", i), "1g.5gb", 1, "5Gi")
	}
	for i := 0; i < 3; i++ {
		device(fmt.Sprintf("gpu-0-2g-%d", i), "2g.10gb", 2, "10Gi")
	}
	for i := 0; i < 2; i++ {
		device(fmt.Sprintf("gpu-0-3g-%d", i), "3g.20gb", 3, "20Gi")
	}
	return b.String()
}

// createSliceDeployment creates a ResourceClaimTemplate asking for one
// device of class whose profile attribute (of driver) is profile, and a
// Deployment of replicas pods (1 CPU each) with a claim from it.
func createSliceDeployment(e *framework.Env, name, class, driver, profile string, replicas int32) {
	e.T.Helper()
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
					Expression: fmt.Sprintf(`device.attributes[%q].profile == %q`, driver, profile)}}}}}}}}}}
	if _, err := e.Client.ResourceV1().ResourceClaimTemplates(e.Namespace).Create(e.Context(), tmpl, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: apiv1.PodSpec{
				ResourceClaims: []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &name}},
				Containers: []apiv1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: apiv1.ResourceRequirements{
						Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"),
							apiv1.ResourceMemory: resource.MustParse("1Gi")},
						Claims: []apiv1.ResourceClaim{{Name: "gpu"}}}}}}}}}
	if _, err := e.Client.AppsV1().Deployments(e.Namespace).Create(e.Context(), d, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

func scaleDeployment(e *framework.Env, name string, replicas int) {
	e.T.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	if _, err := e.Client.AppsV1().Deployments(e.Namespace).Patch(e.Context(), name, types.MergePatchType, patch,
		metav1.PatchOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// allocatedDevices lists the devices the test's allocated claims hold.
func allocatedDevices(e *framework.Env) []string {
	e.T.Helper()
	list, err := e.Client.ResourceV1().ResourceClaims(e.Namespace).List(e.Context(), metav1.ListOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	var out []string
	for _, c := range list.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			out = append(out, r.Pool+"/"+r.Device)
		}
	}
	return out
}

// waitNodes waits until the group has want nodes and then checks that a
// few more loops (scan interval 1s) add none.
func waitNodes(e *framework.Env, group, plain string, want int, what string) {
	e.T.Helper()
	e.Eventually(60*time.Second, what, func(context.Context) (bool, error) {
		return itest.NodesPerPool(e)[group] == want, nil
	})
	time.Sleep(4 * time.Second)
	if got := itest.NodesPerPool(e); got[group] != want || got[plain] != 0 {
		e.T.Fatalf("%s: nodes per group %v, want %s:%d and no %s node", what, got, group, want, plain)
	}
}

// TestDRAPartitionedGPUsScaleBySlices: a kwok group at zero whose nodes
// have one GPU cut into 7 slices (sharedCounters/consumesCounters, kwok
// publishing the slices), and a bigger plain group. Pods each asking for
// one 1g slice (a selector on the profile attribute): 7 of them get
// exactly one node, an eighth a second one (the node has CPU for 8: its
// GPU's slices are what is full), not a plain node; kube-scheduler
// allocates the slices the simulation counted. Scaled down to 4 pods (3
// and 1 per node, the ReplicaSet deleting from the fuller node first),
// with --scale-down-gpu-utilization-threshold=0.4, the node with one slice
// in use (1/7) is drained, its pod moving to a free slice of the other,
// which is then kept as NotUnderutilized: 4 of 7 slices (counting devices,
// 4 of 13 would be under the threshold).
func TestDRAPartitionedGPUsScaleBySlices(t *testing.T) {
	e := framework.New(t)
	mig, plain := framework.UniqueName("mig"), framework.UniqueName("plain")
	driver := mig + ".example.com"
	cfg := "nodeGroups:\n" + migGroupYAML(e, mig, driver) +
		fmt.Sprintf("- name: %s\n  minSize: 0\n  maxSize: 10\n  template:\n    labels: {%s: %s, pool: %s}\n"+
			"    capacity: {cpu: \"32\", memory: 128Gi, pods: \"110\"}\n", plain, framework.TestNamespaceLabel, e.Namespace, plain)
	path := itest.WriteKwokConfig(e, cfg)
	itest.CreateDeviceClass(e, driver, driver)
	itest.DumpPods(e)
	createSliceDeployment(e, "slices", driver, driver, "1g.5gb", 7)

	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path, "--expander=least-waste",
		"--scale-down-gpu-utilization-threshold=0.4", "--unremovable-node-recheck-timeout=2s")...)
	waitRunningWithClaims(e, 7, 120*time.Second, "7 pods Running with a 1g slice each")
	waitNodes(e, mig, plain, 1, "7 slices of one GPU: one node")
	for _, d := range allocatedDevices(e) {
		if !strings.Contains(d, "/gpu-0-1g-") {
			t.Errorf("allocated %s, want 1g slices only", d)
		}
	}
	published, err := e.Client.ResourceV1().ResourceSlices().List(e.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counterSlices := 0
	for _, sl := range published.Items {
		if sl.Spec.Driver == driver && len(sl.Spec.SharedCounters) > 0 {
			counterSlices++
		}
	}
	if counterSlices != 1 {
		t.Errorf("%d slices of %s with counters, want 1 (the node's)", counterSlices, driver)
	}

	scaleDeployment(e, "slices", 8)
	waitRunningWithClaims(e, 8, 120*time.Second, "8 pods Running with a 1g slice each")
	waitNodes(e, mig, plain, 2, "an eighth slice: a second node")

	scaleDeployment(e, "slices", 4)
	e.Eventually(120*time.Second, "one node left, running the 4 pods", func(ctx context.Context) (bool, error) {
		running, nodes, err := itest.PodsOf(ctx, e, "slices")
		if err != nil || running != 4 || len(nodes) != 1 || itest.NodesPerPool(e)[mig] != 1 {
			return false, err
		}
		n, err := allocatedClaims(ctx, e)
		return n == 4, err
	})
	e.Eventually(60*time.Second, "the last node kept as NotUnderutilized (4 of 7 slices)", func(ctx context.Context) (bool, error) {
		kept, err := unremovableNodes(ctx, e)
		if err != nil {
			return false, err
		}
		for _, u := range kept {
			if strings.HasPrefix(u.Name, mig) {
				return u.Reason == "NotUnderutilized", nil
			}
		}
		return false, nil
	})
	t.Logf("the second node removed after draining it: %v", p.Log.Contains("Scaled down a node after draining it"))
}
