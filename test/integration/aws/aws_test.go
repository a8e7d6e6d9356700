package aws

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/aws"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// The aws provider in the real binary, through the real AWS SDK, against
// the AWS fake (test/awsfake) and the local control plane; the fake's
// kubelet player makes a kwok Node of every running instance.

// startAWS starts the fake with two instance types, two subnets and two
// launch templates, and plays the kubelet for its instances until the test
// ends: every Node carries the test's label, pool=<group> and the labels of
// the group's node-template tags.
func startAWS(e *framework.Env) *awsfake.Server {
	e.T.Helper()
	s := awsfake.New()
	if err := s.Start(); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(s.Close)
	s.AddInstanceType(awsfake.InstanceType{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, Arch: "x86_64", MaxENIs: 3, IPv4PerENI: 10})
	s.AddInstanceType(awsfake.InstanceType{Name: "c5.xlarge", VCPU: 4, MemoryMiB: 8192, Arch: "x86_64", MaxENIs: 4, IPv4PerENI: 15})
	s.AddSubnet("subnet-a", "us-east-1a")
	s.AddSubnet("subnet-b", "us-east-1b")
	s.AddLaunchTemplate(awsfake.LaunchTemplate{ID: "lt-00000000000000001", Name: "workers", DefaultVersion: 1,
		Versions: []awsfake.LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large"}}})
	s.AddLaunchTemplate(awsfake.LaunchTemplate{Name: "big", DefaultVersion: 1,
		Versions: []awsfake.LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large"}, {Number: 2, InstanceType: "c5.xlarge"}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		awsfake.PlayKubelet(ctx, e.Client, s, func(in awsfake.Instance) map[string]string {
			labels := map[string]string{framework.TestNamespaceLabel: e.Namespace, "pool": in.Group}
			for k, v := range s.GroupState(in.Group).Tags {
				if name, ok := strings.CutPrefix(k, awsprovider.LabelTagPrefix); ok {
					labels[name] = v // as a node bootstrapped from the group's tags would be
				}
			}
			for k, v := range managedNodeLabels(s, in.Group) {
				labels[k] = v // as EKS labels the nodes of a managed node group
			}
			return labels
		})
	}()
	e.T.Cleanup(func() { cancel(); <-done })
	return s
}

// awsGroup is a group of the workers launch template in both subnets,
// labelled pool=<name> (and shape=standard) by its node-template tags.
func awsGroup(name string, min, max, desired int, tags map[string]string) awsfake.Group {
	all := map[string]string{awsprovider.LabelTagPrefix + "pool": name, awsprovider.LabelTagPrefix + "shape": "standard"}
	for k, v := range tags {
		all[k] = v
	}
	return awsfake.Group{Name: name, Min: min, Max: max, Desired: desired, Subnets: []string{"subnet-a", "subnet-b"},
		LaunchTemplate: &awsfake.LaunchTemplateSpec{ID: "lt-00000000000000001", Version: "$Default"}, Tags: all}
}

func awsArgs(e *framework.Env, extra ...string) []string {
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=aws",
		"--scan-interval=1s", "--v=4"}
	return append(args, extra...)
}

func discoveryTags(cluster string) map[string]string {
	return map[string]string{"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/" + cluster: "owned"}
}

func discoveryArg(cluster string) string {
	return "--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/" + cluster
}

// TestAWSScaleUpThroughAutoDiscoveredGroup: a pending Deployment gets nodes
// of the Auto Scaling group found by its tags (scaled from zero, from its
// launch template and tags); a group of another cluster is left alone.
func TestAWSScaleUpThroughAutoDiscoveredGroup(t *testing.T) {
	e := framework.New(t)
	s := startAWS(e)
	s.AddGroup(awsGroup("workers", 0, 5, 0, discoveryTags("prod")))
	s.AddGroup(awsGroup("other-cluster", 0, 5, 0, discoveryTags("dev")))
	itest.DumpPods(e)
	itest.Deployment(e, "web", 4, map[string]string{"shape": "standard"}) // 1 CPU each: two 2-CPU m5.large

	p := itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, discoveryArg("prod"))...)
	e.Eventually(90*time.Second, "all 4 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 4)
	})
	if got := s.GroupState("workers").Desired; got != 2 {
		t.Errorf("workers desired capacity %d, want 2", got)
	}
	if got := s.GroupState("other-cluster").Desired; got != 0 {
		t.Errorf("the other cluster's group was scaled to %d", got)
	}
	if got := itest.NodesPerPool(e); got["workers"] != 2 {
		t.Errorf("nodes per group %v, want workers:2", got)
	}
	if p.Log.Contains(`"Node group backed off"`) {
		t.Error("a group was backed off")
	}
}

