package chart_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
	cbclient "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/client"
	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// bufferControllerPermissions are what the CapacityBuffer controller asks
// beyond the default rules: ResourceQuotas and the scale subresources of the
// kinds scalableRefs commonly name. Its PodTemplate writes and Deployment reads
// are granted whether or not it runs, as upstream's chart does
// (bufferControllerDefaults).
func bufferControllerPermissions() []permission {
	var out []permission
	out = append(out, perms("", "resourcequotas", "list watch")...)
	for _, r := range []string{"deployments/scale", "replicasets/scale", "statefulsets/scale"} {
		out = append(out, perms("apps", r, "get")...)
	}
	return append(out, perms("", "replicationcontrollers/scale", "get")...)
}

// bufferControllerDefaults are the CapacityBuffer controller's permissions
// upstream's chart grants in every case.
func bufferControllerDefaults() []permission {
	return slices.Concat(perms("", "podtemplates", "create update"), perms("apps", "deployments", "get list watch"))
}

var createPods = permission{resource: "pods", verb: "create"}

// TestCapacityBufferRBAC: the controller's rules of ours are granted only with
// extraArgs.capacity-buffer-controller-enabled, and pods create only when
// its dry-run is on (the default); those upstream's chart grants in every
// case are granted in every case.
func TestCapacityBufferRBAC(t *testing.T) {
	for _, tc := range []struct {
		name, values        string
		controller, dryRuns bool
	}{
		{name: "default"},
		{name: "injection only", values: "extraArgs:\n  capacity-buffer-pod-injection-enabled: true\n"},
		{name: "controller", values: "extraArgs:\n  capacity-buffer-controller-enabled: true\n", controller: true, dryRuns: true},
		{name: "controller without dry-run", values: "extraArgs:\n  capacity-buffer-controller-enabled: true\n  capacity-buffer-pod-dry-run-enabled: false\n",
			controller: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := render(t, release, namespace, "cloudProvider: kwok\n"+tc.values)
			cluster, ns := m.rbac(t)
			checkRules(t, cluster, ns, "cluster-autoscaler-status", "cluster-autoscaler")
			for _, p := range bufferControllerPermissions() {
				if allows(cluster, p) != tc.controller {
					t.Errorf("%v granted: %v, want %v", p, allows(cluster, p), tc.controller)
				}
			}
			for _, p := range bufferControllerDefaults() {
				if !allows(cluster, p) {
					t.Errorf("%v not granted; upstream's chart grants it in every case", p)
				}
			}
			if allows(cluster, createPods) != tc.dryRuns {
				t.Errorf("%v granted: %v, want %v", createPods, allows(cluster, createPods), tc.dryRuns)
			}
			_, c := m.deployment(t)
			checkArgsParse(t, c.Args)
		})
	}
}

// TestCapacityBuffersRunWithTheChartsRBAC runs the real binary as the
// chart's service account with the buffer controller (its dry-run on) and
// the pod injection: a buffer of a PodTemplate and one of a Deployment's
// scale are translated, their pods injected, and no request is refused.
func TestCapacityBuffersRunWithTheChartsRBAC(t *testing.T) {
	addr := framework.FreeAddress(t)
	pool := framework.UniqueName("pool")
	in := install(t, fmt.Sprintf(`
cloudProvider: kwok
extraArgs:
  v: 2
  address: %q
  explain-address: ""
  scan-interval: 1s
  capacity-buffer-controller-enabled: true
  capacity-buffer-pod-injection-enabled: true
kwokProviderConfig:
  nodeGroups:
  - name: %s
    minSize: 0
    maxSize: 2
    template:
      labels: {pool: %s}
      capacity: {cpu: "4", memory: 16Gi, pods: "110"}
    faults: {registrationDelay: 2s}
`, addr, pool, pool))
	env, ns := in.env, in.env.Namespace
	ctx := env.Context()
	t.Cleanup(func() { deleteNodes(env, pool) })

	spec := apiv1.PodSpec{NodeSelector: map[string]string{"pool": pool}, Containers: []apiv1.Container{{Name: "c", Image: "fake",
		Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1")}}}}}
	if _, err := env.Client.CoreV1().PodTemplates(ns).Create(ctx, &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "shape"},
		Template: apiv1.PodTemplateSpec{Spec: spec}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Deployment whose pods fit no group (an unknown pool): only its scale is read.
	other := spec.DeepCopy()
	other.NodeSelector = map[string]string{"pool": "nowhere"}
	labels := map[string]string{"app": "web"}
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: *other}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cb, err := cbclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	buffers := cb.CapacityBuffers(ns)
	for name, s := range map[string]v1.CapacityBufferSpec{
		"spare":     {PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](2)},
		"web-spare": {ScalableRef: &v1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}, Percentage: ptr.To[int32](50)},
	} {
		if _, err := buffers.Create(ctx, &v1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: s}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	_, c := in.manifest.deployment(t)
	args := append(c.Args, "--kubeconfig="+impersonatingKubeconfig(t, in))
	var log framework.SyncBuffer
	cmd := exec.Command(autoscalerBinary, args...)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("cluster-autoscaler log:\n%s", log.String())
		}
	})

	for name, replicas := range map[string]int32{"spare": 2, "web-spare": 2} {
		env.Eventually(30*time.Second, "buffer "+name+" translated and provisioned", func(ctx context.Context) (bool, error) {
			b, err := buffers.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return meta.IsStatusConditionTrue(b.Status.Conditions, capacitybuffer.ConditionReadyForProvisioning) &&
				meta.IsStatusConditionTrue(b.Status.Conditions, capacitybuffer.ConditionProvisioning) &&
				b.Status.Replicas != nil && *b.Status.Replicas == replicas, nil
		})
	}
	env.Eventually(30*time.Second, "a node for the buffer", func(ctx context.Context) (bool, error) {
		nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + pool})
		return err == nil && len(nodes.Items) == 1, nil
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("cluster-autoscaler still running 20s after SIGTERM")
	}
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("a request was refused: %s", line)
		}
	}
}
