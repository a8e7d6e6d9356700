package aws

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestAWSInstanceRequirementsNeverOverPromise: a group at zero whose
// mixed-instances policy selects types by attributes (2-8 vCPUs, at least
// 4 GiB; of startAWS's types both the 2-CPU m5.large and the 4-CPU
// c5.xlarge qualify) is scaled from zero for pods that fit the smallest
// type, and not for a 3-CPU pod that only the larger type allowed by the
// requirements could hold: the group may launch m5.large instances (the
// fake does), so promising that pod a node would be a lie.
func TestAWSInstanceRequirementsNeverOverPromise(t *testing.T) {
	e := framework.New(t)
	s := startAWS(e)
	s.AddImage("ami-0x86", "x86_64")
	s.AddLaunchTemplate(awsfake.LaunchTemplate{ID: "lt-0000000000000abs1", Name: "abs", DefaultVersion: 1,
		Versions: []awsfake.LaunchTemplateVersion{{Number: 1, ImageID: "ami-0x86"}}})
	g := awsGroup("abs", 0, 5, 0, discoveryTags("prod"))
	g.LaunchTemplate = nil
	g.MixedInstances = &awsfake.MixedInstancesPolicy{LaunchTemplate: awsfake.LaunchTemplateSpec{ID: "lt-0000000000000abs1", Version: "$Default"},
		Requirements: &awsfake.InstanceRequirements{VCpuCount: awsfake.IntRange{Min: aws.Int(2), Max: aws.Int(8)},
			MemoryMiB: awsfake.IntRange{Min: aws.Int(4096)}}}
	s.AddGroup(g)
	itest.DumpPods(e)
	itest.CreatePods(e, "small", 2, "1500m", map[string]string{"pool": "abs"}) // one per 2-CPU node
	itest.CreatePods(e, "big", 1, "3", map[string]string{"pool": "abs"})       // fits a c5.xlarge only

	itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, discoveryArg("prod"))...)
	e.Eventually(90*time.Second, "both small pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	e.Eventually(30*time.Second, "NotTriggerScaleUp for the big pod", func(ctx context.Context) (bool, error) {
		msgs, err := itest.PodEventMessages(ctx, e, "big-0", "NotTriggerScaleUp")
		return len(msgs) > 0, err
	})
	// Several more loops (1 s scan interval): the big pod never gets a node.
	time.Sleep(5 * time.Second)
	if got := s.GroupState("abs").Desired; got != 2 {
		t.Errorf("desired capacity %d, want 2: one m5.large per small pod, none for the 3-CPU pod", got)
	}
	for _, in := range s.Instances("abs") {
		if in.InstanceType != "m5.large" {
			t.Errorf("instance %s is a %s, want m5.large (the smallest matching type, which the fake launches)", in.ID, in.InstanceType)
		}
	}
	if ok, _ := itest.AllRunning(e.Context(), e, 2); !ok {
		t.Error("not exactly the two small pods Running")
	}
	if s.Calls()["GetInstanceTypesFromInstanceRequirements"] != 1 {
		t.Errorf("GetInstanceTypesFromInstanceRequirements called %d times, want once (cached)", s.Calls()["GetInstanceTypesFromInstanceRequirements"])
	}
}
