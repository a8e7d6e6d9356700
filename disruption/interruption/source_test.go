package interruption

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// notices is an InterruptionSource holding notices until acked.
type notices struct {
	mu      sync.Mutex
	pending []cloudprovider.InterruptionNotice
	dropped []cloudprovider.DroppedNotice
	acked   []string
	err     error
}

func (n *notices) PollInterruptions(context.Context) ([]cloudprovider.InterruptionNotice, []cloudprovider.DroppedNotice, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := n.dropped
	n.dropped = nil
	return append([]cloudprovider.InterruptionNotice(nil), n.pending...), d, n.err
}

func (n *notices) AckInterruptions(_ context.Context, ids []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.acked = append(n.acked, ids...)
	keep := n.pending[:0]
	for _, p := range n.pending {
		if !contains(ids, p.ID) {
			keep = append(keep, p)
		}
	}
	n.pending = keep
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func node(name string) *apiv1.Node {
	return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apiv1.NodeSpec{ProviderID: "fake://" + name}}
}

func notice(id, instance, group string, kind cloudprovider.InterruptionKind, deadline time.Time) cloudprovider.InterruptionNotice {
	return cloudprovider.InterruptionNotice{ID: id, Kind: kind, Instance: instance, Group: group, Deadline: deadline,
		InstanceType: "m5.large", Zone: "zone-a", Detail: "test"}
}

type world struct {
	provider *fake.Provider
	loop     *processors.Loop
	src      *notices
	source   *Source
	reg      *prometheus.Registry
	inFlight map[string]disruption.Reason
}

func newWorld(t *testing.T) *world {
	t.Helper()
	p := fake.NewProvider()
	p.AddNodeGroup("spot", 0, 10, 3, nil)
	p.AddNodeGroup("od", 0, 10, 1, nil)
	n1, n2, n3, other := node("n1"), node("n2"), node("n3"), node("unmanaged")
	p.AddNode("spot", n1)
	p.AddNode("spot", n2)
	p.AddNode("od", n3)
	groups, _ := p.NodeGroups(context.Background())
	w := &world{provider: p, src: &notices{}, reg: prometheus.NewRegistry(), inFlight: map[string]disruption.Reason{},
		loop: &processors.Loop{Now: time.Now(), NodeGroups: groups, Nodes: []*apiv1.Node{n1, n2, n3, other}}}
	w.source = New(w.src, p, w.reg, WithInFlight(func() map[string]disruption.Reason { return w.inFlight }))
	return w
}

