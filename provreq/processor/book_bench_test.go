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
	w.state = clusterstate.NewRegistry(opts)
	w.o = scaleup.New(w.provider, sim, estimator.New(sim), chain, opts, w.state)
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

// TestBookedPodsAreBuiltOnce: a provisioned request's pods are built in the
// first loop and reused by the next ones while neither the request nor its
// templates change; a changed template rebuilds them from it, and a request
// whose booking is over lets them go.
func TestBookedPodsAreBuiltOnce(t *testing.T) {
	c := &cluster{fits: true}
	pr := c.addRequest("a", provreq.ClassCheckCapacity, 3, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil) // provisioned: the capacity fits
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
	loop(p, c, t0.Add(time.Second), nil, nil)
	first := c.lastPlaced
	if len(first) != 1 || len(first[0]) != 3 {
		t.Fatalf("booked %v, want one PodSet of 3 pods", first)
	}
	loop(p, c, t0.Add(2*time.Second), nil, nil)
	if c.lastPlaced[0][0] != first[0][0] {
		t.Error("the pods were built again, with the request and its template unchanged")
	}
	// One consumer scheduled: the first 2 pods are booked, from the same set.
	loop(p, c, t0.Add(3*time.Second), []*apiv1.Pod{consumer("a", true)}, nil)
	if got := c.lastPlaced; len(got) != 1 || len(got[0]) != 2 || got[0][0] != first[0][0] {
		t.Errorf("booked %v with one consumer scheduled, want the first 2 pods of the set", got)
	}

	tmpl := c.templates["ns/ppt-a"]
	tmpl.ResourceVersion = "2"
	tmpl.Template.Spec.Containers[0].Resources.Requests[apiv1.ResourceCPU] = resource.MustParse("2")
	loop(p, c, t0.Add(4*time.Second), nil, nil)
	got := c.lastPlaced[0][0]
	if got == first[0][0] {
		t.Fatal("the pods were not rebuilt after their template changed")
	}
	if cpu := got.Spec.Containers[0].Resources.Requests.Cpu().String(); cpu != "2" {
		t.Errorf("rebuilt pod requests cpu %s, want 2 from the new template", cpu)
	}

	loop(p, c, t0.Add(11*time.Minute), nil, nil) // the booking time is over
	wantCond(t, pr, provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityReservationTimeExpired)
	loop(p, c, t0.Add(12*time.Minute), nil, nil)
	if st := p.states[pr.UID]; st == nil || st.built != nil {
		t.Errorf("state %+v: the pods of a request whose booking is over are still kept", st)
	}
}
