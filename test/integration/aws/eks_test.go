package aws

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/aws"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// managedNodeLabels are the labels EKS gives the nodes of the managed node
// group behind an Auto Scaling group (named by its eks: tags), none for a
// group of no node group the fake knows.
func managedNodeLabels(s *awsfake.Server, group string) map[string]string {
	tags := s.GroupState(group).Tags
	ng, ok := s.Nodegroup(tags[awsprovider.EKSClusterTag], tags[awsprovider.EKSNodegroupTag])
	if !ok {
		return nil
	}
	capacity := ng.CapacityType
	if capacity == "" {
		capacity = "ON_DEMAND"
	}
	out := map[string]string{awsprovider.EKSNodegroupLabel: ng.Name, awsprovider.EKSCapacityTypeLabel: capacity}
	for k, v := range ng.Labels {
		out[k] = v
	}
	return out
}

// TestAWSScaleFromZeroByManagedNodegroupLabelsAndTaints: an Auto Scaling
// group at zero of an EKS managed node group whose label and taint are on
// the node group only (not on the group's tags): a pod that selects the
// label but does not tolerate the taint is told the taint and scales
// nothing; a pod that selects the label and the node group's
// eks.amazonaws.com/ labels and tolerates the taint scales the group from
// zero. The node group is read with DescribeNodegroup, not every loop.
func TestAWSScaleFromZeroByManagedNodegroupLabelsAndTaints(t *testing.T) {
	e := framework.New(t)
	s := startAWS(e)
	tags := discoveryTags("prod")
	tags[awsprovider.EKSClusterTag] = "prod"
	tags[awsprovider.EKSNodegroupTag] = "gpu"
	s.AddGroup(awsGroup("eks-gpu-0001", 0, 5, 0, tags))
	s.AddNodegroup(awsfake.EKSNodegroup{Cluster: "prod", Name: "gpu", CapacityType: "SPOT", AutoScalingGroups: []string{"eks-gpu-0001"},
		Labels: map[string]string{"workload": "gpu"},
		Taints: []awsfake.EKSTaint{{Key: "dedicated", Value: "gpu", Effect: "NO_SCHEDULE"}}})
	itest.DumpPods(e)
	intolerant := framework.MakePod(e.Namespace, "intolerant").Req("1", "1Gi").NodeSelector("workload", "gpu").Obj()
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), intolerant, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, discoveryArg("prod"))...)

	want := "1 node(s) had untolerated taint(s) (dedicated=gpu:NoSchedule)"
	var got []string
	e.Eventually(60*time.Second, "NotTriggerScaleUp on intolerant naming the node group's taint", func(ctx context.Context) (bool, error) {
		msgs, err := itest.PodEventMessages(ctx, e, "intolerant", "NotTriggerScaleUp")
		if err != nil {
			return false, nil // asked again at the next poll
		}
		got = msgs
		for _, m := range msgs {
			if strings.Contains(m, want) {
				return true, nil
			}
		}
		return false, nil
	})
	if d := s.GroupState("eks-gpu-0001").Desired; d != 0 {
		t.Fatalf("desired capacity %d for a pod that does not tolerate the node group's taint, want 0 (events %q)", d, got)
	}

	tolerant := framework.MakePod(e.Namespace, "tolerant").Req("1", "1Gi").NodeSelector("workload", "gpu").
		NodeSelector(awsprovider.EKSNodegroupLabel, "gpu").NodeSelector(awsprovider.EKSCapacityTypeLabel, "SPOT").Obj()
	tolerant.Spec.Tolerations = []apiv1.Toleration{{Key: "dedicated", Operator: apiv1.TolerationOpEqual, Value: "gpu",
		Effect: apiv1.TaintEffectNoSchedule}}
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), tolerant, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, "the tolerant pod Running", func(ctx context.Context) (bool, error) {
		pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, "tolerant", metav1.GetOptions{})
		return err == nil && pod.Status.Phase == apiv1.PodRunning, nil
	})
	if d := s.GroupState("eks-gpu-0001").Desired; d != 1 {
		t.Errorf("desired capacity %d, want 1 (one node for the tolerant pod)", d)
	}
	// One read in the test's time (the cache keeps it for 6 minutes); a
	// second only if the first was lost to a retry.
	if n := s.Calls()["DescribeNodegroup"] - s.Retries()["DescribeNodegroup"]; n != 1 {
		t.Errorf("DescribeNodegroup called %d times (retries aside), want 1", n)
	}
	if p.Log.Contains("DescribeNodegroup refused") || p.Log.Contains("Reading an EKS managed node group failed") {
		t.Error("the autoscaler logged a failed DescribeNodegroup")
	}
}