// TestAWSScaleFromZeroFromTagsAndLaunchTemplate: pods that need 3 CPUs and
// tolerate a taint fit only the template of the group whose launch template
// (by name, version 2) is a 4-CPU c5.xlarge and whose tags add the taint;
// that group is scaled from zero, the other stays at zero.
func TestAWSScaleFromZeroFromTagsAndLaunchTemplate(t *testing.T) {
	e := framework.New(t)
	s := startAWS(e)
	s.AddGroup(awsGroup("small", 0, 5, 0, nil))
	big := awsGroup("big", 0, 5, 0, map[string]string{awsprovider.TaintTagPrefix + "dedicated": "batch:NoSchedule",
		awsprovider.LabelTagPrefix + "workload": "batch"})
	big.LaunchTemplate = &awsfake.LaunchTemplateSpec{Name: "big", Version: "2"}
	s.AddGroup(big)
	itest.DumpPods(e)
	for i := range 2 {
		pod := framework.MakePod(e.Namespace, fmt.Sprintf("batch-%d", i)).Req("3", "1Gi").NodeSelector("workload", "batch").Obj()
		pod.Spec.Tolerations = []apiv1.Toleration{{Key: "dedicated", Operator: apiv1.TolerationOpEqual, Value: "batch", Effect: apiv1.TaintEffectNoSchedule}}
		if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, "--nodes=0:5:small", "--nodes=0:5:big")...)
	e.Eventually(90*time.Second, "both pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	if got := s.GroupState("big").Desired; got != 2 {
		t.Errorf("big desired capacity %d, want 2 (one 4-CPU node per 3-CPU pod)", got)
	}
	if got := s.GroupState("small").Desired; got != 0 {
		t.Errorf("small desired capacity %d, want 0: its 2-CPU template holds no pod", got)
	}
	for _, in := range s.Instances("big") {
		if in.InstanceType != "c5.xlarge" {
			t.Errorf("instance %s is a %s", in.ID, in.InstanceType)
		}
	}
}

// TestAWSScaleDownTerminatesExactlyTheNamedInstances: of three empty
// instances of a group with min 1, two are removed: each by its id with
// TerminateInstanceInAutoScalingGroup, decrementing the desired capacity;
// AWS is never left to pick a victim, and the third instance stays.
func TestAWSScaleDownTerminatesExactlyTheNamedInstances(t *testing.T) {
	e := framework.New(t)
	s := startAWS(e)
	s.AddGroup(awsGroup("workers", 1, 5, 3, discoveryTags("prod")))
	e.Eventually(60*time.Second, "three nodes", func(ctx context.Context) (bool, error) {
		return itest.NodesPerPool(e)["workers"] == 3, nil
	})
	var before []string
	for _, in := range s.Instances("workers") {
		before = append(before, in.ID)
	}
	p := itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, discoveryArg("prod"), "--scale-down-unneeded-time=3s",
		"--scale-down-delay-after-add=0s", "--node-delete-delay-after-taint=1s", "--max-graceful-termination-sec=5")...)
	e.Eventually(90*time.Second, "the group at its min of 1", func(ctx context.Context) (bool, error) {
		return s.GroupState("workers").Desired == 1 && len(s.Terminated()) == 2, nil
	})
	terminated := s.Terminated()
	var left []string
	for _, in := range s.Instances("workers") {
		if in.Lifecycle != awsfake.LifecycleTerminating {
			left = append(left, in.ID)
		}
	}
	all := append(append([]string(nil), terminated...), left...)
	sort.Strings(all)
	sort.Strings(before)
	if !slices.Equal(all, before) || len(left) != 1 {
		t.Errorf("before %v; terminated by id %v, left %v: want two named and one left", before, terminated, left)
	}
	for _, id := range terminated {
		if !p.Log.Written(id) {
			t.Errorf("terminated instance %s is not in the autoscaler's log", id)
		}
	}
	// The group stays at its min: nothing more is removed.
	time.Sleep(5 * time.Second)
	if n := len(s.Terminated()); n != 2 || s.GroupState("workers").Desired != 1 {
		t.Errorf("after settling: %d terminated, desired %d; want 2 and 1", n, s.GroupState("workers").Desired)
	}
}

