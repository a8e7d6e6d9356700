package disruption

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// hookLog records the hook calls ("heal_start", "heal_end:<outcome>/<reason>")
// and answers each phase with its status (200 unless set).
type hookLog struct {
	mu     sync.Mutex
	calls  []string
	status map[string]int
}

func newHookLog(t *testing.T) (*hookLog, []Hook) {
	l := &hookLog{status: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any // not HookRequest: the test compiles on code without its outcome
		_ = json.NewDecoder(r.Body).Decode(&req)
		l.mu.Lock()
		phase, _ := req["phase"].(string)
		call := phase
		if phase == PhaseEnd {
			call += fmt.Sprintf(":%v/%v", req["outcome"], req["outcomeReason"])
		}
		l.calls = append(l.calls, call)
		status := l.status[phase]
		l.mu.Unlock()
		if status != 0 {
			w.WriteHeader(status)
		}
	}))
	t.Cleanup(srv.Close)
	hooks, err := ParseHooks(fmt.Appendf(nil, "hooks:\n- {name: cmdb, url: %q, phases: [heal_start, heal_end], timeout: 5s}\n", srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	return l, hooks
}

func (l *hookLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.calls, ",")
}

func (l *hookLog) setStatus(phase string, status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.status[phase] = status
}

// hookOpts waits long enough in a loop for the local hook server to answer;
// a heal that ended is not started again (cooldown) unless o says so.
func hookOpts(hooks []Hook, o Options) Options {
	o.Hooks, o.HookWait = hooks, 10*time.Second
	if o.Cooldown == 0 {
		o.Cooldown = time.Hour
	}
	return o
}

// TestFixedSizeGroupCallsNoHook: a heal that fails its group checks (a
// fixed-size group) calls neither heal_start nor heal_end, again after its
// cooldown.
func TestFixedSizeGroupCallsNoHook(t *testing.T) {
	log, hooks := newHookLog(t)
	f := newSizedFixture(t, hookOpts(hooks, Options{ReplaceFirst: true, Cooldown: time.Minute}), 3, 3,
		readyNode("sick", map[string]string{Annotation: "x"}), readyNode("b", nil), readyNode("c", nil))
	f.loop(0)
	f.loop(2 * time.Minute) // after the cooldown: tried again
	if ev := f.drainEvents(); strings.Count(ev, "GroupAtMinimum") != 2 {
		t.Errorf("events:\n%s", ev)
	}
	if got := log.String(); got != "" {
		t.Errorf("hook calls %q, want none for a heal that cannot proceed", got)
	}
}

// TestCancelledHealCallsHealEnd: a node that recovers after heal_start gets
// heal_end with outcome cancelled, once.
func TestCancelledHealCallsHealEnd(t *testing.T) {
	log, hooks := newHookLog(t)
	f := newFixture(t, hookOpts(hooks, Options{Policies: readyPolicy, ReplaceFirst: true}),
		readyNode("sick", nil, notReady(5*time.Minute)), readyNode("b", nil), readyNode("c", nil))
	f.loop(0)
	if got := f.phase("sick"); got != PhaseSurging {
		t.Fatalf("phase %q, want Surging", got)
	}
	f.setNode(0, readyNode("sick", nil))
	f.loop(time.Second)
	f.loop(2 * time.Second)
	if got, want := log.String(), "heal_start,heal_end:cancelled/Recovered"; got != want {
		t.Errorf("hook calls %q, want %q", got, want)
	}
	if len(f.healer.st.Heals) != 0 {
		t.Errorf("heal still in flight: %+v", f.healer.st.Heals["sick"])
	}
}

// evictionTimeoutFixture is a heal of a Ready node whose pod is never
// evicted: it ends past --max-pod-eviction-time (2m) without removing the node.
func evictionTimeoutFixture(t *testing.T, opts Options) *fixture {
	f := newFixture(t, opts, readyNode("sick", map[string]string{Annotation: "x"}), readyNode("b", nil), readyNode("c", nil))
	f.addPod(t, podOn("sick", "web-1"))
	return f
}

