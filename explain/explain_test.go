package explain

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/podutil"
)

var loopAt = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

func get(t *testing.T, r *Recorder, query string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/explainz?"+query, nil))
	return rec.Code, rec.Body.String()
}

func TestHandlerAnswers(t *testing.T) {
	until := loopAt.Add(5 * time.Minute)
	left := 90 * time.Second
	since := loopAt.Add(-time.Minute)
	u, th := 0.3, 0.5
	r := NewRecorder()
	r.BeginLoop(loopAt)
	r.AddPodGroup(PodGroup{Pods: []string{"ns/web-0", "ns/web-1"}, Outcome: OutcomeScaledUp, NodeGroups: []NodeGroupVerdict{
		{NodeGroup: "b", Cause: CauseBackoff, Reason: "in backoff after failed scale-up (STOCKOUT)", Until: &until},
		{NodeGroup: "a", Fits: true, Nodes: 2, Pods: 2, Chosen: true, Why: "chosen by --expander=least-waste among 1 option(s)"},
		{NodeGroup: "c", Cause: CauseScheduler, Plugin: "TaintToleration", Reason: "node(s) had untolerated taint(s)"},
	}})
	r.AddPodGroup(PodGroup{Pods: []string{"ns/job-0"}, Request: "ns/req", Outcome: OutcomeNoScaleUp, Message: "no room"})
	r.SetCondition("ns/req", Condition{Type: "Provisioned", Status: "False", Reason: "CapacityIsNotFound", Message: "first"})
	r.SetCondition("ns/req", Condition{Type: "Provisioned", Status: "False", Reason: "CapacityIsNotFound", Message: "no room"})
	r.SetCondition("ns/done", Condition{Type: "BookingExpired", Status: "True", Reason: "CapacityBookingConsumed", Message: "all in"})
	r.SetNodes([]NodeVerdict{{Node: "n2", Reason: "BlockedByPod", Detail: "pod ns/p: NotEnoughPdb (PodDisruptionBudget ns/pdb ...)"},
		{Node: "n1", NodeGroup: "a", Unneeded: true, Since: &since, TimeLeft: &left, Utilization: &u, Threshold: &th}}, "")
	if code, _ := get(t, r, "pod=ns/web-0"); code != http.StatusServiceUnavailable {
		t.Errorf("before the loop ends: %d, want 503", code)
	}
	r.EndLoop()

	tests := []struct {
		query    string
		code     int
		contains []string
	}{
		{"pod=ns/web-1", 200, []string{"Loop at 2026-11-27T10:00:00Z", "Pod group: 2 pod(s), e.g. ns/web-0", "Outcome: scaled up",
			"   NODE GROUP  VERDICT  NODES  REASON\n*  a           fits     2      takes 2 pod(s); chosen by --expander=least-waste",
			"   b           refused  -      in backoff after failed scale-up (STOCKOUT); until 2026-11-27T10:05:00Z",
			"   c           refused  -      TaintToleration: node(s) had untolerated taint(s)", "(* the node group the expander chose)"}},
		{"pod=ns/nope", 404, []string{"pod ns/nope was not among the pending pods the last loop (at 2026-11-27T10:00:00Z)"}},
		{"pod=nope", 400, []string{"want <namespace>/<name>"}},
		{"node=n1", 200, []string{"Verdict:         unneeded", "Time left:       1m30s", "Utilization:     0.30 (threshold 0.50)"}},
		{"node=n2", 200, []string{"Verdict:  kept", "Reason:   BlockedByPod", "PodDisruptionBudget ns/pdb"}},
		{"node=n3", 404, []string{"node n3 has no scale-down verdict"}},
		{"provisioningrequest=ns/req", 200, []string{"Loop at 2026-11-27T10:00:00Z set:\n  Provisioned=False (CapacityIsNotFound): no room\n\n",
			"for ProvisioningRequest ns/req", "Outcome: no scale-up: no room"}},
		{"provisioningrequest=ns/done", 200, []string{"BookingExpired=True (CapacityBookingConsumed): all in"}},
		{"provisioningrequest=ns/other", 404, []string{"ProvisioningRequest ns/other had no pods"}},
		{"", 400, []string{"ask for one of"}},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			code, body := get(t, r, tc.query)
			if code != tc.code {
				t.Errorf("code %d, want %d; body:\n%s", code, tc.code, body)
			}
			for _, want := range tc.contains {
				if !strings.Contains(body, want) {
					t.Errorf("body lacks %q:\n%s", want, body)
				}
			}
		})
	}
	code, body := get(t, r, "pod=ns/web-0&format=json")
	var got struct {
		At time.Time `json:"at"`
		PodGroup
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || code != 200 {
		t.Fatalf("JSON: %d %v\n%s", code, err, body)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, []string{got.NodeGroups[0].NodeGroup, got.NodeGroups[1].NodeGroup,
		got.NodeGroups[2].NodeGroup}); diff != "" || !got.NodeGroups[0].Chosen || !got.At.Equal(loopAt) {
		t.Errorf("JSON verdicts (-want +got, chosen first):\n%s%+v", diff, got)
	}
}

