package capacitybuffers

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// readyWriter records the readyReplicas applies, by buffer, and keeps them
// in the buffers' status as the API server would.
type readyWriter struct {
	f   *fakes
	got map[string]int32
}

func (w *readyWriter) ApplyStatus(_ context.Context, namespace, name string, st v1.CapacityBufferStatus) error {
	if st.ReadyReplicas == nil || len(st.Conditions) > 0 || st.Replicas != nil {
		panic("the readyReplicas writer applies readyReplicas only")
	}
	w.got[namespace+"/"+name] = *st.ReadyReplicas
	for _, b := range w.f.buffers {
		if b.Namespace == namespace && b.Name == name {
			b.Status.ReadyReplicas = ptr.To(*st.ReadyReplicas)
		}
	}
	return nil
}

// translated marks b as translated by the controller for the active-capacity strategy.
func translated(b *v1.CapacityBuffer) *v1.CapacityBuffer {
	b.Status.ProvisioningStrategy = ptr.To(capacitybuffer.StrategyActiveCapacity)
	return b
}

// TestReadyReplicasArePodsOnExistingNodes: of a buffer's five 2-CPU pods,
// two fit the empty 4-CPU node n1, two the upcoming node and one makes the
// group grow: readyReplicas is 2. A buffer translated but not ready gets 0,
// one the controller has not translated is left alone, and the
// Provisioning condition's applies never carry the field.
func TestReadyReplicasArePodsOnExistingNodes(t *testing.T) {
	f := newFakes()
	f.template("shape", "2")
	translated(f.buffer("spare", "shape", 5, ""))
	stale := translated(f.buffer("stale", "", 0, capacitybuffer.ReasonPodTemplateNotFound))
	stale.Status.ReadyReplicas = ptr.To[int32](3)
	f.buffer("fresh", "shape", 1, "") // no status.provisioningStrategy yet
	w := &readyWriter{f: f, got: map[string]int32{}}
	in := New(f, f, f, WithReadyReplicas(w))

	s, _ := sessionOfTarget(t, 2)
	loop := &processors.Loop{Now: now, Nodes: []*apiv1.Node{fourCPUNode("n1")}}
	pending := in.ProcessPods(context.Background(), loop, nil)
	res := s.ScaleUp(context.Background(), pending)
	// Spare's five pods, then fresh's one (it is ready, only its
	// readyReplicas is not written): two on n1, two on the upcoming node,
	// two on a node added for them.
	if res.FitExisting != 4 || len(res.Increases) != 1 {
		t.Fatalf("fit %d, increases %+v; want four pods placed (n1 and the upcoming node), one scale-up", res.FitExisting, res.Increases)
	}
	in.ScaleUpDone(context.Background(), loop, processors.ScaleUpStatus{Pods: pending, Result: res, Session: s})
	if diff := cmp.Diff(map[string]int32{"ns/spare": 2, "ns/stale": 0}, w.got); diff != "" {
		t.Errorf("readyReplicas written (-want +got):\n%s", diff)
	}
	for name, st := range f.applied {
		if st.ReadyReplicas != nil {
			t.Errorf("%s: the Provisioning condition's apply carries readyReplicas %d", name, *st.ReadyReplicas)
		}
	}

	// The next loop finds the same: nothing is written again.
	clear(w.got)
	s, _ = sessionOfTarget(t, 2)
	pending = in.ProcessPods(context.Background(), loop, nil)
	res = s.ScaleUp(context.Background(), pending)
	in.ScaleUpDone(context.Background(), loop, processors.ScaleUpStatus{Pods: pending, Result: res, Session: s})
	if len(w.got) != 0 {
		t.Errorf("unchanged readyReplicas written again: %v", w.got)
	}

	// A loop without a scale-up session (nothing pending) has no pod
	// placed: every counted buffer is at 0.
	in.ProcessPods(context.Background(), loop, nil)
	in.ScaleUpDone(context.Background(), loop, processors.ScaleUpStatus{})
	if diff := cmp.Diff(map[string]int32{"ns/spare": 0}, w.got); diff != "" {
		t.Errorf("readyReplicas written without a session (-want +got):\n%s", diff)
	}
}

// TestReadyReplicasOffWritesNothing: without WithReadyReplicas
// (--capacity-buffer-ready-replicas-enabled=false) the field is never
// written, by any apply.
func TestReadyReplicasOffWritesNothing(t *testing.T) {
	f := newFakes()
	f.template("shape", "2")
	translated(f.buffer("spare", "shape", 1, ""))
	in := New(f, f, f)
	s, _ := session(t)
	loop := &processors.Loop{Now: now, Nodes: []*apiv1.Node{fourCPUNode("n1")}}
	pending := in.ProcessPods(context.Background(), loop, nil)
	res := s.ScaleUp(context.Background(), pending)
	in.ScaleUpDone(context.Background(), loop, processors.ScaleUpStatus{Pods: pending, Result: res, Session: s})
	if res.FitExisting != 1 || len(f.applied) != 1 {
		t.Fatalf("fit %d, applies %v; want the pod on n1 and the Provisioning condition written", res.FitExisting, f.applied)
	}
	if st := f.applied["ns/spare"]; st.ReadyReplicas != nil {
		t.Errorf("readyReplicas %d written with the flag off", *st.ReadyReplicas)
	}
}

func TestReadyReplicasCountsOwnedPodsOnTheNodesGiven(t *testing.T) {
	a := &v1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "a"}}
	b := &v1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "b"}}
	pod := func(uid string) *apiv1.Pod { return &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}} }
	owner := map[types.UID]*v1.CapacityBuffer{"a-1": a, "a-2": a, "a-3": a, "b-1": b}
	on := map[string][]*apiv1.Pod{
		"n1":       {pod("a-1"), pod("real"), pod("b-1")},
		"n2":       {pod("a-2")},
		"upcoming": {pod("a-3")},
	}
	nodes := []*apiv1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}}
	got := ReadyReplicas(owner, nodes, func(n string) []*apiv1.Pod { return on[n] })
	if diff := cmp.Diff(map[types.UID]int32{"a": 2, "b": 1}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := ReadyReplicas(owner, nodes, nil); len(got) != 0 {
		t.Errorf("without a session: %v", got)
	}
}