func (w *world) count(kind, action string) float64 {
	var m dto.Metric
	if err := w.source.notices.WithLabelValues(kind, action).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func TestProposeMatchesAndOrders(t *testing.T) {
	w := newWorld(t)
	soon := time.Now().Add(2 * time.Minute)
	w.src.pending = []cloudprovider.InterruptionNotice{
		notice("m1/fake://n2", "fake://n2", "spot", cloudprovider.Rebalance, time.Time{}),
		notice("m2/fake://n1", "fake://n1", "spot", cloudprovider.SpotInterruption, soon),
		notice("m3/fake://n1", "fake://n1", "spot", cloudprovider.StateChange, time.Time{}), // same node: one candidate
		notice("m4/fake://n3", "fake://n3", "od", cloudprovider.ScheduledChange, soon.Add(time.Hour)),
	}
	if !w.source.Poll(context.Background()) {
		t.Fatalf("the first poll saw no new notice")
	}
	if w.source.Poll(context.Background()) {
		t.Errorf("a second poll of the same notices reported new ones")
	}
	got := w.source.Propose(context.Background(), w.loop)
	var nodes []string
	for _, c := range got {
		nodes = append(nodes, c.Nodes...)
		if c.Reason != disruption.Interrupted || len(c.Replacement) != 1 || c.Replacement[0].Count != 1 {
			t.Errorf("candidate %+v: want reason interrupted and one replacement", c)
		}
	}
	if diff := cmp.Diff([]string{"n1", "n3", "n2"}, nodes); diff != "" {
		t.Errorf("candidates' nodes, earliest deadline first (-want +got):\n%s", diff)
	}
	if got[0].Replacement[0].Group != "spot" || got[1].Replacement[0].Group != "od" {
		t.Errorf("replacements %+v %+v: each in its own group", got[0].Replacement, got[1].Replacement)
	}
	if !strings.Contains(got[0].Message, "spot_interruption") || !strings.Contains(got[0].Message, "m5.large in zone-a") {
		t.Errorf("message %q names neither the kind nor the capacity", got[0].Message)
	}
	if w.count("spot_interruption", ActionReceived) != 1 || w.count("rebalance", ActionReceived) != 1 {
		t.Errorf("received counts: spot %v rebalance %v, want 1 and 1", w.count("spot_interruption", ActionReceived), w.count("rebalance", ActionReceived))
	}
	if len(w.src.acked) != 0 {
		t.Errorf("acked %v before anything was acted on", w.src.acked)
	}
}

func TestAckOnceActedOnOrGone(t *testing.T) {
	w := newWorld(t)
	w.src.pending = []cloudprovider.InterruptionNotice{
		notice("m1/fake://n1", "fake://n1", "spot", cloudprovider.SpotInterruption, time.Now()),
		notice("m2/fake://n2", "fake://n2", "spot", cloudprovider.SpotInterruption, time.Now()),
		notice("m3/fake://gone", "fake://gone", "spot", cloudprovider.StateChange, time.Time{}),
	}
	w.source.Poll(context.Background())
	// n1 is being disrupted for this reason, n2 for another: only n1's
	// notice is acted on; the instance without a Node is gone.
	w.inFlight["n1"] = disruption.Interrupted
	w.inFlight["n2"] = disruption.Consolidatable
	// The engine asks Propose holding the lock its InFlight takes: Propose
	// must not call it.
	proposing := true
	w.source.SetInFlight(func() map[string]disruption.Reason {
		if proposing {
			t.Errorf("InFlight called from Propose: the engine would deadlock")
		}
		return w.inFlight
	})
	got := w.source.Propose(context.Background(), w.loop)
	proposing = false
	if len(got) != 2 {
		t.Errorf("%d candidates, want n1's (kept while in flight) and n2's", len(got))
	}
	w.source.Poll(context.Background()) // sends the acks
	sort.Strings(w.src.acked)
	if diff := cmp.Diff([]string{"m1/fake://n1", "m3/fake://gone"}, w.src.acked); diff != "" {
		t.Errorf("acked (-want +got):\n%s", diff)
	}
	if w.count("spot_interruption", ActionDisrupted) != 1 || w.count("state_change", ActionGone) != 1 {
		t.Errorf("disrupted %v gone %v, want 1 and 1", w.count("spot_interruption", ActionDisrupted), w.count("state_change", ActionGone))
	}
	// What was acknowledged is forgotten: the set of notices counted as
	// received holds only those still pending.
	if diff := cmp.Diff(map[string]bool{"m2/fake://n2": true}, w.source.seen); diff != "" {
		t.Errorf("notices remembered as received (-want +got):\n%s", diff)
	}
	// Only n2's notice is left.
	got = w.source.Propose(context.Background(), w.loop)
	if len(got) != 1 || got[0].Nodes[0] != "n2" {
		t.Errorf("after the acks: %+v, want n2's candidate only", got)
	}
}

func TestDroppedCountedAndErrorsSurvived(t *testing.T) {
	w := newWorld(t)
	w.src.dropped = []cloudprovider.DroppedNotice{{Kind: "spot_interruption", Action: "foreign"}, {Kind: "unknown", Action: "malformed"}}
	w.src.err = errors.New("queue unreachable")
	if w.source.Poll(context.Background()) {
		t.Errorf("a poll with no notice reported a new one")
	}
	if w.count("spot_interruption", "foreign") != 1 || w.count("unknown", "malformed") != 1 {
		t.Errorf("dropped not counted")
	}
	if got := w.source.Propose(context.Background(), w.loop); got != nil {
		t.Errorf("candidates %+v with no notice", got)
	}
	// A notice for a Node of no managed group (its instance listed by no
	// group): no Node is the instance as listed, so it is gone, not
	// proposed.
	w.src.err = nil
	w.src.pending = []cloudprovider.InterruptionNotice{notice("m9/fake://unmanaged", "fake://unmanaged", "spot", cloudprovider.SpotInterruption, time.Time{})}
	w.source.Poll(context.Background())
	if got := w.source.Propose(context.Background(), w.loop); len(got) != 0 {
		t.Errorf("a Node of no managed group proposed: %+v", got)
	}
	if mfs, err := w.reg.Gather(); err != nil || len(mfs) != 1 || mfs[0].GetName() != "cluster_autoscaler_interruption_notices_total" {
		t.Errorf("registered metrics %v (%v)", mfs, err)
	}
}

func TestRunTriggersOnNewNotices(t *testing.T) {
	w := newWorld(t)
	w.source = New(w.src, w.provider, nil, WithPollInterval(10*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	triggered := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() { w.source.Run(ctx, func() { triggered <- struct{}{} }); close(done) }()
	time.Sleep(50 * time.Millisecond)
	if len(triggered) != 0 {
		t.Fatalf("triggered without a notice")
	}
	w.src.mu.Lock()
	w.src.pending = []cloudprovider.InterruptionNotice{notice("m1/fake://n1", "fake://n1", "spot", cloudprovider.SpotInterruption, time.Time{})}
	w.src.mu.Unlock()
	select {
	case <-triggered:
	case <-time.After(5 * time.Second):
		t.Fatalf("no trigger after a new notice")
	}
	time.Sleep(50 * time.Millisecond)
	if len(triggered) != 0 {
		t.Errorf("triggered again for the same notice")
	}
	cancel()
	<-done
}
