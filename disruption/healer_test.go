package disruption

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	cpfake "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func readyNode(name string, annotations map[string]string, conds ...apiv1.NodeCondition) *apiv1.Node {
	if len(conds) == 0 {
		conds = []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue}}
	}
	return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Status: apiv1.NodeStatus{Conditions: conds}}
}

type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	provider *cpfake.Provider
	healer   *Engine
	events   *record.FakeRecorder
	nodes    []*apiv1.Node
	pods     []*apiv1.Pod // the loop's scheduled pods
}

func newFixture(t *testing.T, opts Options, nodes ...*apiv1.Node) *fixture {
	return newSizedFixture(t, opts, 0, 10, nodes...)
}

// newSizedFixture is newFixture with the group's min and max sizes.
func newSizedFixture(t *testing.T, opts Options, minSize, maxSize int, nodes ...*apiv1.Node) *fixture {
	f := &fixture{t: t, client: fake.NewSimpleClientset(), provider: cpfake.NewProvider(), events: record.NewFakeRecorder(100), nodes: nodes}
	f.provider.AddNodeGroup("g", minSize, maxSize, len(nodes), nil)
	for _, n := range nodes {
		f.provider.AddNode("g", n)
		if _, err := f.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if opts.MaxUnhealthyPercent == 0 {
		opts.MaxUnhealthyPercent = 40
	}
	if opts.MaxNodeProvisionTime == 0 {
		opts.MaxNodeProvisionTime = 15 * time.Minute
	}
	if opts.MaxPodEvictionTime == 0 {
		opts.MaxPodEvictionTime = 2 * time.Minute
	}
	opts.Namespace = "kube-system"
	opts.Healing = true
	f.healer = New(opts, f.client, f.provider, f.events, nil)
	return f
}

func (f *fixture) loop(at time.Duration) bool {
	return f.healer.Repair(context.Background(), &processors.Loop{Now: t0.Add(at), Nodes: f.nodes, ScheduledPods: f.pods})
}

func (f *fixture) calls(method string) int {
	n := 0
	for _, c := range f.provider.Calls() {
		if c.Method == method {
			n++
		}
	}
	return n
}

// saveOldState writes the state ConfigMap with data, as an older version
// wrote it.
func (f *fixture) saveOldState(t *testing.T, data string) {
	cm := &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: StateConfigMap, Namespace: "kube-system"},
		Data: map[string]string{"state": data}}
	if _, err := f.client.CoreV1().ConfigMaps("kube-system").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) drainEvents() string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// TestPolicyTriggers: a condition held long enough triggers, a shorter one
// does not; the annotation triggers at once.
func TestPolicyTriggers(t *testing.T) {
	h := &Engine{opts: Options{Policies: []Policy{{Type: "KernelDeadlock", Status: apiv1.ConditionTrue, For: 5 * time.Minute}}}}
	cond := func(since time.Duration) apiv1.NodeCondition {
		return apiv1.NodeCondition{Type: "KernelDeadlock", Status: apiv1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-since))}
	}
	if _, _, ok := h.trigger(readyNode("a", nil, cond(6*time.Minute)), t0); !ok {
		t.Error("a condition held 6m did not trigger a 5m policy")
	}
	if _, _, ok := h.trigger(readyNode("b", nil, cond(time.Minute)), t0); ok {
		t.Error("a condition held 1m triggered a 5m policy")
	}
	if kind, why, ok := h.trigger(readyNode("c", map[string]string{Annotation: "disk"}), t0); !ok || kind != "annotation" || why != "disk" {
		t.Errorf("annotation: %q %q %v", kind, why, ok)
	}
}

