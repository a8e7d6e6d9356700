package providers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// kwokConfig returns a one-group config whose nodes carry the test's cleanup label.
func kwokConfig(e *framework.Env, group, faults string, min, max int) *kwok.Config {
	t := e.T
	t.Helper()
	cfg, err := kwok.ParseConfig([]byte(fmt.Sprintf(`
nodeGroups:
- name: %s
  minSize: %d
  maxSize: %d
  template:
    labels: {%s: %s, pool: %s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {%s}
`, group, min, max, framework.TestNamespaceLabel, e.Namespace, group, faults)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func startKwok(e *framework.Env, cfg *kwok.Config) (*kwok.Provider, context.CancelFunc) {
	e.T.Helper()
	ctx, cancel := context.WithCancel(e.Context())
	p, err := kwok.New(ctx, cfg, e.Client, e.Namespace, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { cancel(); p.Stop() })
	return p, cancel
}

func group(t *testing.T, p *kwok.Provider) cloudprovider.NodeGroup {
	t.Helper()
	groups, err := p.NodeGroups(context.Background())
	if err != nil || len(groups) != 1 {
		t.Fatalf("node groups: %v, %v", groups, err)
	}
	return groups[0]
}

func groupNodes(e *framework.Env, pool string) []apiv1.Node {
	e.T.Helper()
	list, err := e.Client.CoreV1().Nodes().List(e.Context(), metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		e.T.Fatal(err)
	}
	return list.Items
}

func statuses(t *testing.T, g cloudprovider.NodeGroup) (running, creating int, errs []string) {
	t.Helper()
	instances, err := g.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range instances {
		switch {
		case in.Status.ErrorInfo != nil:
			errs = append(errs, in.Status.ErrorInfo.ErrorClass.String()+"/"+in.Status.ErrorInfo.ErrorCode)
		case in.Status.State == cloudprovider.InstanceRunning:
			running++
		default:
			creating++
		}
	}
	return running, creating, errs
}

// TestKwokProviderCreatesNodesThatBecomeReady: IncreaseSize creates
// instances first and their Nodes after the registration delay; kwok makes
// the Nodes Ready; DeleteNodes removes exactly the named ones.
func TestKwokProviderCreatesNodesThatBecomeReady(t *testing.T) {
	e := framework.New(t)
	name := framework.UniqueName("ng")
	p, _ := startKwok(e, kwokConfig(e, name, "registrationDelay: 1s", 1, 5))
	g := group(t, p)
	ctx := e.Context()

	if err := g.IncreaseSize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if size, _ := g.TargetSize(ctx); size != 3 {
		t.Fatalf("target = %d, want 3", size)
	}
	if n := len(groupNodes(e, name)); n != 0 {
		t.Errorf("%d nodes exist before the registration delay", n)
	}
	if _, creating, _ := statuses(t, g); creating != 3 {
		t.Errorf("creating = %d right after IncreaseSize, want 3", creating)
	}
	e.Eventually(30*time.Second, "3 Ready nodes", func(context.Context) (bool, error) {
		ready := 0
		for _, n := range groupNodes(e, name) {
			for _, c := range n.Status.Conditions {
				if c.Type == apiv1.NodeReady && c.Status == apiv1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == 3, nil
	})
	nodes := groupNodes(e, name)
	for _, n := range nodes {
		if n.Spec.ProviderID != kwok.ProviderIDPrefix+n.Name || n.Labels["kubernetes.io/hostname"] != n.Name ||
			n.Annotations[kwok.NodeGroupAnnotation] != name {
			t.Errorf("node %s: providerID %q, hostname %q, group %q", n.Name, n.Spec.ProviderID,
				n.Labels["kubernetes.io/hostname"], n.Annotations[kwok.NodeGroupAnnotation])
		}
		if got, _ := p.NodeGroupForNode(ctx, &n); got == nil || got.Id() != name {
			t.Errorf("NodeGroupForNode(%s) = %v", n.Name, got)
		}
	}
	if running, _, _ := statuses(t, g); running != 3 {
		t.Errorf("running = %d, want 3", running)
	}
	if err := g.IncreaseSize(ctx, 3); err == nil {
		t.Error("increase beyond max 5 accepted")
	}

	victim := nodes[0]
	if err := g.DeleteNodes(ctx, []*apiv1.Node{&victim}); err != nil {
		t.Fatal(err)
	}
	left := groupNodes(e, name)
	if len(left) != 2 {
		t.Fatalf("%d nodes left, want 2", len(left))
	}
	for _, n := range left {
		if n.Name == victim.Name {
			t.Errorf("deleted node %s still exists", victim.Name)
		}
	}
	if err := g.DeleteNodes(ctx, []*apiv1.Node{&left[0], &left[1]}); err == nil || !strings.Contains(err.Error(), "minimum") {
		t.Errorf("delete below min: %v", err)
	}
	if n := len(groupNodes(e, name)); n != 2 {
		t.Errorf("a refused delete removed nodes: %d left", n)
	}
	stranger := framework.MakeNode(framework.UniqueName("stranger")).Obj()
	if err := g.DeleteNodes(ctx, []*apiv1.Node{stranger}); err == nil {
		t.Error("deleting a node of no group accepted")
	}
	if err := g.ForceDeleteNodes(ctx, []*apiv1.Node{&left[0], &left[1]}); err != nil {
		t.Errorf("force delete: %v", err)
	}
	e.Eventually(10*time.Second, "group empty", func(context.Context) (bool, error) {
		size, _ := g.TargetSize(ctx)
		return size == 0 && len(groupNodes(e, name)) == 0, nil
	})
}

// TestKwokProviderFaults: the out-of-capacity limit, instances that never
// register, and DecreaseTargetSize cancelling only unregistered instances.
func TestKwokProviderFaults(t *testing.T) {
	e := framework.New(t)
	ctx := e.Context()

	stock := framework.UniqueName("stock")
	p, _ := startKwok(e, kwokConfig(e, stock, "outOfCapacityAfter: 2", 0, 10))
	g := group(t, p)
	if err := g.AtomicIncreaseSize(ctx, 3); err == nil {
		t.Error("atomic increase beyond capacity accepted")
	}
	if size, _ := g.TargetSize(ctx); size != 0 {
		t.Errorf("a refused atomic increase left %d instances", size)
	}
	if err := g.IncreaseSize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	e.Eventually(20*time.Second, "2 registered, 1 out of resources", func(context.Context) (bool, error) {
		running, creating, errs := statuses(t, g)
		return running == 2 && creating == 0 && len(errs) == 1 && errs[0] == "OutOfResource/"+kwok.ErrorCodeStockout, nil
	})

	ghost := framework.UniqueName("ghost")
	p2, _ := startKwok(e, kwokConfig(e, ghost, "neverRegisterRate: 1", 0, 10))
	g2 := group(t, p2)
	if err := g2.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the registration would have happened by now
	if running, creating, _ := statuses(t, g2); running != 0 || creating != 2 {
		t.Errorf("never-registering instances: running %d creating %d, want 0 and 2", running, creating)
	}
	if n := len(groupNodes(e, ghost)); n != 0 {
		t.Errorf("%d nodes of never-registering instances", n)
	}
	if err := g2.DecreaseTargetSize(ctx, -2); err != nil {
		t.Fatal(err)
	}
	if size, _ := g2.TargetSize(ctx); size != 0 {
		t.Errorf("target after cancelling = %d", size)
	}
	// DecreaseTargetSize never deletes a registered instance.
	if err := g.DecreaseTargetSize(ctx, -3); err == nil {
		t.Error("decrease reaching registered instances accepted")
	}
	if running, _, _ := statuses(t, g); running != 2 {
		t.Errorf("registered instances after a refused decrease: %d", running)
	}
}

// TestKwokProviderStateSurvivesRestart: a provider stopped before its
// instances registered is replaced by a new one, which finds the instances
// (from the state ConfigMap and the Nodes) and registers the pending ones.
func TestKwokProviderStateSurvivesRestart(t *testing.T) {
	e := framework.New(t)
	ctx := e.Context()
	name := framework.UniqueName("ng")
	cfg := kwokConfig(e, name, "registrationDelay: 3s", 0, 10)

	first, stop := startKwok(e, cfg)
	g := group(t, first)
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	stop()
	first.Stop()
	if err := first.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}

	second, _ := startKwok(e, cfg)
	g2 := group(t, second)
	if size, _ := g2.TargetSize(ctx); size != 2 {
		t.Fatalf("target after restart = %d, want 2", size)
	}
	e.Eventually(30*time.Second, "pending instances register after the restart", func(context.Context) (bool, error) {
		return len(groupNodes(e, name)) == 2, nil
	})
	e.Eventually(5*time.Second, "both running", func(context.Context) (bool, error) {
		running, _, _ := statuses(t, g2)
		return running == 2, nil
	})

	third, _ := startKwok(e, cfg)
	if size, _ := group(t, third).TargetSize(ctx); size != 2 {
		t.Errorf("target from registered nodes after a second restart = %d, want 2", size)
	}
}
