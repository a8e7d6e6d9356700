package aws

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/aws"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// ownGroup is awsGroup labelled, by its node-template tags, with the
// test's namespace and without shape=standard: the pods of other tests
// (and of an earlier run of this one) fit none of its nodes.
func ownGroup(e *framework.Env, name string, desired int) awsfake.Group {
	g := awsGroup(name, 0, 5, desired, discoveryTags("prod"))
	delete(g.Tags, awsprovider.LabelTagPrefix+"shape")
	g.Tags[awsprovider.LabelTagPrefix+framework.TestNamespaceLabel] = e.Namespace
	return g
}

// own selects the nodes of the test's groups (ownGroup).
func own(e *framework.Env, kv ...string) map[string]string {
	out := map[string]string{framework.TestNamespaceLabel: e.Namespace}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// spotOnlyGroup is an ownGroup of m5.large bought as Spot only (a
// mixed-instances policy with no On-Demand), in us-east-1a only: one Spot
// offering.
func spotOnlyGroup(e *framework.Env, name string, desired int) awsfake.Group {
	g := ownGroup(e, name, desired)
	zero := 0
	g.MixedInstances = &awsfake.MixedInstancesPolicy{LaunchTemplate: *g.LaunchTemplate, Overrides: []string{"m5.large"},
		OnDemandPercentageAboveBaseCapacity: &zero}
	g.LaunchTemplate = nil
	g.Subnets = []string{"subnet-a"}
	return g
}

// preferSpot makes the priority expander prefer the group spot.
func preferSpot(e *framework.Env, spot string) {
	e.T.Helper()
	cm := itest.PriorityConfigMap(e, "20:\n  - ^"+spot+"$\n10:\n  - .*\n")
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(), cm, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// explainedVerdict waits until /explainz's record of pod (in the test's
// namespace) has a verdict of group that satisfies ok, and returns it.
func explainedVerdict(e *framework.Env, p *itest.AutoscalerProcess, pod, group string,
	ok func(explain.NodeGroupVerdict) bool) explain.NodeGroupVerdict {
	e.T.Helper()
	var got explain.NodeGroupVerdict
	var last string
	e.Eventually(30*time.Second, "/explainz for "+pod+" with the verdict of "+group, func(ctx context.Context) (bool, error) {
		code, body, err := p.Explainz(ctx, "format=json&pod="+e.Namespace+"/"+pod)
		if err != nil || code != http.StatusOK {
			return false, nil // not recorded yet
		}
		last = body
		var rec struct{ explain.PodGroup }
		if err := json.Unmarshal([]byte(body), &rec); err != nil {
			return false, err
		}
		for _, v := range rec.NodeGroups {
			if v.NodeGroup == group && ok(v) {
				got = v
				return true, nil
			}
		}
		return false, nil
	})
	if e.T.Failed() {
		e.T.Logf("last /explainz answer: %s", last)
	}
	return got
}

// metricLine waits until the autoscaler's /metrics has a line that starts
// with prefix.
func metricLine(e *framework.Env, p *itest.AutoscalerProcess, prefix string) {
	e.T.Helper()
	e.Eventually(30*time.Second, "metric "+prefix, func(ctx context.Context) (bool, error) {
		_, body, err := p.Get(ctx, "/metrics")
		return err == nil && strings.Contains(body, "\n"+prefix), nil
	})
}

func podRunning(ctx context.Context, e *framework.Env, name string) (bool, error) {
	pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return pod.Status.Phase == apiv1.PodRunning, nil
}

// TestAWSSpotAvoidedAfterInterruptionOnDemandTakesThePods: a
// Spot-only group of one offering (m5.large in us-east-1a), preferred by
// the priority expander, runs both web pods; an On-Demand group is empty.
// A Spot interruption warning for that node makes the Spot group avoided
// (backed off with code SpotInterrupted until the avoid time, 20 s here),
// so the interrupted node is drained without a replacement from it and
// its pods get a node of the On-Demand group within seconds; a pod that
// only the Spot group fits waits, /explainz naming the back-off, its code
// and its end, and the back-off gauge says SpotInterrupted; once the avoid
// time is over the Spot group is eligible again and that pod gets a Spot
// node. The Spot group is never grown during the avoidance.
func TestAWSSpotAvoidedAfterInterruptionOnDemandTakesThePods(t *testing.T) {
	const avoid = 20 * time.Second
	e := framework.New(t)
	s := startAWS(e)
	s.CreateQueue("interruptions")
	spot, od := "avoid-spot", "avoid-on-demand"
	s.AddGroup(spotOnlyGroup(e, spot, 1))
	s.AddGroup(ownGroup(e, od, 0))
	e.Eventually(60*time.Second, "the Spot node", func(ctx context.Context) (bool, error) {
		return itest.NodesPerPool(e)[spot] == 1, nil
	})
	itest.DumpPods(e)
	itest.Deployment(e, "web", 2, own(e)) // 1 CPU each: both on the m5.large
	e.Eventually(60*time.Second, "both web pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	preferSpot(e, spot)

	p := itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, discoveryArg("prod"), "--expander=priority",
		"--aws-interruption-queue=interruptions", "--aws-interrupted-capacity-avoid-time="+avoid.String(),
		"--scale-down-enabled=false", "--emit-per-nodegroup-metrics")...)
	e.Eventually(60*time.Second, "the autoscaler reading the queue after a loop", func(ctx context.Context) (bool, error) {
		return p.Log.Contains(`"Reading interruption notices"`) && s.Calls()["ReceiveMessage"] > 0, nil
	})
	victim := busiestNode(t, e)
	if in, ok := s.Instance(victim); !ok || !in.Spot || in.Zone != "us-east-1a" || in.InstanceType != "m5.large" {
		t.Fatalf("the web pods' node %s is %+v, want a Spot m5.large in us-east-1a", victim, in)
	}
	start := time.Now()
	s.SendSpotInterruption("interruptions", victim)

	var raised awsfake.DesiredChange
	e.Eventually(30*time.Second, "the On-Demand group raised", func(ctx context.Context) (bool, error) {
		if ch := s.DesiredChanges(od); len(ch) > 0 {
			raised = ch[0]
			return true, nil
		}
		return false, nil
	})
	toOnDemand := raised.At.Sub(start)
	// A pod only the Spot group fits waits for the avoidance to end.
	itest.CreatePods(e, "pinned", 1, "1", own(e, "pool", spot))
	v := explainedVerdict(e, p, "pinned-0", spot, func(v explain.NodeGroupVerdict) bool { return v.Cause == explain.CauseBackoff })
	if !strings.Contains(v.Reason, "SpotInterrupted") || v.Until == nil || !strings.Contains(v.Detail, "m5.large in us-east-1a") {
		t.Errorf("/explainz verdict of the Spot group %+v, want a back-off with code SpotInterrupted, its end, and the offering", v)
	} else if end := v.Until.Sub(start); end < avoid-2*time.Second || end > avoid+2*time.Second {
		t.Errorf("the back-off ends %v after the notice, want about %v", end, avoid)
	}
	metricLine(e, p, `cluster_autoscaler_node_group_backoff_status{node_group="`+spot+`",reason="SpotInterrupted"} 1`)
	metricLine(e, p, `cluster_autoscaler_interruption_notices_total{action="received",kind="spot_interruption"} 1`)

	e.Eventually(60*time.Second, "the web pods Running again", func(ctx context.Context) (bool, error) {
		return itest.NodesPerPool(e)[od] == 1 && itest.NodesPerPool(e)[spot] == 0, nil
	})
	var eligible time.Duration
	e.Eventually(90*time.Second, "the pinned pod on a Spot node once the avoidance ended", func(ctx context.Context) (bool, error) {
		for _, c := range s.DesiredChanges(spot) {
			if c.To > c.From {
				eligible = c.At.Sub(start)
			}
		}
		return podRunning(ctx, e, "pinned-0")
	})
	for _, c := range s.DesiredChanges(spot) {
		if c.To > c.From && c.At.Sub(start) < avoid-time.Second {
			t.Errorf("the Spot group was raised %d -> %d %v after the notice, during the avoidance", c.From, c.To, c.At.Sub(start))
		}
	}
	if ok, err := itest.AllRunning(e.Context(), e, 3); err != nil || !ok {
		t.Errorf("not all 3 pods Running at the end (%v)", err)
	}
	t.Logf("spot interruption avoided: On-Demand group raised %v after the notice (%d -> %d); Spot group eligible again and raised %v after it",
		toOnDemand.Round(10*time.Millisecond), raised.From, raised.To, eligible.Round(100*time.Millisecond))
	t.Logf("loops from the notice to the On-Demand increase: %d", loopsBetween(p.Log.String(), `"Interruption notice"`,
		`"Set the desired capacity of an Auto Scaling group" loop=\d+ nodeGroup="`+od+`"`))
	if toOnDemand > 10*time.Second {
		t.Errorf("the On-Demand group was raised %v after the notice, want within seconds", toOnDemand)
	}
}

// loopsBetween counts the loop summaries logged between the first line
// containing from and the first match of the regular expression to after
// it; -1 when either is missing.
func loopsBetween(log, from, to string) int {
	i := strings.Index(log, from)
	if i < 0 {
		return -1
	}
	m := regexp.MustCompile(to).FindStringIndex(log[i:])
	if m == nil {
		return -1
	}
	return strings.Count(log[i:i+m[0]], `"Loop summary"`)
}

// TestAWSSpotLaunchFailureFallsBackToOnDemandInOneLoop: the Spot group,
// preferred by the priority expander, cannot launch ("Could not launch Spot
// Instances. InsufficientInstanceCapacity - There is no Spot capacity
// available ..."); the loop that reads the failed activity backs it off
// with that code and raises the On-Demand group, which runs the pods; a
// pod only the Spot group fits is explained with the back-off's code and
// end. Nothing is terminated.
func TestAWSSpotLaunchFailureFallsBackToOnDemandInOneLoop(t *testing.T) {
	e := framework.New(t)
	s := startAWS(e)
	spot, od := "fail-spot", "fail-on-demand"
	s.AddGroup(spotOnlyGroup(e, spot, 0))
	s.AddGroup(ownGroup(e, od, 0))
	s.FailLaunchesWith(spot, awsfake.LaunchFailure{Code: "InsufficientInstanceCapacity",
		Message: "There is no Spot capacity available that matches your request.", Form: awsfake.FleetSpot})
	preferSpot(e, spot)
	itest.DumpPods(e)
	itest.Deployment(e, "web", 2, own(e))
	itest.CreatePods(e, "pinned", 1, "1", own(e, "pool", spot))

	p := itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, discoveryArg("prod"), "--expander=priority",
		"--scale-down-enabled=false")...)
	e.Eventually(90*time.Second, "both web pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	if got := itest.NodesPerPool(e); got[od] != 1 || got[spot] != 0 {
		t.Errorf("nodes per group %v, want %s:1", got, od)
	}
	v := explainedVerdict(e, p, "pinned-0", spot, func(v explain.NodeGroupVerdict) bool { return v.Cause == explain.CauseBackoff })
	if !strings.Contains(v.Reason, "InsufficientInstanceCapacity") || v.Until == nil || !strings.Contains(v.Detail, "Spot") {
		t.Errorf("/explainz verdict of the Spot group %+v, want a back-off with code InsufficientInstanceCapacity and its end", v)
	}
	failed, raised := s.FailedLaunches(spot), s.DesiredChanges(od)
	if len(failed) == 0 || len(raised) == 0 {
		t.Fatalf("failed Spot launches %v, On-Demand changes %v; want both", failed, raised)
	}
	fallback := raised[0].At.Sub(failed[0])
	loops := loopsBetween(p.Log.String(), `"Node group backed off"`,
		`"Set the desired capacity of an Auto Scaling group" loop=\d+ nodeGroup="`+od+`"`)
	t.Logf("spot launch failure: On-Demand group raised %v after the failed Spot activity (%d loop summaries between the back-off and it)",
		fallback.Round(10*time.Millisecond), loops)
	if !p.Log.Written(`errorCode="InsufficientInstanceCapacity"`) {
		t.Error("the back-off is not logged with AWS's error code")
	}
	if loops < 0 || loops > 1 {
		t.Errorf("%d loops between the back-off and the On-Demand increase, want at most 1", loops)
	}
	if fallback > 10*time.Second {
		t.Errorf("the On-Demand group was raised %v after the failed Spot activity, want within seconds", fallback)
	}
	if got := s.Terminated(); len(got) != 0 {
		t.Errorf("instances terminated: %v", got)
	}
}