// TestRestoredHealCallsHealEndOnce: a heal that fails in its drain gives the
// node back, then calls heal_end once with outcome restored; a heal_end that
// fails there is reported and not called again.
func TestRestoredHealCallsHealEndOnce(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusInternalServerError} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			log, hooks := newHookLog(t)
			log.setStatus(PhaseEnd, status)
			f := evictionTimeoutFixture(t, hookOpts(hooks, Options{}))
			f.loop(0)
			f.loop(3 * time.Minute) // EvictionTimeout
			f.loop(4 * time.Minute)
			f.loop(5 * time.Minute)
			if got, want := log.String(), "heal_start,heal_end:restored/EvictionTimeout"; got != want {
				t.Errorf("hook calls %q, want %q", got, want)
			}
			if len(f.healer.st.Heals) != 0 {
				t.Errorf("heal still in flight: %+v", f.healer.st.Heals["sick"])
			}
			ev := f.drainEvents()
			if !strings.Contains(ev, "HealFailed") || !strings.Contains(ev, "EvictionTimeout") {
				t.Errorf("events:\n%s", ev)
			}
			if hookFailed := strings.Contains(ev, "HealHookFailed"); hookFailed != (status != http.StatusOK) {
				t.Errorf("HealHookFailed reported %v for heal_end answering %d; events:\n%s", hookFailed, status, ev)
			}
			if n := f.node(t, "sick"); n.Spec.Unschedulable || hasTaintKey(n, Taint) {
				t.Error("the node was not given back")
			}
		})
	}
}

// TestHealEndDeliveredOnceAfterARestart: a new leader resuming a heal that
// called heal_start calls heal_end once when it ends, and not heal_start
// again.
func TestHealEndDeliveredOnceAfterARestart(t *testing.T) {
	log, hooks := newHookLog(t)
	f := evictionTimeoutFixture(t, hookOpts(hooks, Options{}))
	f.loop(0) // heal_start; draining
	if got := f.phase("sick"); got != PhaseDraining {
		t.Fatalf("phase %q, want Draining", got)
	}
	f.healer = New(f.healer.opts, f.client, f.provider, f.events, nil) // a new leader
	f.loop(3 * time.Minute)                                            // EvictionTimeout: restored, heal_end
	f.healer = New(f.healer.opts, f.client, f.provider, f.events, nil)
	f.loop(4 * time.Minute)
	if got, want := log.String(), "heal_start,heal_end:restored/EvictionTimeout"; got != want {
		t.Errorf("hook calls %q, want %q", got, want)
	}
	if len(f.healer.st.Heals) != 0 {
		t.Errorf("heal still in flight: %+v", f.healer.st.Heals["sick"])
	}
}

// TestHealEndOwedSurvivesARestartInRestoring: the leader that ended the heal
// dies before the node is given back; the next one gives it back and calls
// heal_end, which the state says is owed.
func TestHealEndOwedSurvivesARestartInRestoring(t *testing.T) {
	log, hooks := newHookLog(t)
	f := newFixture(t, hookOpts(hooks, Options{}), readyNode("sick", map[string]string{Annotation: "x"}),
		readyNode("b", nil), readyNode("c", nil))
	// As a record written before StartCalled existed (and before reasons).
	f.saveOldState(t, `{"heals":{"sick":{"node":"sick","group":"g","providerID":"","reason":"annotation: x","phase":"Restoring",`+
		`"started":"2026-01-01T00:00:00Z","phaseSince":"2026-01-01T00:00:00Z","readyBefore":0,"increased":false,"deleteIssued":false,`+
		`"startHooked":true,"before":{"unschedulable":false},`+
		`"end":{"result":"failed","reason":"EvictionTimeout","message":"pods left"}}},"cooldown":{}}`)
	f.loop(time.Second)
	f.loop(2 * time.Second)
	if got, want := log.String(), "heal_end:restored/EvictionTimeout"; got != want {
		t.Errorf("hook calls %q, want %q", got, want)
	}
}

