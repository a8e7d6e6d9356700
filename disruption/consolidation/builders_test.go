package consolidation

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/drain"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// groupLabel names a test node's group; the fake prices read it.
const groupLabel = "test/group"

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// testGroup is a node group of a test cluster: its shape and price (a
// negative price: none).
type testGroup struct {
	id       string
	cpu      string
	price    float64
	min, max int
	reserved bool
}

// cluster is a test cluster, built into a real framework snapshot by input.
type cluster struct {
	groups []testGroup
	nodes  []*apiv1.Node
	pods   []*apiv1.Pod
	pdbs   []*policyv1.PodDisruptionBudget
	// unpriced leaves the pricing model out.
	unpriced bool
	// extra are pods the snapshot holds that were not observed (bookings).
	extra []*apiv1.Pod
	// held names nodes Input.Protected protects (a ProvisioningRequest's).
	held map[string]string
}

// node adds a node of group g (old enough to settle) and returns its builder.
func (c *cluster) node(name, g string) *testbuild.NodeBuilder {
	cpu := ""
	for _, tg := range c.groups {
		if tg.id == g {
			cpu = tg.cpu
		}
	}
	b := testbuild.Node(name).Resources(cpu, "64Gi", "110").Label(groupLabel, g)
	b.Obj().CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	c.nodes = append(c.nodes, b.Obj())
	return b
}

// pod adds a pod of ReplicaSet rs with cpu on node and returns its builder.
func (c *cluster) pod(name, rs, cpu, node string) *testbuild.PodBuilder {
	b := testbuild.Pod(name).Req(cpu, "1Gi").ReplicaSet(rs).Label("app", rs).On(node)
	c.pods = append(c.pods, b.Obj())
	return b
}

// fill adds n pods of 1 cpu of ReplicaSet rs on node.
func (c *cluster) fill(node, rs string, n int) {
	for i := 0; i < n; i++ {
		c.pod(fmt.Sprintf("%s-%s-%d", rs, node, i), rs, "1", node)
	}
}

// pdb adds a PodDisruptionBudget over the pods labelled app=app allowing
// allowed disruptions.
func (c *cluster) pdb(app string, allowed int32) {
	c.pdbs = append(c.pdbs, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: app},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &intstr.IntOrString{IntVal: 1},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	})
}

// prices is a PricingModel over the test groups' prices per hour.
type prices map[string]float64

func (p prices) NodePrice(_ context.Context, n *apiv1.Node, start, end time.Time) (float64, error) {
	v, ok := p[n.Labels[groupLabel]]
	if !ok {
		return 0, fmt.Errorf("node %s has no price", n.Name)
	}
	return v * end.Sub(start).Hours(), nil
}

func (p prices) PodPrice(context.Context, *apiv1.Pod, time.Time, time.Time) (float64, error) {
	return 0, nil
}

// newHandle builds the scheduler framework over an empty snapshot.
func newHandle(t testing.TB) *framework.Handle {
	t.Helper()
	ctx := context.Background()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	h, err := framework.New(ctx, framework.NewSnapshot(nil, nil), factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return h
}

// input loads c into h's snapshot and returns the plan's input.
func (c *cluster) input(h *framework.Handle) Input {
	h.Snapshot().Reset(c.nodes, append(append([]*apiv1.Pod(nil), c.pods...), c.extra...))
	in := Input{Now: now, Sim: h, Nodes: c.nodes, Pods: c.pods,
		Rules: drain.NewRules(drain.Options{}, drain.Listers{}), PDBs: drain.PDBsFromList(c.pdbs)}
	if c.held != nil {
		in.Protected = func(node string) (bool, string) {
			why, ok := c.held[node]
			return ok, why
		}
	}
	pr := prices{}
	for _, tg := range c.groups {
		g := Group{ID: tg.id, Min: tg.min, Max: tg.max, Reserved: tg.reserved}
		if g.Max == 0 {
			g.Max = 1000
		}
		for _, n := range c.nodes {
			if n.Labels[groupLabel] == tg.id {
				g.Nodes = append(g.Nodes, n.Name)
			}
		}
		g.Size = len(g.Nodes)
		tmpl := testbuild.Node("template-"+tg.id).Resources(tg.cpu, "64Gi", "110").Label(groupLabel, tg.id).Obj()
		g.Template = &cloudprovider.NodeInfo{Node: tmpl}
		in.Groups = append(in.Groups, g)
		if tg.price >= 0 {
			pr[tg.id] = tg.price
		}
	}
	if !c.unpriced {
		in.Pricing = pr
	}
	return in
}

// podsByNode lists the snapshot's pod names per node.
func podsByNode(t testing.TB, snap *framework.Snapshot) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, n := range snap.NodeNames() {
		pods, err := snap.Pods(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			out[n] = append(out[n], p.Name)
		}
		sort.Strings(out[n])
	}
	return out
}
