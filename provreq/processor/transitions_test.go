package processor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// recordedMetrics keeps what the processor reported.
type recordedMetrics struct {
	transitions []string
	booked      int
}

func (m *recordedMetrics) Transition(class, condition, status, reason string, _ time.Duration) {
	m.transitions = append(m.transitions, fmt.Sprintf("%s=%s/%s", condition, status, reason))
}
func (m *recordedMetrics) Requests(map[[2]string]int) {}
func (m *recordedMetrics) BookedPods(n int)           { m.booked = n }

// transitionWorld runs loops with an event recorder, recorded metrics and a
// V(2) logger, and returns what each loop reported.
type transitionWorld struct {
	c       *cluster
	p       *Processor
	events  *record.FakeRecorder
	metrics *recordedMetrics
	logs    *strings.Builder
}

func newTransitionWorld(c *cluster) *transitionWorld {
	w := &transitionWorld{c: c, events: record.NewFakeRecorder(100), metrics: &recordedMetrics{}, logs: &strings.Builder{}}
	w.p = New(testOptions(), c, c, c, c.rollback, WithEventRecorder(w.events), WithMetrics(w.metrics))
	return w
}

// loop runs one loop and returns the events, transitions and log lines it made.
func (w *transitionWorld) loop(now time.Time) (events, transitions, logs []string) {
	logger := funcr.New(func(prefix, args string) { w.logs.WriteString(args + "\n") }, funcr.Options{Verbosity: 2})
	ctx := klog.NewContext(context.Background(), logger)
	w.metrics.transitions, w.logs = nil, &strings.Builder{}
	l := w.p.Begin(ctx, Input{Now: now})
	l.Run(ctx, w.c, nil, w.c)
	l.Finish(ctx)
	for {
		select {
		case e := <-w.events.Events:
			events = append(events, e)
			continue
		default:
		}
		break
	}
	for _, line := range strings.Split(w.logs.String(), "\n") {
		if strings.Contains(line, "ProvisioningRequest transition") {
			logs = append(logs, line)
		}
	}
	return events, w.metrics.transitions, logs
}

// Every change of a condition, a change of status or reason of one that
// exists included, is an event, a V(2) log line and a transition metric;
// a loop that changes nothing reports nothing.
func TestEveryTransitionIsReported(t *testing.T) {
	c := &cluster{fits: false}
	pr := c.addRequest("a", provreq.ClassCheckCapacity, 2, nil, t0)
	w := newTransitionWorld(c)
	check := func(step string, now time.Time, want ...string) {
		t.Helper()
		events, transitions, logs := w.loop(now)
		if fmt.Sprint(transitions) != fmt.Sprint(want) {
			t.Errorf("%s: transitions %v, want %v", step, transitions, want)
		}
		if len(events) != len(want) || len(logs) != len(want) {
			t.Errorf("%s: %d events %v and %d log lines for %d transitions", step, len(events), events, len(logs), len(want))
		}
		for i, tr := range want {
			// The event's reason is the condition type and its reason.
			reason := strings.SplitN(tr, "=", 2)[0] + strings.SplitN(tr, "/", 2)[1]
			if i < len(events) && !strings.Contains(events[i], reason) {
				t.Errorf("%s: event %q does not carry reason %s", step, events[i], reason)
			}
		}
	}
	check("first loop", t0.Add(time.Second), "Accepted=True/Accepted", "Provisioned=False/CapacityIsNotFound")
	check("a check within the back-off", t0.Add(30*time.Second))
	c.fits = true
	check("the capacity appears", t0.Add(2*time.Minute), "Provisioned=True/CapacityIsFound")
	check("booked", t0.Add(3*time.Minute))
	check("booking over", t0.Add(13*time.Minute), "BookingExpired=True/CapacityReservationTimeExpired")
	wantCond(t, pr, provreq.ConditionProvisioned, "True", provreq.ReasonCapacityIsFound)

	// An atomic request: in progress, then provisioned when its nodes register.
	c = &cluster{fits: false, atomic: scaleup.AtomicResult{Fit: true, Increases: []scaleup.Increase{{NodeGroup: "g", From: 0, To: 1}},
		Before: map[string][]string{"g": nil}}, groups: map[string]GroupView{"g": view(1)}}
	c.addRequest("b", provreq.ClassBestEffortAtomicScaleUp, 1, nil, t0)
	w = newTransitionWorld(c)
	check("atomic scale-up", t0.Add(time.Second), "Accepted=True/Accepted", "Provisioned=False/ProvisioningInProgress")
	c.groups["g"] = view(1, "i-1")
	c.groups["g"].Instances[0].Node = &apiv1.Node{}
	check("atomic nodes registered", t0.Add(20*time.Second), "Provisioned=True/CapacityIsProvisioned")
}

// The booked-pods gauge counts the pods of every request provisioned at the
// end of a loop, those provisioned in it included, and drops what is no
// longer booked.
func TestBookedPodsGauge(t *testing.T) {
	c := &cluster{fits: true}
	c.addRequest("a", provreq.ClassCheckCapacity, 3, nil, t0)
	w := newTransitionWorld(c)
	w.loop(t0.Add(2 * time.Minute))
	if w.metrics.booked != 3 {
		t.Errorf("booked %d pods in the loop a was provisioned, want 3", w.metrics.booked)
	}
	c.addRequest("b", provreq.ClassCheckCapacity, 2, nil, t0.Add(4*time.Minute))
	w.loop(t0.Add(5 * time.Minute))
	if w.metrics.booked != 5 {
		t.Errorf("booked %d pods in the loop b was provisioned, want 5", w.metrics.booked)
	}
	// a's booking time (10m after it was provisioned at +2m) ends first.
	w.loop(t0.Add(12*time.Minute + 30*time.Second))
	if w.metrics.booked != 2 {
		t.Errorf("booked %d pods after a's booking expired, want 2", w.metrics.booked)
	}
	w.loop(t0.Add(20 * time.Minute))
	if w.metrics.booked != 0 {
		t.Errorf("booked %d pods after every booking expired, want 0", w.metrics.booked)
	}
}
