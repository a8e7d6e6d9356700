package disruption

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func notReady(since time.Duration) apiv1.NodeCondition {
	return apiv1.NodeCondition{Type: apiv1.NodeReady, Status: apiv1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(-since))}
}

var readyPolicy = []Policy{{Type: apiv1.NodeReady, Status: apiv1.ConditionFalse, For: time.Minute}}

func podOn(node, name string) *apiv1.Pod {
	return &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: apiv1.PodSpec{NodeName: node}, Status: apiv1.PodStatus{Phase: apiv1.PodRunning}}
}

func (f *fixture) addPod(t *testing.T, p *apiv1.Pod) {
	t.Helper()
	if _, err := f.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.pods = append(f.pods, p)
}

func (f *fixture) node(t *testing.T, name string) *apiv1.Node {
	t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// setNode replaces the loop's view of node i (its conditions or
// annotations changed), keeping its provider ID.
func (f *fixture) setNode(i int, n *apiv1.Node) {
	n.Spec.ProviderID = f.nodes[i].Spec.ProviderID
	f.nodes[i] = n
}

func (f *fixture) podExists(name string) bool {
	_, err := f.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	return err == nil
}

func (f *fixture) phase(name string) string {
	if r := f.healer.st.Heals[name]; r != nil {
		return r.Phase
	}
	return ""
}

// TestNotReadyNodeIsFencedBeforeItsPodsGo: the pods of a node that is not
// Ready are never deleted by the heal; past --max-pod-eviction-time the
// node's instance is deleted by name first, and only once its group no
// longer lists it is the node marked out of service (Kubernetes then
// removes the pods). A group listing that fails keeps the heal waiting.
func TestNotReadyNodeIsFencedBeforeItsPodsGo(t *testing.T) {
	f := newFixture(t, Options{Policies: readyPolicy, MaxConcurrent: 1}, readyNode("sick", nil, notReady(5*time.Minute)),
		readyNode("b", nil), readyNode("c", nil))
	f.addPod(t, podOn("sick", "db-0"))
	f.loop(0) // started, cordoned, draining
	if got := f.phase("sick"); got != PhaseDraining {
		t.Fatalf("phase %q, want Draining", got)
	}
	f.provider.InjectError("Nodes", "g", errors.New("rpc error: code = Unavailable"))
	f.loop(3 * time.Minute) // past --max-pod-eviction-time (2m): fence
	if !f.podExists("db-0") {
		t.Fatal("the heal deleted a pod of a node that may still run it")
	}
	if f.calls("DeleteNodes") != 1 {
		t.Fatalf("DeleteNodes calls %d, want 1 (the instance goes first)", f.calls("DeleteNodes"))
	}
	if got := f.phase("sick"); got != PhaseFencing {
		t.Fatalf("phase %q, want Fencing while the group's listing fails", got)
	}
	if hasTaintKey(f.node(t, "sick"), OutOfServiceTaint) {
		t.Fatal("marked out of service before its instance was seen gone")
	}
	f.provider.InjectError("Nodes", "g", nil)
	f.loop(3*time.Minute + time.Second)
	n := f.node(t, "sick")
	if !hasTaintKey(n, OutOfServiceTaint) {
		t.Errorf("node not marked out of service once its instance is gone: %+v", n.Spec.Taints)
	}
	if !f.podExists("db-0") {
		t.Error("the heal deleted the pod itself; Kubernetes' pod garbage collector is to remove it")
	}
	if got := f.phase("sick"); got != PhaseReplacing {
		t.Errorf("phase %q, want Replacing", got)
	}
}

// TestFenceUndoneWhenTheNodeAnswersAgain: a node Ready again before its
// instance was deleted is drained again instead of deleted with its pods.
func TestFenceUndoneWhenTheNodeAnswersAgain(t *testing.T) {
	f := newFixture(t, Options{Policies: readyPolicy}, readyNode("sick", nil, notReady(5*time.Minute)),
		readyNode("b", nil), readyNode("c", nil))
	f.addPod(t, podOn("sick", "db-0"))
	f.provider.InjectError("DeleteNodes", "g", errors.New("rpc error: code = Unavailable"))
	f.loop(0)
	f.loop(3 * time.Minute) // fence: the deletion fails, retried
	if got := f.phase("sick"); got != PhaseDeleting {
		t.Fatalf("phase %q, want Deleting", got)
	}
	f.provider.InjectError("DeleteNodes", "g", nil)
	f.setNode(0, readyNode("sick", nil))
	f.loop(3*time.Minute + time.Second)
	if got := f.phase("sick"); got != PhaseDraining {
		t.Errorf("phase %q, want Draining again for a node that answers", got)
	}
	if f.calls("DeleteNodes") != 1 {
		t.Errorf("DeleteNodes calls %d, want only the failed one", f.calls("DeleteNodes"))
	}
}

// TestGroupAtMinimum: a group at its minimum gets the replacement first
// even without --node-healing-replace-first; a fixed-size group (min = max)
// fails the heal before the node is touched and frees its slot.
func TestGroupAtMinimum(t *testing.T) {
	f := newSizedFixture(t, Options{}, 3, 4, readyNode("sick", map[string]string{Annotation: "x"}), readyNode("b", nil), readyNode("c", nil))
	f.loop(0)
	if f.calls("IncreaseSize") != 1 || f.calls("DeleteNodes") != 0 || f.phase("sick") != PhaseSurging {
		t.Errorf("IncreaseSize %d, DeleteNodes %d, phase %q: want the replacement first",
			f.calls("IncreaseSize"), f.calls("DeleteNodes"), f.phase("sick"))
	}

	f = newSizedFixture(t, Options{ReplaceFirst: true, MaxConcurrent: 1}, 3, 3, readyNode("sick", map[string]string{Annotation: "x"}),
		readyNode("b", nil), readyNode("c", nil))
	f.loop(0)
	if ev := f.drainEvents(); !strings.Contains(ev, "GroupAtMinimum") {
		t.Errorf("events:\n%s", ev)
	}
	if n := f.node(t, "sick"); n.Spec.Unschedulable || hasTaintKey(n, Taint) {
		t.Error("the node of a fixed-size group was left cordoned")
	}
	if len(f.healer.st.Heals) != 0 {
		t.Error("the failed heal still holds a slot of --max-concurrent-heals")
	}
	if f.calls("IncreaseSize")+f.calls("DeleteNodes") != 0 {
		t.Error("the fixed-size group was changed")
	}
}

// TestDeletionThatKeepsFailingEnds: a provider that refuses the deletion
// for longer than --max-node-provision-time ends the heal as failed, the
// node given back and the slot freed.
func TestDeletionThatKeepsFailingEnds(t *testing.T) {
	f := newFixture(t, Options{MaxConcurrent: 1}, readyNode("sick", map[string]string{Annotation: "x"}), readyNode("b", nil), readyNode("c", nil))
	f.provider.InjectError("DeleteNodes", "g", errors.New("quota service down"))
	f.loop(0)
	f.loop(10 * time.Minute)
	if got := f.phase("sick"); got != PhaseDeleting {
		t.Fatalf("phase %q, want Deleting while retried", got)
	}
	f.loop(16 * time.Minute)
	if len(f.healer.st.Heals) != 0 {
		t.Fatalf("heal still in flight: %+v", f.healer.st.Heals["sick"])
	}
	if ev := f.drainEvents(); !strings.Contains(ev, "DeletingTimeout") || !strings.Contains(ev, "quota service down") {
		t.Errorf("events:\n%s", ev)
	}
	if n := f.node(t, "sick"); n.Spec.Unschedulable || hasTaintKey(n, Taint) {
		t.Error("the node was left cordoned")
	}
}

// TestTransientGroupLookupErrorIsRetried: a provider error while looking
// up the node's group neither ends the heal nor leaves the node cordoned.
func TestTransientGroupLookupErrorIsRetried(t *testing.T) {
	f := newFixture(t, Options{}, readyNode("sick", map[string]string{Annotation: "x"}), readyNode("b", nil), readyNode("c", nil))
	f.addPod(t, podOn("sick", "web-1"))
	f.loop(0) // draining, the pod not evicted yet
	f.provider.InjectError("NodeGroupForNode", "", errors.New("rpc error: code = Unavailable desc = connection refused"))
	f.pods = nil // evicted
	f.loop(time.Second)
	if ev := f.drainEvents(); strings.Contains(ev, "HealFailed") {
		t.Fatalf("a transient error ended the heal:\n%s", ev)
	}
	if got := f.phase("sick"); got != PhaseDeleting {
		t.Fatalf("phase %q, want Deleting, retried", got)
	}
	f.provider.InjectError("NodeGroupForNode", "", nil)
	f.loop(2 * time.Second)
	if f.calls("DeleteNodes") != 1 {
		t.Errorf("DeleteNodes calls %d after the provider answered again, want 1", f.calls("DeleteNodes"))
	}
}

// TestFailedHealGivesBackTheNodeAsItWas: a node the operator had cordoned
// and kept from scale-down stays so after a failed heal; one that was
// neither gets both back as they were.
func TestFailedHealGivesBackTheNodeAsItWas(t *testing.T) {
	for _, tc := range []struct {
		name          string
		unschedulable bool
		annotation    *string
	}{
		{"operator-cordoned", true, ptr.To("true")},
		{"operator-annotation-false", false, ptr.To("false")},
		{"untouched", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{Annotation: "x"}
			if tc.annotation != nil {
				ann[scaleDownDisabled] = *tc.annotation
			}
			sick := readyNode("sick", ann)
			sick.Spec.Unschedulable = tc.unschedulable
			f := newFixture(t, Options{}, sick, readyNode("b", nil), readyNode("c", nil))
			f.addPod(t, podOn("sick", "web-1"))
			f.loop(0)
			f.loop(3 * time.Minute) // Ready node, pod not evicted: EvictionTimeout
			if ev := f.drainEvents(); !strings.Contains(ev, "EvictionTimeout") {
				t.Fatalf("events:\n%s", ev)
			}
			n := f.node(t, "sick")
			var gotAnn *string
			if v, ok := n.Annotations[scaleDownDisabled]; ok {
				gotAnn = &v
			}
			if n.Spec.Unschedulable != tc.unschedulable || hasTaintKey(n, Taint) {
				t.Errorf("unschedulable %v (want %v), taints %+v", n.Spec.Unschedulable, tc.unschedulable, n.Spec.Taints)
			}
			if diff := cmp.Diff(tc.annotation, gotAnn); diff != "" {
				t.Errorf("scale-down-disabled annotation (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRecoveredNodeIsNotDrained: a node Ready again before its drain
// starts is neither drained nor deleted; the heal ends as cancelled. An
// annotation heal holds only while the annotation stays.
func TestRecoveredNodeIsNotDrained(t *testing.T) {
	f := newFixture(t, Options{Policies: readyPolicy, ReplaceFirst: true}, readyNode("sick", nil, notReady(5*time.Minute)),
		readyNode("b", nil), readyNode("c", nil))
	f.addPod(t, podOn("sick", "web-1"))
	f.loop(0)
	if got := f.phase("sick"); got != PhaseSurging {
		t.Fatalf("phase %q, want Surging", got)
	}
	f.setNode(0, readyNode("sick", nil))
	f.nodes = append(f.nodes, readyNode("new", nil)) // the replacement is Ready too
	f.provider.AddNode("g", f.nodes[3])
	f.loop(time.Second)
	if ev := f.drainEvents(); !strings.Contains(ev, "HealCancelled") || !strings.Contains(ev, "Recovered") {
		t.Errorf("events:\n%s", ev)
	}
	if f.calls("DeleteNodes") != 0 || len(f.healer.st.Heals) != 0 {
		t.Errorf("DeleteNodes %d, heals in flight %d: want the heal cancelled", f.calls("DeleteNodes"), len(f.healer.st.Heals))
	}
	if n := f.node(t, "sick"); n.Spec.Unschedulable || hasTaintKey(n, Taint) {
		t.Error("the recovered node stays cordoned")
	}

	f = newFixture(t, Options{ReplaceFirst: true}, readyNode("sick", map[string]string{Annotation: "x"}),
		readyNode("b", nil), readyNode("c", nil))
	f.loop(0)
	f.setNode(0, readyNode("sick", nil)) // annotation removed
	f.loop(time.Second)
	if f.calls("DeleteNodes") != 0 || len(f.healer.st.Heals) != 0 {
		t.Error("an annotation heal went on after its annotation was removed")
	}
}

// TestBreakerCountsHealsInFlight: a heal in flight counts against the
// breaker even once its node no longer shows the trigger, so a flapping
// node cannot let a second one in past the limit.
func TestBreakerCountsHealsInFlight(t *testing.T) {
	f := newFixture(t, Options{Policies: readyPolicy, MaxConcurrent: 5, MaxUnhealthyPercent: 20},
		readyNode("a", nil, notReady(5*time.Minute)), readyNode("b", nil), readyNode("c", nil), readyNode("d", nil), readyNode("e", nil))
	f.addPod(t, podOn("a", "web-1"))
	f.loop(0) // a: draining (its pod held)
	if got := f.phase("a"); got != PhaseDraining {
		t.Fatalf("phase of a %q, want Draining", got)
	}
	f.setNode(0, readyNode("a", nil))                          // a flaps back to Ready mid-drain
	f.setNode(1, readyNode("b", nil, notReady(2*time.Minute))) // b fails
	f.loop(time.Second)
	if f.healer.st.Heals["b"] != nil {
		t.Errorf("b started while a is being healed: %d heals in flight in a group of 5 with a 20%% breaker", len(f.healer.st.Heals))
	}
	if ev := f.drainEvents(); !strings.Contains(ev, "TooManyUnhealthyNodes") {
		t.Errorf("events:\n%s", ev)
	}
}

// TestNewNodeGrace: a node younger than --max-node-provision-time is not
// healed for its Ready condition; an older one is.
func TestNewNodeGrace(t *testing.T) {
	young := readyNode("young", nil, notReady(5*time.Minute))
	young.CreationTimestamp = metav1.NewTime(t0.Add(-6 * time.Minute))
	f := newFixture(t, Options{Policies: readyPolicy}, young, readyNode("b", nil), readyNode("c", nil))
	f.loop(0)
	if len(f.healer.st.Heals) != 0 {
		t.Error("a node 6m old was healed with --max-node-provision-time 15m")
	}
	f.loop(10 * time.Minute) // 16m old
	if f.healer.st.Heals["young"] == nil {
		t.Error("the node was not healed once older than --max-node-provision-time")
	}
}

// TestDeletedStateConfigMapIsRecreated: the heals in flight are written
// again when their ConfigMap was deleted.
func TestDeletedStateConfigMapIsRecreated(t *testing.T) {
	f := newFixture(t, Options{ReplaceFirst: true}, readyNode("sick", map[string]string{Annotation: "x"}), readyNode("b", nil), readyNode("c", nil))
	f.loop(0)
	cms := f.client.CoreV1().ConfigMaps("kube-system")
	if err := cms.Delete(context.Background(), StateConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.loop(time.Second)
	cm, err := cms.Get(context.Background(), StateConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("state ConfigMap not written again: %v", err)
	}
	if !strings.Contains(cm.Data["state"], `"node":"sick"`) {
		t.Errorf("state %s lacks the heal in flight", cm.Data["state"])
	}
}

// TestSlowHookDoesNotStallTheLoop: a heal_start hook slower than the loop's
// wait goes on outside the loop; the heal waits in Starting, untouched,
// and moves on once the hook has answered, calling it only once.
func TestSlowHookDoesNotStallTheLoop(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	calls := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
	}))
	defer srv.Close()
	defer releaseOnce.Do(func() { close(release) })
	hooks, err := ParseHooks([]byte("hooks:\n- {name: slow, url: '" + srv.URL + "', phases: [heal_start], timeout: 10s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Options{Hooks: hooks, HookWait: 20 * time.Millisecond}, readyNode("sick", map[string]string{Annotation: "x"}),
		readyNode("b", nil), readyNode("c", nil))
	f.loop(0) // returns while the hook is held
	if got := f.phase("sick"); got != PhaseStarting {
		t.Fatalf("phase %q, want Starting while the hook runs", got)
	}
	if f.node(t, "sick").Spec.Unschedulable {
		t.Fatal("cordoned before heal_start answered")
	}
	releaseOnce.Do(func() { close(release) })
	deadline := time.Now().Add(20 * time.Second)
	for i := 1; f.phase("sick") == PhaseStarting && time.Now().Before(deadline); i++ {
		f.loop(time.Duration(i) * time.Second)
	}
	if got := f.phase("sick"); got == PhaseStarting || got == "" {
		t.Errorf("phase %q after the hook answered, want the heal moved on", got)
	}
	if len(calls) != 1 {
		t.Errorf("hook called %d times, want 1", len(calls))
	}
}
