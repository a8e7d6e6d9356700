package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

const zoneLabel = "topology.kubernetes.io/zone"

// zonalStorage creates a WaitForFirstConsumer StorageClass without a
// provisioner and n statically provisioned PVs of it that only nodes of zone
// can use; all are deleted when the test ends.
func zonalStorage(e *framework.Env, zone string, n int) (class string) {
	e.T.Helper()
	class = framework.UniqueName("local")
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
	if _, err := e.Client.StorageV1().StorageClasses().Create(e.Context(), sc, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	var pvs []string
	for i := range n {
		pv := &apiv1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", class, i)},
			Spec: apiv1.PersistentVolumeSpec{StorageClassName: class,
				Capacity:                      apiv1.ResourceList{apiv1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []apiv1.PersistentVolumeAccessMode{apiv1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: apiv1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        apiv1.PersistentVolumeSource{Local: &apiv1.LocalVolumeSource{Path: fmt.Sprintf("/mnt/disk%d", i)}},
				NodeAffinity: &apiv1.VolumeNodeAffinity{Required: &apiv1.NodeSelector{NodeSelectorTerms: []apiv1.NodeSelectorTerm{{
					MatchExpressions: []apiv1.NodeSelectorRequirement{{Key: zoneLabel, Operator: apiv1.NodeSelectorOpIn, Values: []string{zone}}},
				}}}}}}
		if _, err := e.Client.CoreV1().PersistentVolumes().Create(e.Context(), pv, metav1.CreateOptions{}); err != nil {
			e.T.Fatal(err)
		}
		pvs = append(pvs, pv.Name)
	}
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, pv := range pvs {
			_ = e.Client.CoreV1().PersistentVolumes().Delete(ctx, pv, metav1.DeleteOptions{})
		}
		_ = e.Client.StorageV1().StorageClasses().Delete(ctx, class, metav1.DeleteOptions{})
	})
	return class
}

// statefulSet runs n pods of cpu pinned to pool, each with a claim of class
// from volumeClaimTemplates, created in parallel.
func statefulSet(e *framework.Env, name, pool, class string, n int32, cpu string) {
	e.T.Helper()
	labels := map[string]string{"app": name}
	ss := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec: appsv1.StatefulSetSpec{Replicas: &n, ServiceName: name, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: apiv1.PodSpec{
				NodeSelector: map[string]string{"pool": pool},
				Containers: []apiv1.Container{{Name: "c", Image: "fake",
					Resources:    apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse("100Mi")}},
					VolumeMounts: []apiv1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}},
			VolumeClaimTemplates: []apiv1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: apiv1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []apiv1.PersistentVolumeAccessMode{apiv1.ReadWriteOnce},
					Resources: apiv1.VolumeResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceStorage: resource.MustParse("1Gi")}}}}}}}
	if _, err := e.Client.AppsV1().StatefulSets(e.Namespace).Create(e.Context(), ss, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// boundClaims counts the test's PVCs the PV controller has bound.
func boundClaims(ctx context.Context, e *framework.Env) (int, error) {
	list, err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	bound := 0
	for _, c := range list.Items {
		if c.Status.Phase == apiv1.ClaimBound {
			bound++
		}
	}
	return bound, nil
}

// TestStatefulSetWithVolumesScalesUpAndDown: a StatefulSet whose pods claim
// zonal, statically provisioned volumes through a WaitForFirstConsumer
// StorageClass makes the autoscaler add kwok nodes in the volumes' zone;
// kube-scheduler places the pods there and the PV controller binds their
// claims. Scaled down to one replica, the StatefulSet leaves nodes the
// autoscaler removes (simulating the move of a pod with a bound claim), down
// to the one node its last pod needs. The autoscaler never crashes (pods
// with claims used to panic it in the scheduler framework's volume plugins).
func TestStatefulSetWithVolumesScalesUpAndDown(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("vol")
	zone := "zone-" + e.Namespace
	// The group's template carries the zone label the PVs' node affinity asks for.
	path := writeKwokConfig(e, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  minSize: 0
  maxSize: 5
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s, %[4]s: %[5]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
`, group, framework.TestNamespaceLabel, e.Namespace, zoneLabel, zone))
	dumpPods(e)
	class := zonalStorage(e, zone, 3)
	// 1.5 CPU each: two pods per 4-CPU node, so three pods need two nodes.
	statefulSet(e, "db", group, class, 3, "1500m")
	p := startAutoscaler(t, "autoscaler", scaleDownArgs(e, path)...)
	alive := func() error {
		select {
		case <-p.done:
			return fmt.Errorf("the autoscaler exited: %v", p.exitErr)
		default:
		}
		if p.log.Contains("panic") {
			return fmt.Errorf("the autoscaler logged a panic")
		}
		return nil
	}

	e.Eventually(120*time.Second, "three db pods Running on new nodes of the group, their claims bound", func(ctx context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		running, nodes, err := podsOf(ctx, e, "db")
		if err != nil || running != 3 {
			return false, err
		}
		for node := range nodes {
			if !strings.HasPrefix(node, group) {
				return false, fmt.Errorf("a db pod runs on %s, not on a node of %s", node, group)
			}
		}
		bound, err := boundClaims(ctx, e)
		return err == nil && bound == 3, err
	})
	if n := len(nodeNames(e, group)); n != 2 {
		t.Errorf("the group has %d nodes after the scale-up, want 2 (two 1.5-CPU pods per 4-CPU node)", n)
	}

	patch := []byte(`{"spec":{"replicas":1}}`)
	if _, err := e.Client.AppsV1().StatefulSets(e.Namespace).Patch(e.Context(), "db", types.MergePatchType, patch,
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(120*time.Second, "one node left, running db-0", func(ctx context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		running, nodes, err := podsOf(ctx, e, "db")
		if err != nil || running != 1 || len(nodeNames(e, group)) != 1 {
			return false, err
		}
		for node := range nodes {
			if node != nodeNames(e, group)[0] {
				return false, nil
			}
		}
		return p.log.Contains("Scaled down"), nil
	})
	time.Sleep(5 * time.Second) // a few more loops with the claims in the snapshot
	if err := alive(); err != nil {
		t.Fatal(err)
	}
}