// TestHealReplacesFirstAndResumesWithoutDeletingTwice: the whole procedure
// on fakes; the recorded state is reloaded by a second Healer (a new
// leader) between steps, and DeleteNodes is called exactly once.
func TestHealReplacesFirstAndResumesWithoutDeletingTwice(t *testing.T) {
	sick := readyNode("sick", map[string]string{Annotation: "disk"})
	f := newFixture(t, Options{ReplaceFirst: true, Cooldown: time.Hour}, sick, readyNode("ok", nil))
	if !f.loop(0) { // started; replacement asked for first
		t.Fatal("no change reported for the first step")
	}
	if f.calls("IncreaseSize") != 1 {
		t.Fatalf("IncreaseSize calls %d, want 1 (replace first)", f.calls("IncreaseSize"))
	}
	n, _ := f.client.CoreV1().Nodes().Get(context.Background(), "sick", metav1.GetOptions{})
	if !n.Spec.Unschedulable || !hasTaintKey(n, Taint) || n.Annotations[scaleDownDisabled] != "true" {
		t.Fatalf("node not cordoned, tainted and kept from scale-down: %+v", n.Spec)
	}
	f.loop(time.Second) // waits for the replacement
	if f.calls("DeleteNodes") != 0 {
		t.Fatal("deleted before the replacement is Ready")
	}
	// The replacement is Ready; a new leader takes over.
	f.nodes = append(f.nodes, readyNode("new", nil))
	f.provider.AddNode("g", f.nodes[2])
	f.healer = New(f.healer.opts, f.client, f.provider, f.events, nil)
	f.loop(2 * time.Second) // drained (no pods) and deleted
	if f.calls("DeleteNodes") != 1 {
		t.Fatalf("DeleteNodes calls %d, want 1", f.calls("DeleteNodes"))
	}
	// Another new leader, the node still listed (the deletion takes a while).
	f.healer = New(f.healer.opts, f.client, f.provider, f.events, nil)
	f.loop(3 * time.Second)
	f.loop(4 * time.Second)
	if f.calls("DeleteNodes") != 1 || f.calls("IncreaseSize") != 1 {
		t.Errorf("DeleteNodes %d, IncreaseSize %d after resuming; want 1 and 1", f.calls("DeleteNodes"), f.calls("IncreaseSize"))
	}
	ev := f.drainEvents()
	if !strings.Contains(ev, "HealStarted") || !strings.Contains(ev, "HealSucceeded") {
		t.Errorf("events:\n%s", ev)
	}
	// Cooldown: the annotation is still there, but no second heal.
	f.loop(5 * time.Second)
	if f.calls("IncreaseSize") != 1 {
		t.Error("healed again within the cooldown")
	}
}

// TestBreakerAndControlPlane: half the group at once is not healed; a
// control-plane node without hooks is not healed.
func TestBreakerAndControlPlane(t *testing.T) {
	f := newFixture(t, Options{ReplaceFirst: true}, readyNode("a", map[string]string{Annotation: "x"}),
		readyNode("b", map[string]string{Annotation: "x"}), readyNode("c", nil), readyNode("d", nil))
	f.loop(0)
	if f.calls("IncreaseSize") != 0 {
		t.Error("healed with half the group unhealthy")
	}
	if ev := f.drainEvents(); !strings.Contains(ev, "TooManyUnhealthyNodes") {
		t.Errorf("events:\n%s", ev)
	}
	cp := readyNode("cp", map[string]string{Annotation: "x"})
	cp.Labels = map[string]string{ControlPlaneLabel: ""}
	f = newFixture(t, Options{}, cp, readyNode("w1", nil), readyNode("w2", nil))
	f.loop(0)
	if f.calls("IncreaseSize")+f.calls("DeleteNodes") != 0 {
		t.Error("a control-plane node was healed without hooks")
	}
	if ev := f.drainEvents(); !strings.Contains(ev, "ControlPlaneWithoutHooks") {
		t.Errorf("events:\n%s", ev)
	}
}

