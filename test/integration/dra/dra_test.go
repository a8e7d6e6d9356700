package dra

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// createGPUDeployment creates a ResourceClaimTemplate asking for one device
// of class and a Deployment of replicas pods, each with a claim from it.
func createGPUDeployment(e *framework.Env, name, class string, replicas int32) {
	e.T.Helper()
	createDevicesDeployment(e, name, class, replicas, 1)
}

// createDevicesDeployment is createGPUDeployment with claims for count
// devices each.
func createDevicesDeployment(e *framework.Env, name, class string, replicas int32, count int64) {
	e.T.Helper()
	itest.CreateClaimTemplate(e, name, class, count)
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

// allocatedClaims counts the test's ResourceClaims that have an allocation.
func allocatedClaims(ctx context.Context, e *framework.Env) (int, error) {
	list, err := e.Client.ResourceV1().ResourceClaims(e.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range list.Items {
		if c.Status.Allocation != nil {
			n++
		}
	}
	return n, nil
}

// TestDRAScaleUpFromZero: a Deployment of 5 pods, each with a claim for one
// device (template), scales the GPU group (2 devices per node, none to
// start with) from zero to exactly 3 nodes, not the plain group, whose
// nodes have room for every pod's CPU but no device; kube-scheduler
// allocates the claims on the slices the kwok provider published, and the
// pods run. Later loops add nothing.
func TestDRAScaleUpFromZero(t *testing.T) {
	e := framework.New(t)
	gpu, plain, driver, path := itest.DraGroups(e, 2)
	itest.DumpPods(e)
	createGPUDeployment(e, "train", driver, 5)

	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--expander=least-waste")...)
	waitRunningWithClaims(e, 5, 120*time.Second, "all 5 pods Running with their claims allocated")
	got := itest.NodesPerPool(e)
	if got[gpu] != 3 || got[plain] != 0 {
		t.Errorf("nodes per group = %v, want %s:3 and no %s node", got, gpu, plain)
	}
	slices, err := e.Client.ResourceV1().ResourceSlices().List(e.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	published := 0
	for _, sl := range slices.Items {
		if sl.Spec.Driver == driver {
			published++
			if len(sl.OwnerReferences) != 1 || sl.OwnerReferences[0].Kind != "Node" {
				t.Errorf("slice %s is not owned by its Node: %v", sl.Name, sl.OwnerReferences)
			}
		}
	}
	if published != 3 {
		t.Errorf("%d ResourceSlices of %s published, want one per node (3)", published, driver)
	}
	// Several more loops (scan interval 1s) must not add anything.
	time.Sleep(4 * time.Second)
	if again := itest.NodesPerPool(e); again[gpu] != 3 || again[plain] != 0 {
		t.Errorf("nodes changed after the pods ran: %v", again)
	}
	if p.Log.Contains("Dynamic Resource Allocation is not simulated") {
		t.Error("the autoscaler did not find resource.k8s.io/v1 served")
	}
	// The snapshot's Fork and Revert, timed per loop while DRA objects are
	// simulated, under upstream's labels (function_aggregated_duration_seconds).
	_, body, _ := p.Get(e.Context(), "/metrics")
	for _, f := range []string{"dra:snapshot:Fork", "dra:snapshot:Revert"} {
		if series := `cluster_autoscaler_function_aggregated_duration_seconds_count{function="` + f + `"}`; !strings.Contains(body, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}
