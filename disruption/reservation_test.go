package disruption

import (
	"strings"
	"testing"
	"time"
)

// TestReservationExtendedStopsTheDrain: a node of reserved capacity that
// ends is drained without replacement; when the source stops proposing it
// (the reservation was extended past the drain window) while pods are still
// on it, the drain stops and the node is given back, nothing deleted. A
// source that does not answer in a loop changes nothing, and a node that is
// not Ready is drained on (its source leaves it out for that reason).
func TestReservationExtendedStopsTheDrain(t *testing.T) {
	f := newFixture(t, Options{}, readyNode("blk", nil), readyNode("nr", nil), readyNode("other", nil))
	src := &fakeSource{reason: ReservationEnding, cands: []Candidate{{Nodes: []string{"blk"}}, {Nodes: []string{"nr"}}}}
	f.healer.AddSource(src)
	f.addPod(t, podOn("blk", "train-0"))
	f.addPod(t, podOn("nr", "train-1"))
	f.loop(0)
	f.loop(time.Minute)
	if f.phase("blk") != PhaseDraining || f.phase("nr") != PhaseDraining {
		t.Fatalf("phases %q, %q: want both Draining", f.phase("blk"), f.phase("nr"))
	}
	// "nr" stops answering: its source leaves it out, as it does "blk"
	// whose reservation was extended.
	f.setNode(1, readyNode("nr", nil, notReady(time.Minute)))
	src.cands = nil
	f.loop(2 * time.Minute)
	if p := f.phase("blk"); p != "" && p != PhaseRestoring {
		t.Fatalf("phase %q: the drain of an extended reservation's node went on", p)
	}
	for i := 0; i < 3 && f.phase("blk") != ""; i++ {
		f.loop(time.Duration(3+i) * time.Minute)
	}
	if p := f.phase("blk"); p != "" {
		t.Fatalf("phase %q: the plan did not end", p)
	}
	if n := f.node(t, "blk"); n.Spec.Unschedulable || hasTaintKey(n, Taint) || n.Annotations[scaleDownDisabled] != "" {
		t.Errorf("node not given back: unschedulable %v, taints %v, annotations %v", n.Spec.Unschedulable, n.Spec.Taints, n.Annotations)
	}
	if f.phase("nr") != PhaseDraining {
		t.Errorf("the not Ready node's drain: phase %q, want Draining still", f.phase("nr"))
	}
	for _, d := range f.deleted() {
		if strings.Contains(d, "blk") {
			t.Errorf("deleted %v", f.deleted())
		}
	}
	if got := f.decisions(ReservationEnding, ActionCancelled); got != 1 {
		t.Errorf("cancelled decisions %v, want 1", got)
	}
	if ev := f.drainEvents(); !strings.Contains(ev, "ReservationExtended") {
		t.Errorf("events %q, want one saying ReservationExtended", ev)
	}
}

// TestReservationEndingDrainsOnWithoutAnAnswer: a loop in which the source
// gave no answer (an Offer-style source that did not offer) does not stop
// the drain.
func TestReservationEndingDrainsOnWithoutAnAnswer(t *testing.T) {
	f := newFixture(t, Options{}, readyNode("blk", nil), readyNode("other", nil))
	f.healer.Offer(ReservationEnding, []Candidate{{Nodes: []string{"blk"}}})
	f.addPod(t, podOn("blk", "train-0"))
	f.loop(0)
	f.loop(time.Minute)
	if f.phase("blk") != PhaseDraining {
		t.Fatalf("phase %q, want Draining", f.phase("blk"))
	}
	f.loop(2 * time.Minute)
	if f.phase("blk") != PhaseDraining {
		t.Errorf("phase %q: a loop without the source's answer stopped the drain", f.phase("blk"))
	}
}
