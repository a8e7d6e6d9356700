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
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest/inprocess"
)

// slicesOn counts the ResourceSlices published for node.
func slicesOn(ctx context.Context, e *framework.Env, node string) (int, error) {
	list, err := e.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sl := range list.Items {
		if sl.Spec.NodeName != nil && *sl.Spec.NodeName == node {
			n++
		}
	}
	return n, nil
}

// TestExpiredDRANodeWaitsForTheReplacementsDevices: a kwok group whose
// nodes publish their DRA ResourceSlices 10 s (real time) after they
// appear, with a lifetime of its own (1h). Past the lifetime the node is
// replaced, and its pod is not evicted while the replacement's Ready
// condition is true but it has not published its slices (clusterstate:
// ready but its devices are not), nor while the node lifecycle controller's
// not-ready taint is still on it; once it is ready as clusterstate judges,
// the old node drains and goes.
func TestExpiredDRANodeWaitsForTheReplacementsDevices(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	pool := framework.UniqueName("dra")
	driver := pool + ".example.com"
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 2
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
    devices:
    - driver: %[4]s
      devices:
      - name: gpu-0
  faults: {resourceSliceDelay: 10s}
  options: {maxNodeLifetime: 1h}
`, pool, framework.TestNamespaceLabel, e.Namespace, driver))
	opts := inprocess.Options(e, path, func(o *config.Options) {
		o.DisruptionSettleTime = 0
	})
	clk := clocktesting.NewFakeClock(time.Now())
	p := inprocess.Start(e, clk, opts)
	if p.Loop.Disruption == nil {
		t.Fatal("no disruption engine: the group's lifetime should turn expiry on")
	}
	itest.Deployment(e, "web", 1, map[string]string{"pool": pool})
	var old string
	e.Eventually(120*time.Second, "web Running on a node of "+pool+" with its slices published", func(ctx context.Context) (bool, error) {
		p.Step(5 * time.Second)
		p.CatchUp()
		p.RunOnce()
		list, err := poolNodeList(ctx, e, pool)
		if err != nil || len(list) != 1 {
			return false, err
		}
		old = list[0].Name
		if n, err := slicesOn(ctx, e, old); err != nil || n == 0 {
			return false, err
		}
		n, err := itest.ReadyWebPods(ctx, e)
		return n == 1, err
	})
	p.Step(61 * time.Minute)
	// Loops at about 5 a second of real time, one fake second each, so that
	// the replacement's 10 s of real delay stay well within
	// --max-node-provision-time on the fake clock.
	var repl string
	waited := 0
	e.Eventually(120*time.Second, "node "+old+" replaced and deleted", func(ctx context.Context) (bool, error) {
		time.Sleep(200 * time.Millisecond)
		p.Step(time.Second)
		p.CatchUp()
		p.RunOnce()
		list, err := poolNodeList(ctx, e, pool)
		if err != nil {
			return false, err
		}
		oldThere := false
		for _, n := range list {
			oldThere = oldThere || n.Name == old
		}
		for _, n := range list {
			if n.Name == old {
				continue
			}
			repl = n.Name
			ready := false
			for _, c := range n.Status.Conditions {
				if c.Type == "Ready" && c.Status == "True" {
					ready = true
				}
			}
			slices, err := slicesOn(ctx, e, n.Name)
			if err != nil {
				return false, err
			}
			if ready && slices == 0 && oldThere {
				waited++
				if on, err := webPodsOn(ctx, e, old); err != nil || on != 1 {
					return false, fmt.Errorf("web pods on %s: %d (%v) while its replacement %s is Ready without its ResourceSlices; want its pod kept",
						old, on, err, n.Name)
				}
			}
		}
		if !oldThere {
			return true, nil
		}
		_, err = e.Client.CoreV1().Nodes().Get(ctx, old, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if waited == 0 {
		t.Fatalf("no loop saw the replacement %q Ready without its slices: the test did not test the wait", repl)
	}
	t.Logf("%d loops saw the replacement %s Ready without its slices, the old node kept", waited, repl)
	e.Eventually(60*time.Second, "web Running on the replacement", func(ctx context.Context) (bool, error) {
		p.Step(time.Second)
		p.CatchUp()
		p.RunOnce()
		n, err := itest.ReadyWebPods(ctx, e)
		return n == 1, err
	})
	ev, err := itest.NodeEvents(e.Context(), e, old)
	if err != nil || !strings.Contains(ev["DisruptionStarted"], "expired") {
		t.Errorf("events of %s: %v (%v); want DisruptionStarted (expired)", old, ev, err)
	}
}
