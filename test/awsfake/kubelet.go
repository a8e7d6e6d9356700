package awsfake

import (
	"context"
	"fmt"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// kubeletPeriod is how often PlayKubelet compares instances and Nodes.
const kubeletPeriod = 200 * time.Millisecond

// Node facts PlayKubelet uses.
const (
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	gpuResource        = apiv1.ResourceName("nvidia.com/gpu")
	providerIDPrefix   = "aws:///"
)

// PlayKubelet creates a kwok-managed Node (annotation kwok.x-k8s.io/node=fake,
// provider ID aws:///<zone>/<id>, named after the instance ID) for every
// InService instance of the fake, and deletes the Node of every instance of
// the fake that is gone (terminating or terminated), until ctx ends.
//
// A Node's labels are those a kubelet and the cloud controller set
// (kubernetes.io/hostname, kubernetes.io/os, kubernetes.io/arch,
// topology.kubernetes.io/region and zone, node.kubernetes.io/instance-type)
// plus extra(inst) when extra is not nil; its capacity and allocatable are
// the instance type's CPUs and memory, 110 pods and nvidia.com/gpu when the
// type has GPUs (2 CPUs and 8Gi for a type the fake does not know). Nodes
// whose provider ID names no instance of this fake are never touched.
// Errors are logged and retried on the next round.
func PlayKubelet(ctx context.Context, client kubernetes.Interface, s *Server, extra func(Instance) map[string]string) {
	t := time.NewTicker(kubeletPeriod)
	defer t.Stop()
	for {
		if err := s.syncNodes(ctx, client, extra); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Info("awsfake kubelet: sync failed, retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// syncNodes makes one round of PlayKubelet.
func (s *Server) syncNodes(ctx context.Context, client kubernetes.Interface, extra func(Instance) map[string]string) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	existing := map[string]bool{}
	for _, n := range nodes.Items {
		existing[n.Name] = true
	}
	var errs []error
	for _, in := range s.AllInstances() {
		if in.Lifecycle != LifecycleInService || existing[in.ID] {
			continue
		}
		if err := s.createNode(ctx, client, in, extra); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range nodes.Items {
		id, ok := s.goneInstance(n.Spec.ProviderID)
		if !ok {
			continue
		}
		err := client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &n.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting node %s of instance %s: %w", n.Name, id, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d errors, first: %w", len(errs), errs[0])
	}
	return nil
}

// goneInstance returns the instance ID of a provider ID that names an
// instance of this fake which is terminating or terminated.
func (s *Server) goneInstance(providerID string) (string, bool) {
	rest, ok := strings.CutPrefix(providerID, providerIDPrefix)
	if !ok {
		return "", false
	}
	id := rest[strings.LastIndex(rest, "/")+1:]
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.byID[id]
	if !ok {
		return "", false
	}
	return id, in.Lifecycle == LifecycleTerminating || in.Lifecycle == LifecycleTerminated
}

// createNode creates the Node of an instance.
func (s *Server) createNode(ctx context.Context, client kubernetes.Interface, in Instance, extra func(Instance) map[string]string) error {
	s.mu.Lock()
	it, known := s.instanceTypes[in.InstanceType]
	region := s.region
	s.mu.Unlock()
	cpu, mem := resource.MustParse("2"), resource.MustParse("8Gi")
	arch := "amd64"
	if known {
		cpu = *resource.NewQuantity(int64(it.VCPU), resource.DecimalSI)
		mem = *resource.NewQuantity(it.MemoryMiB*1024*1024, resource.BinarySI)
		if it.Arch == "arm64" {
			arch = "arm64"
		}
	}
	rl := apiv1.ResourceList{apiv1.ResourceCPU: cpu, apiv1.ResourceMemory: mem, apiv1.ResourcePods: resource.MustParse("110")}
	if known && it.GPUs > 0 {
		rl[gpuResource] = *resource.NewQuantity(int64(it.GPUs), resource.DecimalSI)
	}
	labels := map[string]string{
		"kubernetes.io/hostname":           in.ID,
		"kubernetes.io/os":                 "linux",
		"kubernetes.io/arch":               arch,
		"topology.kubernetes.io/region":    region,
		"topology.kubernetes.io/zone":      in.Zone,
		"node.kubernetes.io/instance-type": in.InstanceType,
	}
	if extra != nil {
		for k, v := range extra(in) {
			labels[k] = v
		}
	}
	node := &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: in.ID, Labels: labels, Annotations: map[string]string{kwokNodeAnnotation: "fake"}},
		Spec:       apiv1.NodeSpec{ProviderID: providerIDPrefix + in.Zone + "/" + in.ID},
		Status:     apiv1.NodeStatus{Capacity: rl, Allocatable: rl.DeepCopy()},
	}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating node of instance %s: %w", in.ID, err)
	}
	return nil
}
