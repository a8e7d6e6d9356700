package healing

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest/inprocess"
)

// groupTarget is the kwok provider's target size of group id.
func groupTarget(t *testing.T, p *inprocess.Autoscaler, id string) int {
	t.Helper()
	groups, err := p.Provider.NodeGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if g.Id() == id {
			n, err := g.TargetSize(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("node group %s not found", id)
	return 0
}

// expiryHold is the last loop's expiry verdict on node, when held back by a
// protection.
func expiryHold(p *inprocess.Autoscaler, node string) (string, bool) {
	v, _, _, ok := p.Explainer.Node(node)
	if !ok {
		return "", false
	}
	for _, d := range v.Disruptions {
		if d.Reason == string(disruption.Expired) && d.Decision == explain.DecisionHeld && d.HeldBy == explain.HeldByProtection {
			return d.Hold, true
		}
	}
	return "", false
}

// TestCheckCapacityBookingKeepsAnExpiredNode: a check-capacity
// ProvisioningRequest answered Provisioned=True books room on the only
// node of a group; past --max-node-lifetime that node is not replaced
// while the booking lasts (no replacement asked for, the node never
// cordoned nor tainted, no DisruptionStarted), and `explain node` says the
// request holds it. Once the booking has expired
// (--provisioning-request-booking-time), the next loops replace the node.
func TestCheckCapacityBookingKeepsAnExpiredNode(t *testing.T) {
	const lifetime, booking = time.Hour, 3 * time.Hour
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	pool := framework.UniqueName("book")
	path := itest.WriteKwokConfig(e.Env, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 3
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`, pool, framework.TestNamespaceLabel, e.Namespace))
	opts := inprocess.Options(e.Env, path, func(o *config.Options) {
		o.EnableProvisioningRequests = true
		o.ProvReqBookingTime = booking
		o.Disruption.MaxNodeLifetime = lifetime
		o.DisruptionSettleTime = 0
	})
	clk := clocktesting.NewFakeClock(time.Now())
	p := inprocess.Start(e.Env, clk, opts)
	if p.Loop.Disruption == nil {
		t.Fatal("no disruption engine with --max-node-lifetime")
	}
	loop := func(d time.Duration) {
		p.Step(d)
		p.CatchUp()
		p.RunOnce()
	}
	itest.Deployment(e.Env, "web", 1, map[string]string{"pool": pool})
	var old string
	e.Eventually(90*time.Second, "web Running on a node", func(ctx context.Context) (bool, error) {
		loop(5 * time.Second)
		list, err := poolNodeList(ctx, e.Env, pool)
		if err != nil || len(list) != 1 {
			return false, err
		}
		old = list[0].Name
		n, err := itest.ReadyWebPods(ctx, e.Env)
		return n == 1, err
	})
	// Two 1-CPU pods fit the node's free room (3 CPUs): the request is
	// answered at once and its capacity booked there.
	e.Request("hold", provreq.ClassCheckCapacity, nil, false,
		itest.PodSet{Name: "main", Count: 2, CPU: "1", Selector: map[string]string{"pool": pool}})
	e.Eventually(60*time.Second, "request hold Provisioned=True", func(ctx context.Context) (bool, error) {
		loop(time.Second)
		pr, err := e.PRs.Get(ctx, "hold", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return provreq.IsConditionTrue(pr.Status.Conditions, provreq.ConditionProvisioned), nil
	})
	loop(time.Second)

	// Past the node's lifetime, well within the booking: kept, loop after loop.
	p.Step(lifetime + time.Minute)
	for range 5 {
		loop(time.Minute)
	}
	want := "ProvisioningRequest " + e.Namespace + "/hold"
	if hold, ok := expiryHold(p, old); !ok || !strings.Contains(hold, want) {
		t.Errorf("explain node %s: expiry held by %q (held: %v), want a protection naming %s; verdict %s",
			old, hold, ok, want, p.NodeVerdict(old))
	}
	n, err := e.Client.CoreV1().Nodes().Get(e.Context(), old, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("booked node %s past its lifetime: %v; want it kept", old, err)
	}
	if n.Spec.Unschedulable || itest.HasTaintKey(n, disruption.Taint) {
		t.Errorf("booked node %s touched: unschedulable %v, taints %v", old, n.Spec.Unschedulable, n.Spec.Taints)
	}
	if got := groupTarget(t, p, pool); got != 1 {
		t.Errorf("group %s target size %d while its node is booked, want 1 (no replacement asked for)", pool, got)
	}
	if ev, err := itest.NodeEvents(e.Context(), e.Env, old); err != nil || ev["DisruptionStarted"] != "" {
		t.Errorf("booked node %s: DisruptionStarted %q (%v), want none", old, ev["DisruptionStarted"], err)
	}
	pr, err := e.PRs.Get(e.Context(), "hold", metav1.GetOptions{})
	if err != nil || provreq.IsConditionTrue(pr.Status.Conditions, provreq.ConditionBookingExpired) ||
		provreq.IsConditionTrue(pr.Status.Conditions, provreq.ConditionCapacityRevoked) {
		t.Fatalf("request hold no longer booking during the check (%v): %+v", err, pr.Status.Conditions)
	}

	// The booking ends: the node goes the expiry's way.
	p.Step(booking)
	e.Eventually(60*time.Second, "request hold BookingExpired=True", func(ctx context.Context) (bool, error) {
		loop(time.Second)
		pr, err := e.PRs.Get(ctx, "hold", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return provreq.IsConditionTrue(pr.Status.Conditions, provreq.ConditionBookingExpired), nil
	})
	e.Eventually(120*time.Second, "node "+old+" replaced and deleted", func(ctx context.Context) (bool, error) {
		loop(5 * time.Second)
		_, err := e.Client.CoreV1().Nodes().Get(ctx, old, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	e.Eventually(60*time.Second, "web Running on the replacement", func(ctx context.Context) (bool, error) {
		list, err := poolNodeList(ctx, e.Env, pool)
		if err != nil || len(list) != 1 || list[0].Name == old {
			return false, err
		}
		n, err := itest.ReadyWebPods(ctx, e.Env)
		return n == 1, err
	})
	e.Eventually(30*time.Second, "DisruptionStarted (expired) on "+old, func(ctx context.Context) (bool, error) {
		ev, err := itest.NodeEvents(ctx, e.Env, old)
		return err == nil && strings.Contains(ev["DisruptionStarted"], "expired"), err
	})
}
