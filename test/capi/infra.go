package capi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Infra is the test provider's controller: the cloud and the kubelet of the
// test infrastructure kinds in one namespace.
type Infra struct {
	dyn        dynamic.Interface
	kube       kubernetes.Interface
	namespace  string
	nodeLabels map[string]string
}

// NewInfra returns the controller of namespace; nodeLabels go on every Node it creates.
func NewInfra(dyn dynamic.Interface, kube kubernetes.Interface, namespace string, nodeLabels map[string]string) *Infra {
	return &Infra{dyn: dyn, kube: kube, namespace: namespace, nodeLabels: nodeLabels}
}

// Run syncs when an infrastructure machine changes (a watch) and every
// interval besides (the clusters, the Machines an infrastructure machine
// waits for, the deletion delays) until ctx ends; errors are passed to
// report. The watch lets the interval be long: polling three lists every
// 200 ms was a tenth of a Cluster API test package's CPU (docs/test-times.md).
func (in *Infra) Run(ctx context.Context, interval time.Duration, report func(error)) {
	wake := make(chan struct{}, 1)
	go in.watchMachines(ctx, wake)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := in.Sync(ctx); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
			report(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

// watchMachines signals wake at each change of an infrastructure machine of
// the namespace, watching again when a watch ends, until ctx ends.
func (in *Infra) watchMachines(ctx context.Context, wake chan<- struct{}) {
	res := in.dyn.Resource(TestGVR(InfraGroup, "TestMachine")).Namespace(in.namespace)
	for ctx.Err() == nil {
		w, err := res.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for range w.ResultChan() {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
		w.Stop()
	}
}

// Sync runs one pass: infrastructure clusters and control planes are
// reported ready, infrastructure machines get a Node or fail.
func (in *Infra) Sync(ctx context.Context) error {
	var errs []error
	ready := map[string]map[string]any{
		"TestCluster": {"initialization": map[string]any{"provisioned": true}, "ready": true},
		"TestControlPlane": {"initialization": map[string]any{"controlPlaneInitialized": true}, "initialized": true, "ready": true,
			// The workload cluster's control plane is not made of Machines
			// (as with a managed control plane), so Cluster API may delete
			// the Nodes of worker Machines.
			"externalManagedControlPlane": true},
	}
	for _, k := range []struct{ group, kind string }{{InfraGroup, "TestCluster"}, {ControlPlaneGroup, "TestControlPlane"}} {
		res := in.dyn.Resource(TestGVR(k.group, k.kind)).Namespace(in.namespace)
		list, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			o := &list.Items[i]
			if _, done := o.Object["status"]; done {
				continue
			}
			o.Object["status"] = ready[k.kind]
			if _, err := res.UpdateStatus(ctx, o, metav1.UpdateOptions{}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	list, err := in.dyn.Resource(TestGVR(InfraGroup, "TestMachine")).Namespace(in.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		if err := in.syncMachine(ctx, &list.Items[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (in *Infra) syncMachine(ctx context.Context, tm *unstructured.Unstructured) error {
	res := in.dyn.Resource(TestGVR(InfraGroup, "TestMachine")).Namespace(in.namespace)
	if ts := tm.GetDeletionTimestamp(); ts != nil {
		return in.finishDeletion(ctx, tm, ts.Time)
	}
	if reason, _, _ := unstructured.NestedString(tm.Object, "spec", "failReason"); reason != "" {
		if got, _, _ := unstructured.NestedString(tm.Object, "status", "failureReason"); got != "" {
			return nil
		}
		tm.Object["status"] = map[string]any{"failureReason": reason,
			"failureMessage": fmt.Sprintf("the test provider could not create machine %s: %s", tm.GetName(), reason)}
		_, err := res.UpdateStatus(ctx, tm, metav1.UpdateOptions{})
		return err
	}
	if p, _, _ := unstructured.NestedBool(tm.Object, "status", "initialization", "provisioned"); p {
		return nil
	}
	// Cluster API names an infrastructure machine after its Machine and
	// makes the Machine its owner; wait for the Machine.
	machine, err := in.dyn.Resource(GVR("machines")).Namespace(in.namespace).Get(ctx, tm.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	providerID := ProviderIDPrefix + in.namespace + "/" + machine.GetName()
	nodeProviderID := providerID
	if s, _, _ := unstructured.NestedString(tm.Object, "spec", "nodeProviderIDSpelling"); s == "emptyHost" {
		nodeProviderID = ProviderIDPrefix + "/" + in.namespace + "/" + machine.GetName()
	}
	if err := in.ensureNode(ctx, machine, tm, nodeProviderID); err != nil {
		return err
	}
	id, _, _ := unstructured.NestedString(tm.Object, "spec", "providerID")
	delay, _, _ := unstructured.NestedString(tm.Object, "spec", "deletionDelay")
	if hold := delay != "" && !slices.Contains(tm.GetFinalizers(), deletionDelayFinalizer); id == "" || hold {
		_ = unstructured.SetNestedField(tm.Object, providerID, "spec", "providerID")
		if hold {
			tm.SetFinalizers(append(tm.GetFinalizers(), deletionDelayFinalizer))
		}
		if tm, err = res.Update(ctx, tm, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	tm.Object["status"] = map[string]any{"initialization": map[string]any{"provisioned": true}, "ready": true,
		"addresses": []any{map[string]any{"type": "InternalIP", "address": "127.0.0.1"}}}
	_, err = res.UpdateStatus(ctx, tm, metav1.UpdateOptions{})
	return err
}

// deletionDelayFinalizer holds a deleted infrastructure machine for its
// spec.deletionDelay.
const deletionDelayFinalizer = "test.infrastructure.cluster.x-k8s.io/deletion-delay"

// finishDeletion lets a deleted infrastructure machine go once its
// deletion delay has passed since it was deleted.
func (in *Infra) finishDeletion(ctx context.Context, tm *unstructured.Unstructured, since time.Time) error {
	if !slices.Contains(tm.GetFinalizers(), deletionDelayFinalizer) {
		return nil
	}
	raw, _, _ := unstructured.NestedString(tm.Object, "spec", "deletionDelay")
	delay, err := time.ParseDuration(raw)
	if err != nil {
		return fmt.Errorf("TestMachine %s: deletionDelay: %w", tm.GetName(), err)
	}
	if time.Since(since) < delay {
		return nil
	}
	tm.SetFinalizers(slices.DeleteFunc(tm.GetFinalizers(), func(f string) bool { return f == deletionDelayFinalizer }))
	_, err = in.dyn.Resource(TestGVR(InfraGroup, "TestMachine")).Namespace(in.namespace).Update(ctx, tm, metav1.UpdateOptions{})
	return err
}

// ensureNode creates the kwok Node of a Machine: the capacity and labels of
// its infrastructure machine's spec (4 CPU, 16Gi by default), 110 pods, and
// the Machine's spec.taints, registered with the Node as a kubelet given
// them by its bootstrap data would (so that no pod lands on the Node before
// they are there).
func (in *Infra) ensureNode(ctx context.Context, machine, tm *unstructured.Unstructured, providerID string) error {
	cpu, _, _ := unstructured.NestedString(tm.Object, "spec", "cpu")
	mem, _, _ := unstructured.NestedString(tm.Object, "spec", "memory")
	if cpu == "" {
		cpu = "4"
	}
	if mem == "" {
		mem = "16Gi"
	}
	cpuQ, err := resource.ParseQuantity(cpu)
	if err != nil {
		return fmt.Errorf("TestMachine %s: cpu: %w", tm.GetName(), err)
	}
	memQ, err := resource.ParseQuantity(mem)
	if err != nil {
		return fmt.Errorf("TestMachine %s: memory: %w", tm.GetName(), err)
	}
	rl := apiv1.ResourceList{apiv1.ResourceCPU: cpuQ, apiv1.ResourceMemory: memQ, apiv1.ResourcePods: resource.MustParse("110")}
	name := machine.GetName()
	labels := map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"type": "kwok", PoolLabel: machine.GetLabels()[DeploymentNameLabel]}
	extra, _, _ := unstructured.NestedStringMap(tm.Object, "spec", "nodeLabels")
	for k, v := range extra {
		labels[k] = v
	}
	for k, v := range in.nodeLabels {
		labels[k] = v
	}
	taints, err := machineTaints(machine)
	if err != nil {
		return err
	}
	n := &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec:       apiv1.NodeSpec{ProviderID: providerID, Taints: taints},
		Status:     apiv1.NodeStatus{Capacity: rl, Allocatable: rl.DeepCopy()},
	}
	_, err = in.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	return nil
}

// machineTaints reads a Machine's spec.taints (Cluster API v1beta2).
func machineTaints(machine *unstructured.Unstructured) ([]apiv1.Taint, error) {
	items, _, err := unstructured.NestedSlice(machine.Object, "spec", "taints")
	if err != nil {
		return nil, fmt.Errorf("Machine %s: spec.taints: %w", machine.GetName(), err)
	}
	var out []apiv1.Taint
	for _, item := range items {
		m, _ := item.(map[string]any)
		key, _ := m["key"].(string)
		value, _ := m["value"].(string)
		effect, _ := m["effect"].(string)
		out = append(out, apiv1.Taint{Key: key, Value: value, Effect: apiv1.TaintEffect(effect)})
	}
	return out, nil
}
