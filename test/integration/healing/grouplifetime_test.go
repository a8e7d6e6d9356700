package healing

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest/inprocess"
)

// TestGroupLifetimesAndBudget: two kwok groups with lifetimes of their own
// (options.maxNodeLifetime: 1h and 10h) and no --max-node-lifetime; the
// short one also has its own budget, options.disruptionBudget "nodes=1",
// while --disruption-budget lets every voluntary reason take 100% of a
// group. Past one hour only the short group's three nodes are replaced,
// one at a time (never two of them in flight), each replacement first;
// the long group's node is never disrupted.
func TestGroupLifetimesAndBudget(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	short, long := framework.UniqueName("short"), framework.UniqueName("long")
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 6
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s}
    capacity: {cpu: "1", memory: 4Gi, pods: "110"}
  options: {maxNodeLifetime: 1h, disruptionBudget: "nodes=1"}
- name: %[2]s
  maxSize: 2
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s}
    capacity: {cpu: "1", memory: 4Gi, pods: "110"}
  options: {maxNodeLifetime: 10h}
`, short, long, framework.TestNamespaceLabel, e.Namespace))
	opts := inprocess.Options(e, path, func(o *config.Options) {
		o.Disruption.Budgets = []string{"nodes=100%"}
		o.DisruptionSettleTime = 0
	})
	clk := clocktesting.NewFakeClock(time.Now())
	p := inprocess.Start(e, clk, opts)
	if p.Loop.Disruption == nil {
		t.Fatal("no disruption engine: the groups' lifetimes should turn expiry on")
	}
	itest.Deployment(e, "web", 3, map[string]string{"pool": short})
	itest.Deployment(e, "keep", 1, map[string]string{"pool": long})
	var oldShort []string
	var oldLong string
	e.Eventually(120*time.Second, "3 web pods on 3 nodes of "+short+", 1 keep pod on "+long, func(ctx context.Context) (bool, error) {
		p.Step(5 * time.Second)
		p.CatchUp()
		p.RunOnce()
		s, err := poolNodeList(ctx, e, short)
		if err != nil || len(s) != 3 {
			return false, err
		}
		l, err := poolNodeList(ctx, e, long)
		if err != nil || len(l) != 1 {
			return false, err
		}
		oldShort = oldShort[:0]
		for _, n := range s {
			oldShort = append(oldShort, n.Name)
		}
		oldLong = l[0].Name
		n, err := itest.ReadyWebPods(ctx, e)
		return n == 3, err
	})
	// Younger than either lifetime: nothing is disrupted.
	for range 3 {
		p.Step(10 * time.Minute)
		p.CatchUp()
		p.RunOnce()
	}
	if got := p.Loop.Disruption.InFlight(); len(got) != 0 {
		t.Fatalf("disrupting %v at 30 minutes, want nothing", got)
	}
	p.Step(31 * time.Minute)
	maxInFlight := 0
	e.Eventually(240*time.Second, "the 3 nodes of "+short+" replaced and deleted", func(ctx context.Context) (bool, error) {
		p.Step(5 * time.Second)
		p.CatchUp()
		p.RunOnce()
		inFlight := p.Loop.Disruption.InFlight()
		n := 0
		for _, name := range oldShort {
			if inFlight[name] != "" {
				n++
			}
		}
		maxInFlight = max(maxInFlight, n)
		if _, ok := inFlight[oldLong]; ok {
			return false, fmt.Errorf("node %s of %s (lifetime 10h) disrupted at about 61 minutes", oldLong, long)
		}
		for _, name := range oldShort {
			if _, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	if maxInFlight != 1 {
		t.Errorf("at most %d of %s's nodes disrupted at once, want 1 (its budget nodes=1; the flag's is 100%%)", maxInFlight, short)
	}
	if _, err := e.Client.CoreV1().Nodes().Get(e.Context(), oldLong, metav1.GetOptions{}); err != nil {
		t.Errorf("node %s of the 10h group: %v; want it kept", oldLong, err)
	}
	if ev, err := itest.NodeEvents(e.Context(), e, oldLong); err != nil || ev["DisruptionStarted"] != "" {
		t.Errorf("node %s of the 10h group: DisruptionStarted %q (%v); want none", oldLong, ev["DisruptionStarted"], err)
	}
	e.Eventually(60*time.Second, "3 web pods Running on the replacements", func(ctx context.Context) (bool, error) {
		p.Step(5 * time.Second)
		p.CatchUp()
		p.RunOnce()
		n, err := itest.ReadyWebPods(ctx, e)
		return n == 3, err
	})
}
