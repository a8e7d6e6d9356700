package capi

import (
	"context"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Cluster API's names the tests use.
const (
	Group                   = "cluster.x-k8s.io"
	Version                 = "v1beta2"
	DeleteMachineAnnotation = "cluster.x-k8s.io/delete-machine"
	DeploymentNameLabel     = "cluster.x-k8s.io/deployment-name"
	// ProviderIDPrefix starts the provider IDs of the test provider's machines.
	ProviderIDPrefix = "capitest://"
	// PoolLabel on a Node names its MachineDeployment.
	PoolLabel = "pool"
)

// GVR returns the resource of Cluster API's core kinds at Version.
func GVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: Version, Resource: resource}
}

// CreateCluster creates what Cluster API needs before it reconciles any
// machine of cluster name in namespace: the Cluster, its (test) infrastructure
// cluster and control plane, and the kubeconfig secret through which Cluster
// API reaches the workload cluster, which is the cluster of kubeconfig itself.
func CreateCluster(ctx context.Context, dyn dynamic.Interface, kube kubernetes.Interface, namespace, name, kubeconfig string) error {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return err
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return err
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	secret := &apiv1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-kubeconfig",
			Labels: map[string]string{Group + "/cluster-name": name}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": data},
	}
	if _, err := kube.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	objs := []struct {
		gvr schema.GroupVersionResource
		obj map[string]any
	}{
		{TestGVR(InfraGroup, "TestCluster"), map[string]any{
			"apiVersion": InfraGroup + "/" + TestVersion, "kind": "TestCluster",
			"metadata": map[string]any{"namespace": namespace, "name": name},
			"spec":     map[string]any{"controlPlaneEndpoint": map[string]any{"host": "127.0.0.1", "port": int64(6443)}},
		}},
		{TestGVR(ControlPlaneGroup, "TestControlPlane"), map[string]any{
			"apiVersion": ControlPlaneGroup + "/" + TestVersion, "kind": "TestControlPlane",
			"metadata": map[string]any{"namespace": namespace, "name": name},
			"spec":     map[string]any{},
		}},
		{GVR("clusters"), map[string]any{
			"apiVersion": Group + "/" + Version, "kind": "Cluster",
			"metadata": map[string]any{"namespace": namespace, "name": name},
			"spec": map[string]any{
				"infrastructureRef": map[string]any{"apiGroup": InfraGroup, "kind": "TestCluster", "name": name},
				"controlPlaneRef":   map[string]any{"apiGroup": ControlPlaneGroup, "kind": "TestControlPlane", "name": name},
			},
		}},
	}
	for _, o := range objs {
		_, err := dyn.Resource(o.gvr).Namespace(namespace).Create(ctx, &unstructured.Unstructured{Object: o.obj}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", o.gvr.Resource, name, err)
		}
	}
	return nil
}

// Machine describes the machines of a template: their Node's capacity and
// labels, and FailReason, which makes every machine fail to provision with
// that reason (as Cluster API's failureReason) instead of getting a Node.
type Machine struct {
	CPU, Memory string
	Labels      map[string]string
	FailReason  string
	// NodeProviderIDSpelling "emptyHost" writes the Nodes' provider IDs
	// with an empty host (capitest:///<namespace>/<name>) while the
	// infrastructure machine says capitest://<namespace>/<name>, as clouds
	// whose Nodes spell their IDs otherwise than their machines do.
	// Cluster API matches a Node to its Machine by the exact provider ID,
	// so such a Machine never gets a status.nodeRef.
	NodeProviderIDSpelling string
	// DeletionDelay keeps a deleted infrastructure machine (and so its
	// Machine, which waits for it) for that long, as a cloud that takes
	// time to terminate a VM.
	DeletionDelay time.Duration
}

