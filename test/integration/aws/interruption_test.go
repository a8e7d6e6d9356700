package aws

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestAWSSpotInterruptionReplacesAndDrainsByThePDB: the fake sends a Spot
// interruption warning (as EventBridge would, to the queue
// --aws-interruption-queue names) for the instance of the node that runs
// both web pods. The autoscaler asks its group for a replacement at once
// (within 5 s of the notice), cordons the node and evicts its pods as
// their PodDisruptionBudget (minAvailable 1) allows (within 90 s, never
// below one Ready pod), terminates the instance by its ID, and deletes the
// queue's message once the node is being disrupted.
func TestAWSSpotInterruptionReplacesAndDrainsByThePDB(t *testing.T) {
	e := framework.New(t)
	s := startAWS(e)
	s.CreateQueue("interruptions")
	// Both web pods on the first node (the PDB then lets only one go at a
	// time), then a second, empty node.
	s.AddGroup(awsGroup("spot", 0, 5, 1, discoveryTags("prod")))
	e.Eventually(60*time.Second, "one node", func(ctx context.Context) (bool, error) {
		return itest.NodesPerPool(e)["spot"] == 1, nil
	})
	itest.DumpPods(e)
	itest.Deployment(e, "web", 2, map[string]string{"pool": "spot"})
	e.Eventually(60*time.Second, "both web pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	s.AddGroup(awsGroup("spot", 0, 5, 2, discoveryTags("prod")))
	e.Eventually(60*time.Second, "two nodes", func(ctx context.Context) (bool, error) {
		return itest.NodesPerPool(e)["spot"] == 2, nil
	})
	minReady, stopSampling := itest.WebPDBAndSampler(e)
	defer stopSampling()

	p := itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, discoveryArg("prod"),
		"--aws-interruption-queue=interruptions", "--scale-down-enabled=false")...)
	e.Eventually(60*time.Second, "the autoscaler reading the queue after a loop", func(ctx context.Context) (bool, error) {
		return p.Log.Contains(`"Reading interruption notices"`) && s.Calls()["ReceiveMessage"] > 0, nil
	})
	victim := busiestNode(t, e)
	if n, err := webPodsOnNode(e.Context(), e, victim); err != nil || n != 2 {
		t.Fatalf("%d web pods on %s (%v), want both", n, victim, err)
	}
	before := len(s.Instances("spot"))
	start := time.Now()
	msg := s.SendSpotInterruption("interruptions", victim)

	var replaced, evicted, removed time.Duration
	e.Eventually(30*time.Second, "the replacement asked for", func(ctx context.Context) (bool, error) {
		replaced = time.Since(start)
		return s.GroupState("spot").Desired == before+1, nil
	})
	e.Eventually(120*time.Second, "the victim's web pods evicted", func(ctx context.Context) (bool, error) {
		evicted = time.Since(start)
		n, err := webPodsOnNode(ctx, e, victim)
		return err == nil && n == 0, err
	})
	e.Eventually(120*time.Second, "the victim's instance terminated by ID and its Node gone", func(ctx context.Context) (bool, error) {
		removed = time.Since(start)
		_, err := e.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		return slices.Contains(s.Terminated(), victim) && apierrors.IsNotFound(err), nil
	})
	e.Eventually(30*time.Second, "the message deleted", func(ctx context.Context) (bool, error) {
		return slices.Contains(s.DeletedMessages(), msg) && len(s.QueueMessages("interruptions")) == 0, nil
	})
	e.Eventually(60*time.Second, "both web pods Running again", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	stopSampling()
	t.Logf("spot interruption: replacement asked for after %v, pods evicted after %v, instance gone after %v; fewest Ready web pods %d",
		replaced.Round(100*time.Millisecond), evicted.Round(100*time.Millisecond), removed.Round(100*time.Millisecond), minReady())
	if replaced > 5*time.Second {
		t.Errorf("the replacement was asked for %v after the notice, want within 5s", replaced)
	}
	if evicted > 90*time.Second {
		t.Errorf("the pods were evicted %v after the notice, want within 90s", evicted)
	}
	if got := minReady(); got < 1 {
		t.Errorf("the Ready web pods fell to %d: the PodDisruptionBudget (minAvailable 1) was not respected", got)
	}
	if !p.Log.Written(`"Disruption started"`) || !p.Log.Written("spot_interruption") {
		t.Errorf("the autoscaler's log does not show the interruption's disruption")
	}
}

// busiestNode is the node that runs the most web pods.
func busiestNode(t *testing.T, e *framework.Env) string {
	t.Helper()
	list, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	best := ""
	for _, p := range list.Items {
		count[p.Spec.NodeName]++
		if best == "" || count[p.Spec.NodeName] > count[best] {
			best = p.Spec.NodeName
		}
	}
	if best == "" {
		t.Fatal("no web pod is bound")
	}
	return best
}

// webPodsOnNode counts the web pods bound to node and not being deleted.
func webPodsOnNode(ctx context.Context, e *framework.Env, node string) (int, error) {
	list, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}
