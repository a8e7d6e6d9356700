package capi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Names the stand-in controllers use.
const (
	Group                   = "cluster.x-k8s.io"
	Version                 = "v1beta2"
	DeleteMachineAnnotation = "cluster.x-k8s.io/delete-machine"
	// ProviderIDPrefix starts the provider IDs of the Machines and Nodes made here.
	ProviderIDPrefix = "capitest://"
	// PoolLabel on a Node names its MachineDeployment.
	PoolLabel = "pool"
)

// GVR returns the resource of this package's version of Cluster API.
func GVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: Version, Resource: resource}
}

// Reconciler plays Cluster API's MachineDeployment, MachineSet and Machine
// controllers in one namespace, with kwok Nodes as the machines' nodes.
type Reconciler struct {
	dyn        dynamic.Interface
	kube       kubernetes.Interface
	namespace  string
	nodeLabels map[string]string
}

// NewReconciler returns a reconciler of namespace; nodeLabels go on every Node it creates.
func NewReconciler(dyn dynamic.Interface, kube kubernetes.Interface, namespace string, nodeLabels map[string]string) *Reconciler {
	return &Reconciler{dyn: dyn, kube: kube, namespace: namespace, nodeLabels: nodeLabels}
}

// Run syncs every interval until ctx ends; errors are passed to report.
func (r *Reconciler) Run(ctx context.Context, interval time.Duration, report func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := r.Sync(ctx); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
			report(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// MachineDeployment returns a MachineDeployment of replicas with the given
// annotations, valid for the v1beta2 CRD.
func MachineDeployment(namespace, name string, replicas int64, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": "MachineDeployment",
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec": map[string]any{
			"clusterName": "test", "replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"md": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"md": name}},
				"spec":     machineSpec(),
			},
		},
	}}
	u.SetAnnotations(annotations)
	return u
}

func machineSpec() map[string]any {
	return map[string]any{
		"clusterName": "test",
		"bootstrap":   map[string]any{"dataSecretName": "none"},
		"infrastructureRef": map[string]any{
			"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TestMachine", "name": "none",
		},
	}
}

func ownerRef(o *unstructured.Unstructured) map[string]any {
	return map[string]any{"apiVersion": o.GetAPIVersion(), "kind": o.GetKind(), "name": o.GetName(),
		"uid": string(o.GetUID()), "controller": true}
}

func ownedBy(o *unstructured.Unstructured, owner *unstructured.Unstructured) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

func replicasOf(o *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
	return n
}

