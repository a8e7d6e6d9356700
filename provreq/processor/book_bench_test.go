package processor

import (
	"context"
	"fmt"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/estimator"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// bookingWorld is a provisioned request of pods pods (1 CPU, 1 Gi, one
// PodSet) and the registered node group of nodes nodes of 10 CPU its
// scale-up made, with a real scale-up session to book on.
type bookingWorld struct {
	c        *cluster
	p        *Processor
	o        *scaleup.Orchestrator
	provider *fakeprovider.Provider
	state    *clusterstate.Registry
	nodes    []*apiv1.Node
	now      time.Time
}

func newBookingWorld(tb testing.TB, class string, pods, nodes int) *bookingWorld {
	tb.Helper()
	ctx := context.Background()
	w := &bookingWorld{c: &cluster{}, now: t0.Add(time.Minute)}
	pr := w.c.addRequest("big", class, int32(pods), nil, t0)
	tmpl := w.c.templates["ns/ppt-big"]
	tmpl.Template.Labels = map[string]string{"app": "big"}
	tmpl.Template.Spec.NodeSelector = map[string]string{"pool": "booked"}
	tmpl.Template.Spec.Containers[0].Resources.Requests[apiv1.ResourceMemory] = resource.MustParse("1Gi")
	pr.Status.Conditions = []metav1.Condition{
		{Type: provreq.ConditionAccepted, Status: metav1.ConditionTrue, Reason: provreq.ReasonAccepted,
			LastTransitionTime: metav1.NewTime(t0)},
		{Type: provreq.ConditionProvisioned, Status: metav1.ConditionTrue, Reason: provreq.ReasonCapacityIsProvisioned,
			LastTransitionTime: metav1.NewTime(t0)},
	}
	w.p = newTestProcessor(w.c, nil)

	rl := apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("10"), apiv1.ResourceMemory: resource.MustParse("64Gi"),
		apiv1.ResourcePods: resource.MustParse("110")}
	node := func(name string) *apiv1.Node {
		return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			Labels: map[string]string{"pool": "booked", "kubernetes.io/hostname": name}},
			Status: apiv1.NodeStatus{Capacity: rl, Allocatable: rl,
				Conditions: []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}}}
	}
	w.provider = fakeprovider.NewProvider()
	w.provider.AddNodeGroup("booked", 0, 2*nodes, nodes, node("template"))
	for i := range nodes {
		n := node(fmt.Sprintf("booked-%d", i))
		w.nodes = append(w.nodes, n)
		w.provider.AddNode("booked", n)
	}
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	sim, err := framework.New(ctx, framework.NewSnapshot(nil, nil), factory)
	if err != nil {
		tb.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	opts := config.Defaults()
	chain, err := expander.NewChain(ctx, opts.Expanders, expander.Deps{Random: func(int) int { return 0 }})
	if err != nil {
		tb.Fatal(err)
	}
	w.state = clusterstate.NewRegistry(clusterstate.DefaultOptions())
	w.o = scaleup.New(w.provider, sim, estimator.New(sim), chain, scaleup.DefaultOptions(), w.state)
	if err := w.state.Update(ctx, w.provider, w.nodes, w.now); err != nil {
		tb.Fatal(err)
	}
	return w
}

// session starts a loop's scale-up session, as the loop does before the
// processor runs.
func (w *bookingWorld) session(tb testing.TB) *scaleup.Session {
	tb.Helper()
	return w.o.Begin(context.Background(), scaleup.Input{Now: w.now, Nodes: w.nodes})
}

// loop is the processor's part of one loop: Begin (the requests' pods are
// built), Run (the booking is placed) and Finish.
func (w *bookingWorld) loop(s *scaleup.Session) {
	ctx := context.Background()
	l := w.p.Begin(ctx, Input{Now: w.now})
	l.Run(ctx, s, w.nodes, w.c)
	l.Finish(ctx)
}

// BenchmarkBook: the processor's part of a loop while an all-or-nothing
// request of 40,000 pods (1 CPU, 1 Gi) is provisioned on the 4,000 nodes of
// 10 CPU it asked for and none of its pods is scheduled yet: the pods are
// built (in the first loop, before the timer; later loops reuse them) and
// the booking placed on a real scale-up session. The session (snapshot
// load) is made outside the timer.
//
//	go test -run xxx -bench BenchmarkBook -benchtime 3x -benchmem ./provreq/processor
func BenchmarkBook(b *testing.B) {
	for _, class := range []string{provreq.ClassBestEffortAtomicScaleUp, provreq.ClassCheckCapacity} {
		b.Run(class, func(b *testing.B) {
			w := newBookingWorld(b, class, 40000, 4000)
			w.loop(w.session(b)) // the first loop builds the pods, the next ones reuse them
			for b.Loop() {
				b.StopTimer()
				s := w.session(b)
				b.StartTimer()
				w.loop(s)
				b.StopTimer()
				if got := len(s.PodsOn("booked-0")); got != 10 {
					b.Fatalf("booked-0 holds %d pods, want 10", got)
				}
				b.StartTimer()
			}
		})
	}
}
