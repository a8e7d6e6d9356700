package lifecycle

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/podutil"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// requestPod is a running pod of namespace ns on node that consumes request
// (none when request is "").
func requestPod(ns, name, node, request string) *apiv1.Pod {
	p := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: apiv1.PodSpec{NodeName: node},
		Status: apiv1.PodStatus{Phase: apiv1.PodRunning}}
	if request != "" {
		p.Annotations = map[string]string{podutil.ConsumeAnnotation: request}
	}
	return p
}

func TestRunLimitProposesRevokedNodesOnceTheirPodsAreGoneOrTheGraceEnds(t *testing.T) {
	provisioned := t0.Add(time.Hour)
	revoke := provisioned.Add(20 * time.Second)
	rel := RunRelease{Namespace: "batch", Name: "job-1", Provisioned: provisioned, RevokeAt: revoke,
		GraceEnd: revoke.Add(10 * time.Minute), Revoked: true}
	ahead := rel
	ahead.Revoked = false
	releases := map[string]RunRelease{"n1": rel, "n2": rel, "n3": ahead, "late": rel}
	s := NewRunLimit(func() map[string]RunRelease { return releases })
	nodes := []*apiv1.Node{node("n1", t0), node("n2", t0), node("n3", t0), node("other", t0),
		// A node of a recorded name made after the request was provisioned
		// is another node.
		node("late", provisioned.Add(time.Second))}
	pods := []*apiv1.Pod{
		requestPod("batch", "w-0", "n2", "job-1"),
		// Not the request's: another request's pod, a pod of the same
		// request name in another namespace, a pod without the annotation,
		// a finished pod of the request.
		requestPod("batch", "w-other", "n1", "job-2"),
		requestPod("elsewhere", "w-ns", "n1", "job-1"),
		requestPod("batch", "plain", "n1", ""),
	}
	done := requestPod("batch", "w-done", "n1", "job-1")
	done.Status.Phase = apiv1.PodSucceeded
	pods = append(pods, done)

	propose := func(now time.Time) []string {
		var out []string
		for _, c := range s.Propose(context.Background(), &processors.Loop{Now: now, Nodes: nodes, ScheduledPods: pods}) {
			if c.Reason != disruption.MaxRunDuration || len(c.Nodes) != 1 || len(c.Replacement) != 0 {
				t.Errorf("candidate %+v: want one node, reason %s, no replacement", c, disruption.MaxRunDuration)
			}
			if !strings.Contains(c.Message, "batch/job-1") || !strings.Contains(c.Message, revoke.Format(time.RFC3339)) {
				t.Errorf("message %q names neither the request nor when its limit passed", c.Message)
			}
			out = append(out, c.Nodes...)
		}
		return out
	}
	if got := propose(revoke.Add(time.Second)); strings.Join(got, ",") != "n1" {
		t.Errorf("within the grace: proposed %v, want n1 only (n2 still runs a pod of the request)", got)
	}
	if got := propose(rel.GraceEnd); strings.Join(got, ",") != "n1,n2" {
		t.Errorf("at the grace's end: proposed %v, want n1,n2", got)
	}
	loop := &processors.Loop{Now: revoke.Add(time.Second), Nodes: nodes, ScheduledPods: pods}
	if why := s.Explain(loop, "n3"); !strings.Contains(why, "passes at "+revoke.Format(time.RFC3339)) {
		t.Errorf("explain of a node whose limit is ahead: %q", why)
	}
	if why := s.Explain(loop, "n2"); !strings.Contains(why, "its 1 pods") ||
		!strings.Contains(why, rel.GraceEnd.Format(time.RFC3339)) {
		t.Errorf("explain of a revoked node still running the request's pod: %q", why)
	}
	if why := s.Explain(loop, "other"); why != "" {
		t.Errorf("explain of a node of no request: %q", why)
	}
	releases = nil
	if got := propose(rel.GraceEnd); len(got) != 0 {
		t.Errorf("without releases proposed %v", got)
	}
}
