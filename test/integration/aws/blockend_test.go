package aws

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// blockGroup adds a Capacity Block of one m5.large ending at end and a
// group "block" (desired capacity desired) launching into it; it returns
// the block's ID.
func blockGroup(s *awsfake.Server, end time.Time, desired int) string {
	block := s.AddCapacityReservation(awsfake.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 1, ReservationType: "capacity-block", StartDate: time.Now().Add(-time.Hour), EndDate: end,
		InstanceMatchCriteria: "targeted"})
	lt := s.AddLaunchTemplate(awsfake.LaunchTemplate{Name: "block", Versions: []awsfake.LaunchTemplateVersion{{Number: 1,
		InstanceType: "m5.large", MarketType: "capacity-block", CapacityReservation: &awsfake.CapacityReservationSpec{TargetID: block}}}})
	g := awsGroup("block", 0, 5, desired, nil)
	g.LaunchTemplate = &awsfake.LaunchTemplateSpec{ID: lt, Version: "$Default"}
	s.AddGroup(g)
	return block
}

// appNodes are the nodes app's pods are bound to (not being deleted).
func appNodes(ctx context.Context, e *framework.Env, app string) (map[string]int, error) {
	list, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			out[p.Spec.NodeName]++
		}
	}
	return out, nil
}

// TestAWSCapacityBlockDrainedBeforeItsEnd: a Capacity Block ends about 40 s
// after the start; with --aws-capacity-block-drain-before=30s the
// autoscaler drains and deletes the block group's node (reason
// reservationending, no replacement in the block) before the end, and the
// pod on it gets a node of the ordinary group; nothing was left running in
// the block for AWS to reclaim at the end, and the block group was not
// scaled up again.
// blockWithNode starts the fake with a Capacity Block ending at end whose
// group "block" runs one node, and an empty group "ordinary"; it returns the
// block's ID and its node's name.
func blockWithNode(e *framework.Env, end time.Time) (s *awsfake.Server, block, blockNode string) {
	s = startAWS(e)
	block = blockGroup(s, end, 1)
	s.AddGroup(awsGroup("ordinary", 0, 5, 0, nil))
	e.Eventually(60*time.Second, "the block's node", func(ctx context.Context) (bool, error) {
		return itest.NodesPerPool(e)["block"] == 1, nil
	})
	return s, block, s.Instances("block")[0].ID
}

func TestAWSCapacityBlockDrainedBeforeItsEnd(t *testing.T) {
	e := framework.New(t)
	end := time.Now().Add(40 * time.Second)
	s, block, blockNode := blockWithNode(e, end)
	itest.DumpPods(e)
	itest.Deployment(e, "batch", 1, map[string]string{"shape": "standard"})
	e.Eventually(60*time.Second, "the batch pod Running on the block's node", func(ctx context.Context) (bool, error) {
		on, err := appNodes(ctx, e, "batch")
		ok, rerr := itest.AllRunning(ctx, e, 1)
		return err == nil && rerr == nil && ok && on[blockNode] == 1, err
	})
	if time.Until(end) < 5*time.Second {
		t.Fatalf("setup took too long: the block ends in %v", time.Until(end))
	}
	start := time.Now()
	p := itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e, "--nodes=0:5:block", "--nodes=0:5:ordinary",
		"--aws-capacity-block-drain-before=30s", "--scale-down-enabled=false")...)

	// Not before the drain window (end - 30 s).
	if early := time.Until(end.Add(-31 * time.Second)); early > 0 {
		time.Sleep(early)
		if slices.Contains(s.Terminated(), blockNode) || itest.NodesPerPool(e)["block"] != 1 {
			t.Fatal("the block's node was removed before the drain window opened")
		}
	}
	var moved time.Duration
	e.Eventually(time.Until(end)+60*time.Second, "the batch pod Running on an ordinary node", func(ctx context.Context) (bool, error) {
		moved = time.Since(start)
		on, err := appNodes(ctx, e, "batch")
		if err != nil || on[blockNode] > 0 || len(on) != 1 {
			return false, err
		}
		ok, err := itest.AllRunning(ctx, e, 1)
		return ok && itest.NodesPerPool(e)["ordinary"] >= 1, err
	})
	movedAt := time.Now()
	e.Eventually(time.Until(end)+60*time.Second, "the block's instance terminated by the autoscaler", func(context.Context) (bool, error) {
		return slices.Contains(s.Terminated(), blockNode), nil
	})
	terminatedAt := time.Now()
	if movedAt.After(end) || terminatedAt.After(end) {
		t.Errorf("the pod moved %v and the block's instance was terminated %v after the block's end; want both before",
			movedAt.Sub(end), terminatedAt.Sub(end))
	}
	if !p.Log.Written("reservationending") {
		t.Error("the autoscaler's log does not name the reason reservationending")
	}
	// After the end, AWS had nothing of the block left to reclaim.
	time.Sleep(time.Until(end) + 3*time.Second)
	if got := s.ReclaimedAtBlockEnd(block); len(got) != 0 {
		t.Errorf("instances %v were still running in the block at its end", got)
	}
	for _, c := range s.DesiredChanges("block") {
		if c.To > c.From {
			t.Errorf("the block group was scaled up (%+v) after its drain began", c)
		}
	}
	if st := s.GroupState("block"); st.Desired != 0 {
		t.Errorf("block group's desired capacity %d, want 0", st.Desired)
	}
	t.Logf("figures: pod on an ordinary node %v after the autoscaler's start, %v before the end; block instance terminated %v before the end",
		moved.Round(time.Second), end.Sub(movedAt).Round(time.Second), end.Sub(terminatedAt).Round(time.Second))
}

