package awsfake

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// TestPlayKubeletFollowsInstances runs the kubelet player against the local
// control plane: a Ready kwok Node per InService instance with its facts,
// none for a Pending one, and the Node of a terminated instance deleted,
// while a Node that is not the fake's stays.
func TestPlayKubeletFollowsInstances(t *testing.T) {
	env := framework.New(t)
	s := startFake(t)
	s.AddInstanceType(InstanceType{Name: "m6g.large", VCPU: 2, MemoryMiB: 8192, Arch: "arm64", MaxENIs: 3, IPv4PerENI: 10})
	s.AddInstanceType(InstanceType{Name: "p3.2xlarge", VCPU: 8, MemoryMiB: 62464, GPUs: 1, GPUManufacturer: "NVIDIA", GPUName: "V100", GPUMemoryMiB: 16384})
	s.AddSubnet("subnet-a", "us-east-1a")
	s.AddSubnet("subnet-b", "us-east-1b")
	lt := s.AddLaunchTemplate(LaunchTemplate{Name: "arm", DefaultVersion: 1, Versions: []LaunchTemplateVersion{{Number: 1, InstanceType: "m6g.large"}}})
	s.AddLaunchConfiguration(LaunchConfiguration{Name: "gpu", InstanceType: "p3.2xlarge"})
	s.AddGroup(Group{Name: "arm", Max: 5, Desired: 2, LaunchTemplate: &LaunchTemplateSpec{ID: lt}, Subnets: []string{"subnet-a", "subnet-b"}})
	s.AddGroup(Group{Name: "gpu", Max: 5, Desired: 1, LaunchConfigurationName: "gpu", Subnets: []string{"subnet-b"}})
	foreign := framework.MakeNode("not-the-fakes").Resources("1", "1Gi", "10").Obj()
	foreign.Spec.ProviderID = "aws:///us-east-1a/i-0123456789abcdef0"
	env.CreateNode(foreign)

	ctx, cancel := context.WithCancel(env.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		PlayKubelet(ctx, env.Client, s, func(in Instance) map[string]string {
			return map[string]string{framework.TestNamespaceLabel: env.Namespace, "pool": in.Group}
		})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })

	sel := metav1.ListOptions{LabelSelector: "pool"}
	readyNodes := func(ctx context.Context) (map[string]apiv1.Node, error) {
		nodes, err := env.Client.CoreV1().Nodes().List(ctx, sel)
		if err != nil {
			return nil, err
		}
		out := map[string]apiv1.Node{}
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == apiv1.NodeReady && c.Status == apiv1.ConditionTrue {
					out[n.Name] = n
				}
			}
		}
		return out, nil
	}
	env.Eventually(90*time.Second, "a Ready Node per instance", func(ctx context.Context) (bool, error) {
		nodes, err := readyNodes(ctx)
		return err == nil && len(nodes) == 3, err
	})
	nodes, err := readyNodes(env.Context())
	if err != nil {
		t.Fatal(err)
	}
	checkNodeFacts(t, s, nodes)

	// A Pending instance gets no Node; a terminating one loses its Node.
	s.SetStartDelay(time.Hour)
	c := sdkClients(t, s)
	if _, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("gpu"), DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	victim := s.Instances("arm")[0].ID
	if _, err := c.asg.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(victim), ShouldDecrementDesiredCapacity: aws.Bool(true),
	}); err != nil {
		t.Fatal(err)
	}
	env.Eventually(60*time.Second, "the terminating instance's Node deleted", func(ctx context.Context) (bool, error) {
		_, err := env.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// The round that deleted the Node would have created one for the
	// Pending instance too.
	pending := s.Instances("gpu")[1]
	if pending.Lifecycle != LifecyclePending {
		t.Fatalf("new GPU instance is %s, want Pending", pending.Lifecycle)
	}
	if _, err := env.Client.CoreV1().Nodes().Get(env.Context(), pending.ID, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node of the Pending instance %s: %v, want none", pending.ID, err)
	}
	s.SetStartDelay(0)
	env.Eventually(60*time.Second, "the new GPU instance's Node", func(ctx context.Context) (bool, error) {
		nodes, err := readyNodes(ctx)
		return err == nil && len(nodes) == 3, err
	})
	if _, err := env.Client.CoreV1().Nodes().Get(env.Context(), foreign.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Node that is not the fake's: %v", err)
	}
}

// checkNodeFacts compares the Nodes of the GPU and arm instances with their
// instances' facts.
func checkNodeFacts(t *testing.T, s *Server, nodes map[string]apiv1.Node) {
	t.Helper()
	gpu := s.Instances("gpu")[0]
	n := nodes[gpu.ID]
	type facts struct {
		ProviderID, Zone, Type, Arch, Pool, CPU, Memory, Pods, GPUs string
	}
	q := func(r apiv1.ResourceName) string { v := n.Status.Capacity[r]; return v.String() }
	got := facts{n.Spec.ProviderID, n.Labels["topology.kubernetes.io/zone"], n.Labels["node.kubernetes.io/instance-type"],
		n.Labels["kubernetes.io/arch"], n.Labels["pool"], q(apiv1.ResourceCPU), q(apiv1.ResourceMemory), q(apiv1.ResourcePods), q("nvidia.com/gpu")}
	want := facts{"aws:///us-east-1b/" + gpu.ID, "us-east-1b", "p3.2xlarge", "amd64", "gpu", "8", "61Gi", "110", "1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GPU node (-want +got):\n%s", diff)
	}
	for _, in := range s.Instances("arm") {
		if a := nodes[in.ID].Labels["kubernetes.io/arch"]; a != "arm64" {
			t.Errorf("node of %s: arch %q, want arm64", in.ID, a)
		}
	}
}