// TestRestoringDeadlineFreesTheSlot: a Node that can never be updated does
// not hold a slot of --max-concurrent-heals for ever: past the limit the heal
// ends, says the node could not be given back, and heal_end is told failed.
func TestRestoringDeadlineFreesTheSlot(t *testing.T) {
	log, hooks := newHookLog(t)
	f := evictionTimeoutFixture(t, hookOpts(hooks, Options{MaxConcurrent: 1}))
	f.loop(0)
	f.client.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("admission webhook \"nodes.example.com\" denied the request")
	})
	f.loop(3 * time.Minute) // EvictionTimeout; the node cannot be given back
	f.loop(10 * time.Minute)
	if got := f.phase("sick"); got != PhaseRestoring {
		t.Fatalf("phase %q, want Restoring while the update is retried", got)
	}
	f.loop(19 * time.Minute) // past --max-node-provision-time (15m) in Restoring
	if len(f.healer.st.Heals) != 0 {
		t.Fatalf("heal still in flight: %+v", f.healer.st.Heals["sick"])
	}
	ev := f.drainEvents()
	if !strings.Contains(ev, "RestoringTimeout") || !strings.Contains(ev, "could not be given back") ||
		!strings.Contains(ev, "denied the request") {
		t.Errorf("events:\n%s", ev)
	}
	if got, want := log.String(), "heal_start,heal_end:failed/RestoringTimeout"; got != want {
		t.Errorf("hook calls %q, want %q", got, want)
	}
}

// TestOperatorChangesDuringTheHealSurvive: what the operator set on the node
// while the heal ran (the scale-down-disabled annotation changed, set or
// removed; the node uncordoned) is kept when the heal gives the node back;
// only what still holds the heal's own value is reverted.
func TestOperatorChangesDuringTheHealSurvive(t *testing.T) {
	for _, tc := range []struct {
		name              string
		before            *string // the annotation before the heal
		cordoned          bool    // the node unschedulable before the heal
		during            func(n *apiv1.Node)
		wantAnn           *string
		wantUnschedulable bool
	}{
		{name: "annotation-set-false", during: func(n *apiv1.Node) { n.Annotations[scaleDownDisabled] = "false" },
			wantAnn: strPtr("false")},
		{name: "annotation-removed", before: strPtr("true"), during: func(n *apiv1.Node) { delete(n.Annotations, scaleDownDisabled) }},
		{name: "annotation-untouched", before: strPtr("false"), during: func(*apiv1.Node) {}, wantAnn: strPtr("false")},
		{name: "uncordoned", cordoned: true, during: func(n *apiv1.Node) { n.Spec.Unschedulable = false }},
		{name: "cordon-untouched", cordoned: true, during: func(*apiv1.Node) {}, wantUnschedulable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{Annotation: "x"}
			if tc.before != nil {
				ann[scaleDownDisabled] = *tc.before
			}
			sick := readyNode("sick", ann)
			sick.Spec.Unschedulable = tc.cordoned
			f := newFixture(t, Options{}, sick, readyNode("b", nil), readyNode("c", nil))
			f.addPod(t, podOn("sick", "web-1"))
			f.loop(0) // cordoned, draining
			n := f.node(t, "sick")
			if n.Annotations[scaleDownDisabled] != "true" || !n.Spec.Unschedulable {
				t.Fatalf("the heal did not cordon the node: %+v %v", n.Annotations, n.Spec.Unschedulable)
			}
			tc.during(n) // the operator, while the heal runs
			if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			f.loop(3 * time.Minute) // EvictionTimeout: given back
			if len(f.healer.st.Heals) != 0 {
				t.Fatalf("heal still in flight: %+v", f.healer.st.Heals["sick"])
			}
			n = f.node(t, "sick")
			var got *string
			if v, ok := n.Annotations[scaleDownDisabled]; ok {
				got = &v
			}
			if fmt.Sprint(deref(got)) != fmt.Sprint(deref(tc.wantAnn)) {
				t.Errorf("scale-down-disabled %s, want %s", deref(got), deref(tc.wantAnn))
			}
			if n.Spec.Unschedulable != tc.wantUnschedulable || hasTaintKey(n, Taint) {
				t.Errorf("unschedulable %v (want %v), taints %+v", n.Spec.Unschedulable, tc.wantUnschedulable, n.Spec.Taints)
			}
		})
	}
}

func strPtr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "<absent>"
	}
	return fmt.Sprintf("%q", *s)
}