// CreateMachineTemplate creates a TestMachineTemplate; a non-nil
// statusCapacity is written to its status.capacity, the place Cluster API's
// scale-from-zero contract gives an infrastructure template for it.
func CreateMachineTemplate(ctx context.Context, dyn dynamic.Interface, namespace, name string, m Machine, statusCapacity map[string]string) error {
	spec := map[string]any{"cpu": m.CPU, "memory": m.Memory}
	if len(m.Labels) > 0 {
		labels := map[string]any{}
		for k, v := range m.Labels {
			labels[k] = v
		}
		spec["nodeLabels"] = labels
	}
	if m.FailReason != "" {
		spec["failReason"] = m.FailReason
	}
	if m.NodeProviderIDSpelling != "" {
		spec["nodeProviderIDSpelling"] = m.NodeProviderIDSpelling
	}
	if m.DeletionDelay > 0 {
		spec["deletionDelay"] = m.DeletionDelay.String()
	}
	res := dyn.Resource(TestGVR(InfraGroup, "TestMachineTemplate")).Namespace(namespace)
	created, err := res.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": InfraGroup + "/" + TestVersion, "kind": "TestMachineTemplate",
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec":     map[string]any{"template": map[string]any{"spec": spec}},
	}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating TestMachineTemplate %s: %w", name, err)
	}
	if statusCapacity != nil {
		capacity := map[string]any{}
		for k, v := range statusCapacity {
			capacity[k] = v
		}
		created.Object["status"] = map[string]any{"capacity": capacity}
		if _, err := res.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("writing the status of TestMachineTemplate %s: %w", name, err)
		}
	}
	return nil
}

// MachineDeployment returns a MachineDeployment of cluster with replicas
// Machines from the TestMachineTemplate template, with the given
// annotations, complete as Cluster API's defaulting webhook would leave it.
func MachineDeployment(namespace, cluster, name, template string, replicas int64, annotations map[string]string) *unstructured.Unstructured {
	labels := map[string]any{"md": name, Group + "/cluster-name": cluster}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": "MachineDeployment",
		"metadata": map[string]any{"namespace": namespace, "name": name, "labels": map[string]any{Group + "/cluster-name": cluster}},
		"spec": map[string]any{
			"clusterName": cluster, "replicas": replicas,
			"selector": map[string]any{"matchLabels": labels},
			"rollout": map[string]any{"strategy": map[string]any{"type": "RollingUpdate",
				"rollingUpdate": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(0)}}},
			"deletion": map[string]any{"order": "Random"},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"clusterName": cluster,
					"bootstrap":   map[string]any{"dataSecretName": "no-bootstrap-data"},
					"infrastructureRef": map[string]any{
						"apiGroup": InfraGroup, "kind": "TestMachineTemplate", "name": template,
					},
					"deletion": map[string]any{"nodeDrainTimeoutSeconds": int64(30)},
				},
			},
		},
	}}
	u.SetAnnotations(annotations)
	return u
}

// SetTaints writes taints to the spec.template.spec.taints of a
// MachineDeployment or MachineSet (the field Cluster API copies to its
// Machines, and with feature gate MachineTaintPropagation to their Nodes),
// each with propagation Always.
func SetTaints(obj *unstructured.Unstructured, taints []apiv1.Taint) error {
	items := make([]any, 0, len(taints))
	for _, t := range taints {
		item := map[string]any{"key": t.Key, "effect": string(t.Effect), "propagation": "Always"}
		if t.Value != "" {
			item["value"] = t.Value
		}
		items = append(items, item)
	}
	return unstructured.SetNestedSlice(obj.Object, items, "spec", "template", "spec", "taints")
}

// ReleaseNamespace removes the finalizers of Cluster API's objects in
// namespace, so that deleting the namespace completes once the manager that
// would have run them has stopped.
func ReleaseNamespace(ctx context.Context, dyn dynamic.Interface, namespace string) error {
	for _, gvr := range []schema.GroupVersionResource{
		GVR("machines"), GVR("machinesets"), GVR("machinedeployments"), GVR("machinepools"), GVR("clusters"),
		TestGVR(InfraGroup, "TestMachine"), TestGVR(InfraGroup, "TestCluster"), TestGVR(ControlPlaneGroup, "TestControlPlane"),
	} {
		list, err := dyn.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, o := range list.Items {
			if len(o.GetFinalizers()) == 0 {
				continue
			}
			patch := []byte(`{"metadata":{"finalizers":null}}`)
			if _, err := dyn.Resource(gvr).Namespace(namespace).Patch(ctx, o.GetName(), "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}