// The record keeps the last complete loop only, bounded per loop.
func TestRecorderKeepsTheLastLoopBounded(t *testing.T) {
	r := NewRecorder()
	r.BeginLoop(loopAt)
	var many []NodeGroupVerdict
	for i := range MaxNodeGroupVerdicts + 5 {
		many = append(many, NodeGroupVerdict{NodeGroup: fmt.Sprintf("g%03d", i), Cause: CauseMaxSize})
	}
	many = append(many, NodeGroupVerdict{NodeGroup: "zz", Fits: true})
	for i := range MaxPodGroups + 3 {
		r.AddPodGroup(PodGroup{Pods: []string{fmt.Sprintf("ns/p%d", i)}, NodeGroups: many})
	}
	r.EndLoop()
	g, _, ok := r.Pod("ns/p0")
	if !ok || len(g.NodeGroups) != MaxNodeGroupVerdicts || g.MoreNodeGroups != 6 || g.NodeGroups[0].NodeGroup != "zz" {
		t.Errorf("pod group %v: %d verdicts, %d more, first %q; want %d, 6 more, the fitting one first", ok,
			len(g.NodeGroups), g.MoreNodeGroups, g.NodeGroups[0].NodeGroup, MaxNodeGroupVerdicts)
	}
	if _, _, ok := r.Pod(fmt.Sprintf("ns/p%d", MaxPodGroups)); ok {
		t.Errorf("a pod group past MaxPodGroups was kept")
	}
	r.BeginLoop(loopAt.Add(time.Second))
	r.EndLoop()
	if _, _, ok := r.Pod("ns/p0"); ok {
		t.Errorf("a pod of the loop before the last is still explained")
	}
}

// A pod that waits for the upcoming node of its scale-up keeps that
// decision's verdicts, and only while it waits.
func TestRecorderCarriesTheDecisionWhileThePodWaits(t *testing.T) {
	r := NewRecorder()
	decided := []NodeGroupVerdict{{NodeGroup: "a", Fits: true, Nodes: 1, Pods: 1, Chosen: true}}
	r.BeginLoop(loopAt)
	r.AddPodGroup(PodGroup{Pods: []string{"ns/p"}, Outcome: OutcomeScaledUp, NodeGroups: decided})
	r.EndLoop()
	for i := 1; i <= 2; i++ {
		r.BeginLoop(loopAt.Add(time.Duration(i) * time.Second))
		r.AddPodGroup(PodGroup{Pods: []string{"ns/p"}, Outcome: OutcomeFitsExisting, WaitsFor: "a"})
		r.EndLoop()
		g, _, _ := r.Pod("ns/p")
		if diff := cmp.Diff(decided, g.NodeGroups); diff != "" || g.DecidedAt == nil || !g.DecidedAt.Equal(loopAt) {
			t.Errorf("loop %d: verdicts (-want +got):\n%s decided at %v", i, diff, g.DecidedAt)
		}
	}
	r.BeginLoop(loopAt.Add(3 * time.Second))
	r.AddPodGroup(PodGroup{Pods: []string{"ns/p"}, Outcome: OutcomeFitsExisting})
	r.EndLoop()
	if g, _, _ := r.Pod("ns/p"); len(g.NodeGroups) != 0 || g.DecidedAt != nil {
		t.Errorf("a pod that fits a registered node still carries the decision: %+v", g)
	}
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	var r *Recorder
	r.BeginLoop(loopAt)
	r.AddPodGroup(PodGroup{})
	r.SetNodes(nil, "")
	r.EndLoop()
}

// Pods set aside before the scale-up are told why: per request for pods
// consuming a ProvisioningRequest, per owner for the others.
func TestSetAside(t *testing.T) {
	yes := true
	consuming := func(name string) *apiv1.Pod {
		return &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Annotations: map[string]string{podutil.ConsumeAnnotation: "train"}}}
	}
	owned := func(name string) *apiv1.Pod {
		return &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			OwnerReferences: []metav1.OwnerReference{{UID: "rs", Controller: &yes}}}}
	}
	r := NewRecorder()
	r.BeginLoop(loopAt)
	r.SetAside([]*apiv1.Pod{consuming("w-0"), owned("web-0"), consuming("w-1"), owned("web-1")})
	r.EndLoop()
	for _, tc := range []struct {
		pod, request, message string
		count                 int
	}{
		{"ns/w-1", "ns/train", "consumes ProvisioningRequest ns/train", 2},
		{"ns/web-1", "", "not yet marked unschedulable", 2},
	} {
		g, _, ok := r.Pod(tc.pod)
		if !ok || g.Outcome != OutcomeSetAside || g.Request != tc.request || g.PodCount != tc.count ||
			!strings.Contains(g.Message, tc.message) {
			t.Errorf("%s: %+v (found %v), want set aside, request %q, %d pods, %q", tc.pod, g, ok, tc.request, tc.count, tc.message)
		}
	}
}