// Sync runs one pass of every stand-in controller.
func (r *Reconciler) Sync(ctx context.Context) error {
	mds, err := r.dyn.Resource(GVR("machinedeployments")).Namespace(r.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	sets := r.dyn.Resource(GVR("machinesets")).Namespace(r.namespace)
	var errs []error
	for i := range mds.Items {
		md := &mds.Items[i]
		ms, err := sets.Get(ctx, md.GetName()+"-ms", metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			ms = &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": Group + "/" + Version, "kind": "MachineSet",
				"metadata": map[string]any{"namespace": r.namespace, "name": md.GetName() + "-ms",
					"ownerReferences": []any{ownerRef(md)}, "labels": map[string]any{"cluster.x-k8s.io/deployment-name": md.GetName()}},
				"spec": map[string]any{"clusterName": "test", "replicas": replicasOf(md),
					"selector": map[string]any{"matchLabels": map[string]any{"md": md.GetName()}},
					"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"md": md.GetName()}}, "spec": machineSpec()}},
			}}
			if _, err := sets.Create(ctx, ms, metav1.CreateOptions{}); err != nil {
				errs = append(errs, err)
			}
		case err != nil:
			errs = append(errs, err)
		case replicasOf(ms) != replicasOf(md):
			_ = unstructured.SetNestedField(ms.Object, replicasOf(md), "spec", "replicas")
			if _, err := sets.Update(ctx, ms, metav1.UpdateOptions{}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	msList, err := sets.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	machines, err := r.dyn.Resource(GVR("machines")).Namespace(r.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range msList.Items {
		if err := r.syncSet(ctx, &msList.Items[i], machines.Items, mds.Items); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncSet creates or deletes Machines to reach the set's replicas (marked
// Machines go first, then the newest) and gives each Machine its Node.
func (r *Reconciler) syncSet(ctx context.Context, ms *unstructured.Unstructured, all []unstructured.Unstructured,
	mds []unstructured.Unstructured) error {
	var mine []*unstructured.Unstructured
	for i := range all {
		if ownedBy(&all[i], ms) && all[i].GetDeletionTimestamp() == nil {
			mine = append(mine, &all[i])
		}
	}
	pool := ms.GetName()
	for _, ref := range ms.GetOwnerReferences() {
		if ref.Kind == "MachineDeployment" {
			pool = ref.Name
		}
	}
	var md *unstructured.Unstructured
	for i := range mds {
		if mds[i].GetName() == pool {
			md = &mds[i]
		}
	}
	machines := r.dyn.Resource(GVR("machines")).Namespace(r.namespace)
	want := int(replicasOf(ms))
	for len(mine) < want {
		name := ms.GetName() + "-" + suffix()
		m := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": Group + "/" + Version, "kind": "Machine",
			"metadata": map[string]any{"namespace": r.namespace, "name": name, "ownerReferences": []any{ownerRef(ms)},
				"labels": map[string]any{"cluster.x-k8s.io/set-name": ms.GetName(), "cluster.x-k8s.io/deployment-name": pool}},
			"spec": machineSpec(),
		}}
		_ = unstructured.SetNestedField(m.Object, ProviderIDPrefix+name, "spec", "providerID")
		created, err := machines.Create(ctx, m, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		_ = unstructured.SetNestedField(created.Object, "Provisioning", "status", "phase")
		if created, err = machines.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
		mine = append(mine, created)
	}
	if len(mine) > want {
		sort.SliceStable(mine, func(i, j int) bool {
			_, mi := mine[i].GetAnnotations()[DeleteMachineAnnotation]
			_, mj := mine[j].GetAnnotations()[DeleteMachineAnnotation]
			if mi != mj {
				return mi
			}
			ti, tj := mine[i].GetCreationTimestamp(), mine[j].GetCreationTimestamp()
			return tj.Before(&ti)
		})
		for _, m := range mine[:len(mine)-want] {
			if err := machines.Delete(ctx, m.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err := r.kube.CoreV1().Nodes().Delete(ctx, m.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		mine = mine[len(mine)-want:]
	}
	for _, m := range mine {
		if phase, _, _ := unstructured.NestedString(m.Object, "status", "phase"); phase == "Running" {
			continue
		}
		if err := r.ensureNode(ctx, m.GetName(), pool, md); err != nil {
			return err
		}
		_ = unstructured.SetNestedField(m.Object, "Running", "status", "phase")
		_ = unstructured.SetNestedField(m.Object, m.GetName(), "status", "nodeRef", "name")
		if _, err := machines.UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// ensureNode creates the kwok Node of a Machine: 4 CPU, 16Gi and 110 pods
// unless the MachineDeployment's capacity annotations say otherwise.
func (r *Reconciler) ensureNode(ctx context.Context, name, pool string, md *unstructured.Unstructured) error {
	cpu, mem := "4", "16Gi"
	if md != nil {
		if v := md.GetAnnotations()["capacity.cluster-autoscaler.kubernetes.io/cpu"]; v != "" {
			cpu = v
		}
		if v := md.GetAnnotations()["capacity.cluster-autoscaler.kubernetes.io/memory"]; v != "" {
			mem = v
		}
	}
	rl := apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse(mem),
		apiv1.ResourcePods: resource.MustParse("110")}
	labels := map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"type": "kwok", PoolLabel: pool}
	for k, v := range r.nodeLabels {
		labels[k] = v
	}
	n := &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{
			"kwok.x-k8s.io/node": "fake", "cluster.x-k8s.io/machine": name}},
		Spec:   apiv1.NodeSpec{ProviderID: ProviderIDPrefix + name},
		Status: apiv1.NodeStatus{Capacity: rl, Allocatable: rl.DeepCopy()},
	}
	_, err := r.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	return nil
}

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