// TestAWSInsufficientCapacityBacksOffAndTheOtherGroupIsChosen: launches of
// the preferred group (priority expander) fail with
// InsufficientInstanceCapacity; its placeholders fail as out of resources,
// the group is backed off, its desired capacity is given back without a
// termination, and the pods run on the fallback group.
func TestAWSInsufficientCapacityBacksOffAndTheOtherGroupIsChosen(t *testing.T) {
	e := framework.New(t)
	s := startAWS(e)
	s.AddGroup(awsGroup("preferred", 0, 5, 0, discoveryTags("prod")))
	s.AddGroup(awsGroup("fallback", 0, 5, 0, discoveryTags("prod")))
	s.FailLaunches("preferred", "InsufficientInstanceCapacity", "We currently do not have sufficient m5.large capacity in the Availability Zone you requested")
	priorities := itest.PriorityConfigMap(e, "20:\n  - ^preferred$\n10:\n  - .*\n")
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(), priorities, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	itest.DumpPods(e)
	itest.Deployment(e, "web", 2, map[string]string{"shape": "standard"})

	p := itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, discoveryArg("prod"), "--expander=priority")...)
	e.Eventually(90*time.Second, "both pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	if got := itest.NodesPerPool(e); got["fallback"] != 1 || got["preferred"] != 0 {
		t.Errorf("nodes per group %v, want fallback:1", got)
	}
	if !p.Log.Written(`"Node group backed off"`) || !p.Log.Written(`errorCode="InsufficientInstanceCapacity"`) {
		t.Error("the back-off is not logged with AWS's error code")
	}
	e.Eventually(30*time.Second, "the preferred group's capacity given back", func(ctx context.Context) (bool, error) {
		return s.GroupState("preferred").Desired == 0, nil
	})
	if got := s.Terminated(); len(got) != 0 {
		t.Errorf("instances terminated: %v", got)
	}
	// Within one loop of AWS reporting the failure: the fallback group is
	// scaled in the loop that sees the failed placeholders, or the next.
	log := p.Log.String()
	backoff := strings.Index(log, `"Node group backed off"`)
	fallback := -1
	if m := regexp.MustCompile(`"Set the desired capacity of an Auto Scaling group" loop=\d+ nodeGroup="fallback"`).FindStringIndex(log); m != nil {
		fallback = m[0]
	}
	if backoff < 0 || fallback < 0 || fallback < backoff {
		t.Errorf("the fallback group was not scaled after the back-off (back-off at %d, fallback at %d)", backoff, fallback)
	} else if loops := strings.Count(log[backoff:fallback], `"Loop summary"`); loops > 1 {
		t.Errorf("%d loops between the back-off and the fallback's scale-up, want at most 1", loops)
	}
}

// TestAWSThrottlingLosesNothing: with 30% of the calls throttled, the SDK's
// adaptive retryer and the transient classification get every pod a node:
// no group is backed off, and the desired capacity is exactly what the pods
// need (no increase lost or doubled).
func TestAWSThrottlingLosesNothing(t *testing.T) {
	e := framework.New(t)
	s := startAWS(e)
	s.AddGroup(awsGroup("workers", 0, 10, 0, discoveryTags("prod")))
	s.SetThrottle(30)
	itest.DumpPods(e)
	itest.Deployment(e, "web", 6, map[string]string{"shape": "standard"}) // three 2-CPU nodes

	p := itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, discoveryArg("prod"))...)
	e.Eventually(120*time.Second, "all 6 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 6)
	})
	if got := s.GroupState("workers").Desired; got != 3 {
		t.Errorf("desired capacity %d, want 3", got)
	}
	if s.Throttled() == 0 {
		t.Error("the fake throttled no call")
	}
	if p.Log.Contains(`"Node group backed off"`) {
		t.Error("a group was backed off for throttling")
	}
}