func TestParsePolicyAndHooks(t *testing.T) {
	if p, err := ParsePolicy("Ready=Unknown:5m"); err != nil || p.For != 5*time.Minute {
		t.Errorf("%v %v", p, err)
	}
	for _, bad := range []string{"Ready", "Ready=Maybe:5m", "Ready=False:soon", "Ready=False:-1m", "=True:1m"} {
		if _, err := ParsePolicy(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := ParseHooks([]byte("hooks:\n- {name: a, url: 'http://127.0.0.1:1/x', phases: [heal_start]}\n")); err != nil {
		t.Error(err)
	}
	_, err := ParseHooks([]byte("hooks:\n- {name: a, url: 'ftp://x', phases: [heal_middle], timeout: 10m, failurePolicy: Maybe, caBundle: nope}\n"))
	for _, want := range []string{"url", "heal_middle", "timeout", "failurePolicy", "PEM"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}

// TestCrashAfterIncreaseIsNotRepeated: a leader recorded the target before
// its increase and died before recording that the increase was made; the
// next leader sees the target above it and does not ask again.
func TestCrashAfterIncreaseIsNotRepeated(t *testing.T) {
	sick := readyNode("sick", map[string]string{Annotation: "disk"})
	f := newFixture(t, Options{ReplaceFirst: true}, sick, readyNode("ok", nil))
	// As a version that only healed wrote it: no reason, one node at the
	// top of the record.
	f.saveOldState(t, `{"heals":{"sick":{"node":"sick","group":"g","providerID":"","reason":"annotation: disk","phase":"Starting",`+
		`"started":"2026-01-01T00:00:00Z","phaseSince":"2026-01-01T00:00:00Z","readyBefore":1,"targetBefore":2,"increased":false,`+
		`"deleteIssued":false}},"cooldown":{}}`)
	groups, _ := f.provider.NodeGroups(context.Background())
	if err := groups[0].IncreaseSize(context.Background(), 1); err != nil { // the increase that went through
		t.Fatal(err)
	}
	f.loop(time.Second)
	if got := f.calls("IncreaseSize"); got != 1 {
		t.Errorf("IncreaseSize calls %d, want only the one before the crash", got)
	}
	if h := f.healer.st.Heals["sick"]; h == nil || !h.Replacements[0].Increased || h.Phase != PhaseSurging || h.For != Unhealthy {
		t.Errorf("heal after resuming: %+v, want the increase known and the replacement waited for", h)
	}
}

// TestControlPlaneHealedWithItsHooks: a control-plane node is healed when a
// hook is configured for control-plane nodes, and only the hooks marked so
// are called for it, with controlPlane set.
func TestControlPlaneHealedWithItsHooks(t *testing.T) {
	var mu sync.Mutex
	var got []HookRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req HookRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		if r.URL.Path == "/workers-only" {
			w.WriteHeader(http.StatusInternalServerError) // must not be called for a control-plane node
		}
	}))
	defer srv.Close()
	hooks, err := ParseHooks(fmt.Appendf(nil, "hooks:\n- {name: etcd, url: %q, phases: [heal_start], controlPlane: true}\n"+
		"- {name: workers, url: %q, phases: [heal_start]}\n", srv.URL+"/etcd", srv.URL+"/workers-only"))
	if err != nil {
		t.Fatal(err)
	}
	cp := readyNode("cp", map[string]string{Annotation: "x"})
	cp.Labels = map[string]string{ControlPlaneLabel: ""}
	f := newFixture(t, Options{Hooks: hooks, ReplaceFirst: true}, cp, readyNode("w1", nil), readyNode("w2", nil))
	f.loop(0)
	if f.calls("IncreaseSize") != 1 {
		t.Fatalf("IncreaseSize calls %d, want the control-plane node's replacement", f.calls("IncreaseSize"))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || !got[0].ControlPlane || got[0].Node != "cp" || got[0].Phase != PhaseStart {
		t.Errorf("hook calls %+v, want one heal_start for cp with controlPlane, from the etcd hook only", got)
	}
}

// TestDryRunAndConcurrency: dry run reports and touches nothing; with
// --max-concurrent-heals=1 a second unhealthy node waits for the first.
func TestDryRunAndConcurrency(t *testing.T) {
	nodes := func() []*apiv1.Node {
		var out []*apiv1.Node
		for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
			var ann map[string]string
			if n == "a" || n == "b" {
				ann = map[string]string{Annotation: "x"}
			}
			out = append(out, readyNode(n, ann))
		}
		return out
	}
	f := newFixture(t, Options{DryRun: true, ReplaceFirst: true}, nodes()...)
	f.loop(0)
	if f.calls("IncreaseSize")+f.calls("DeleteNodes") != 0 {
		t.Error("dry run changed the group")
	}
	if ev := f.drainEvents(); !strings.Contains(ev, "DryRun") {
		t.Errorf("events:\n%s", ev)
	}
	n, _ := f.client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	if n.Spec.Unschedulable {
		t.Error("dry run cordoned a node")
	}
	f = newFixture(t, Options{MaxConcurrent: 1, ReplaceFirst: true}, nodes()...)
	f.loop(0)
	if len(f.healer.st.Heals) != 1 {
		t.Errorf("%d heals in flight, want 1 (--max-concurrent-heals=1)", len(f.healer.st.Heals))
	}
}