// TestAWSCapacityBlockEndingRevokesTheProvisioningRequest: an all-or-nothing
// ProvisioningRequest is provisioned on the node of a Capacity Block
// ending 70 s after the start; from the drain window on (30 s before the
// end) the request is CapacityRevoked (CapacityBlockEnding, naming the
// block and its end), and the node is removed before the end.
func TestAWSCapacityBlockEndingRevokesTheProvisioningRequest(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	s := startAWS(e.Env)
	end := time.Now().Add(70 * time.Second).Truncate(time.Second)
	block := blockGroup(s, end, 0)
	itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e.Env, "--nodes=0:1:block", "--enable-provisioning-requests",
		"--aws-capacity-block-drain-before=30s", "--scale-down-enabled=false")...)
	e.Request("job", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "a", Count: 1, CPU: "1500m", Selector: map[string]string{"pool": "block"}})
	e.Condition("job", provreq.ConditionProvisioned, metav1.ConditionTrue, "", 40*time.Second)
	provisionedAt := time.Now()
	if !provisionedAt.Before(end.Add(-30 * time.Second)) {
		t.Fatalf("provisioned %v before the end, inside the drain window: too late to tell", end.Sub(provisionedAt))
	}
	pr := e.Condition("job", provreq.ConditionCapacityRevoked, metav1.ConditionTrue, processor.ReasonCapacityBlockEnding, 60*time.Second)
	revokedAt := time.Now()
	if revokedAt.Before(end.Add(-31*time.Second)) || revokedAt.After(end) {
		t.Errorf("revoked %v before the end; want within the 30 s drain window", end.Sub(revokedAt))
	}
	msg := e.ConditionMessage(pr, provreq.ConditionCapacityRevoked)
	for _, part := range []string{block, end.UTC().Format(time.RFC3339)} {
		if !strings.Contains(msg, part) {
			t.Errorf("CapacityRevoked message %q does not name %q", msg, part)
		}
	}
	e.Eventually(time.Until(end), "the block's node removed before the end", func(context.Context) (bool, error) {
		return itest.NodesPerPool(e.Env)["block"] == 0 && len(s.Terminated()) == 1, nil
	})
	t.Logf("figures: provisioned %v before the end, revoked %v before the end",
		end.Sub(provisionedAt).Round(time.Second), end.Sub(revokedAt).Round(time.Second))
}

// TestAWSCapacityBlockEndingRevokesACheckCapacityBooking: a check-capacity
// ProvisioningRequest books room on the running node of a Capacity Block
// ending 70 s after the start; from the drain window on (30 s before the
// end) the request is CapacityRevoked (CapacityBlockEnding, naming the
// block), not CapacityLost once the node is cordoned.
func TestAWSCapacityBlockEndingRevokesACheckCapacityBooking(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	s := startAWS(e.Env)
	end := time.Now().Add(70 * time.Second).Truncate(time.Second)
	block := blockGroup(s, end, 1)
	e.Eventually(60*time.Second, "the block's node", func(ctx context.Context) (bool, error) {
		return itest.NodesPerPool(e.Env)["block"] == 1, nil
	})
	itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", awsArgs(e.Env, "--nodes=0:1:block", "--enable-provisioning-requests",
		"--aws-capacity-block-drain-before=30s", "--scale-down-enabled=false")...)
	e.Request("check", provreq.ClassCheckCapacity, nil, false,
		itest.PodSet{Name: "a", Count: 1, CPU: "500m", Selector: map[string]string{"pool": "block"}})
	e.Condition("check", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound, 30*time.Second)
	bookedAt := time.Now()
	if !bookedAt.Before(end.Add(-30 * time.Second)) {
		t.Fatalf("booked %v before the end, inside the drain window: too late to tell", end.Sub(bookedAt))
	}
	pr := e.Condition("check", provreq.ConditionCapacityRevoked, metav1.ConditionTrue, processor.ReasonCapacityBlockEnding, 60*time.Second)
	revokedAt := time.Now()
	if revokedAt.Before(end.Add(-31*time.Second)) || revokedAt.After(end) {
		t.Errorf("revoked %v before the end; want within the 30 s drain window", end.Sub(revokedAt))
	}
	if msg := e.ConditionMessage(pr, provreq.ConditionCapacityRevoked); !strings.Contains(msg, block) {
		t.Errorf("CapacityRevoked message %q does not name the block %s", msg, block)
	}
	t.Logf("figures: booked %v before the end, revoked %v before the end",
		end.Sub(bookedAt).Round(time.Second), end.Sub(revokedAt).Round(time.Second))
}