// TestAWSAtomicRequestOverTwoGroupsRollsBackByInstanceID: an all-or-nothing
// ProvisioningRequest needs two nodes of each of two Auto Scaling groups;
// the launches of the second fail with InsufficientInstanceCapacity, so
// each attempt is rolled back: the instances it created in the first group
// are terminated by id (never a bare desired-capacity decrease that lets
// AWS pick). Once AWS has capacity again the request is provisioned, and
// no instance outside the failed attempts was ever terminated.
func TestAWSAtomicRequestOverTwoGroupsRollsBackByInstanceID(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	s := startAWS(e.Env)
	s.AddGroup(awsGroup("left", 0, 5, 0, discoveryTags("prod")))
	s.AddGroup(awsGroup("right", 0, 5, 0, discoveryTags("prod")))
	s.FailLaunches("right", "InsufficientInstanceCapacity", "We currently do not have sufficient m5.large capacity")
	p := itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e.Env, discoveryArg("prod"), "--enable-provisioning-requests",
		"--provisioning-request-initial-backoff-time=2s", "--provisioning-request-max-backoff-time=4s",
		"--initial-node-group-backoff-duration=2s", "--max-node-group-backoff-duration=4s", "--scale-down-enabled=false")...)
	// 1.5 CPUs per pod: one pod per 2-CPU m5.large.
	e.Request("job", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "a", Count: 2, CPU: "1500m", Selector: map[string]string{"pool": "left"}},
		itest.PodSet{Name: "b", Count: 2, CPU: "1500m", Selector: map[string]string{"pool": "right"}})

	e.Eventually(120*time.Second, "an attempt rolled back by terminating its instances", func(context.Context) (bool, error) {
		return len(s.Terminated()) >= 2, nil
	})
	if c := provreqCondition(e, "job", provreq.ConditionProvisioned); c == metav1.ConditionTrue {
		t.Fatal("the request was Provisioned while the second group could not launch")
	}
	s.FailLaunches("right", "", "")
	e.Condition("job", provreq.ConditionProvisioned, metav1.ConditionTrue, "", 120*time.Second)

	terminated := s.Terminated()
	for _, id := range terminated {
		// The fake's own record, not a poll: an attempt's instance can be
		// launched and terminated between two polls of a loaded machine.
		if in, ok := s.Instance(id); !ok || in.Group != "left" {
			t.Errorf("terminated instance %s (known to the fake: %v) of group %q: only the first group's attempt instances may go", id, ok, in.Group)
		}
	}
	for _, g := range []string{"left", "right"} {
		live := 0
		for _, in := range s.Instances(g) {
			if in.Lifecycle == awsfake.LifecyclePending || in.Lifecycle == awsfake.LifecycleInService {
				live++
				if slices.Contains(terminated, in.ID) {
					t.Errorf("instance %s is both terminated and live", in.ID)
				}
			}
		}
		if st := s.GroupState(g); live != 2 || st.Desired != 2 {
			t.Errorf("group %s: %d live instances, desired %d; want 2 and 2", g, live, st.Desired)
		}
	}
	if !p.Log.Written("InsufficientInstanceCapacity") || !p.Log.Written(`"Deleted instance of a rolled back all-or-nothing scale-up"`) {
		t.Error("the failure or the rollback by instance is not in the autoscaler's log")
	}
	t.Logf("figures: instances terminated by rollbacks=%d", len(terminated))
}

func provreqCondition(e *itest.ProvreqEnv, name, typ string) metav1.ConditionStatus {
	pr, err := e.PRs.Get(e.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	if c := provreq.FindCondition(pr.Status.Conditions, typ); c != nil {
		return c.Status
	}
	return ""
}