// TestGroupThatCannotDeleteByName: the heal fails and the node is released;
// no other instance is ever removed.
func TestGroupThatCannotDeleteByName(t *testing.T) {
	f := newFixture(t, Options{ReplaceFirst: false}, readyNode("sick", map[string]string{Annotation: "x"}),
		readyNode("b", nil), readyNode("c", nil))
	f.provider.InjectError("DeleteNodes", "g", cloudprovider.ErrNotImplemented)
	f.loop(0)
	f.loop(time.Second)
	if ev := f.drainEvents(); !strings.Contains(ev, "CannotDeleteByName") {
		t.Errorf("events:\n%s", ev)
	}
	n, _ := f.client.CoreV1().Nodes().Get(context.Background(), "sick", metav1.GetOptions{})
	if n.Spec.Unschedulable || hasTaintKey(n, Taint) {
		t.Error("the node is still cordoned after the failed heal")
	}
	if f.calls("IncreaseSize")+f.calls("DecreaseTargetSize") != 0 {
		t.Error("the group's size was changed")
	}
}

// TestHookFailurePolicies: a failing Ignore hook is reported and skipped,
// a failing Fail hook stops the call; a hook of the other phase is not
// called; a hook that does not answer in time fails.
func TestHookFailurePolicies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fail":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/slow":
			time.Sleep(300 * time.Millisecond)
		}
	}))
	defer srv.Close()
	hooks, err := ParseHooks(fmt.Appendf(nil, `hooks:
- {name: soft, url: %[1]q, phases: [heal_start], failurePolicy: Ignore}
- {name: end-only, url: %[2]q, phases: [heal_end]}
- {name: ok, url: %[3]q, phases: [heal_start]}
`, srv.URL+"/fail", srv.URL+"/fail", srv.URL+"/ok"))
	if err != nil {
		t.Fatal(err)
	}
	var ignored []string
	err = callHooks(context.Background(), hooks, HookRequest{Phase: PhaseStart, Node: "n"}, func(name string, err error) {
		ignored = append(ignored, name)
	})
	if err != nil || len(ignored) != 1 || ignored[0] != "soft" {
		t.Errorf("heal_start: err %v, ignored %v; want no error and soft ignored", err, ignored)
	}
	if err := callHooks(context.Background(), hooks, HookRequest{Phase: PhaseEnd, Node: "n"}, func(string, error) {}); err == nil ||
		!strings.Contains(err.Error(), "end-only") || !strings.Contains(err.Error(), "503") {
		t.Errorf("heal_end: err %v, want the Fail hook's 503", err)
	}
	slow, err := ParseHooks(fmt.Appendf(nil, "hooks:\n- {name: slow, url: %q, phases: [heal_start], timeout: 100ms}\n", srv.URL+"/slow"))
	if err != nil {
		t.Fatal(err)
	}
	if err := callHooks(context.Background(), slow, HookRequest{Phase: PhaseStart}, func(string, error) {}); err == nil {
		t.Error("a hook slower than its timeout did not fail")
	}
}
