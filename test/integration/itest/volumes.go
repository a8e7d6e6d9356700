package itest

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// ZoneLabel is the well-known zone label of nodes and volumes.
const ZoneLabel = "topology.kubernetes.io/zone"

// ZonalStorage creates a WaitForFirstConsumer StorageClass without a
// provisioner and n statically provisioned PVs of it that only nodes of zone
// can use; all are deleted when the test ends.
func ZonalStorage(e *framework.Env, zone string, n int) (class string) {
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
					MatchExpressions: []apiv1.NodeSelectorRequirement{{Key: ZoneLabel, Operator: apiv1.NodeSelectorOpIn, Values: []string{zone}}},
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

// StatefulSet runs n pods of cpu pinned to pool, each with a claim of class
// from volumeClaimTemplates, created in parallel.
func StatefulSet(e *framework.Env, name, pool, class string, n int32, cpu string) {
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
