package scaledown

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// deviceSession adds DRA devices and explanations to the fake session:
// devices gives each node's [allocated, total] devices; a full node's
// removal fails with why[node].
type deviceSession struct {
	*session
	devices map[string][2]int
	why     map[string]string
}

func (s *deviceSession) DeviceUsage(node string) (int, int) {
	d := s.devices[node]
	return d[0], d[1]
}

func (s *deviceSession) TryRemoveWhy(ctx context.Context, node string, move []*apiv1.Pod, avoid map[string]bool) error {
	if s.TryRemove(ctx, node, move, avoid) {
		return nil
	}
	return errors.New(s.why[node])
}

func TestPlannerDeviceUtilizationAndClaimBlockers(t *testing.T) {
	// Every node runs one pod of the given cpu (of 4).
	f := newFixture(t, 0, map[string]string{"idle-gpu": "3", "busy-gpu": "1", "half-gpu": "1", "plain": "1",
		"ext-gpu": "1"}, func(o *fixtureOptions) { o.NodeGroupDefaults.ScaleDownGPUUtilizationThreshold = 0.3 })
	const why = "pod default/p-half-gpu with resource claim(s) default/p-half-gpu-gpu-x fits no other node"
	sess := &deviceSession{session: f.sess,
		devices: map[string][2]int{"idle-gpu": {0, 2}, "busy-gpu": {2, 2}, "half-gpu": {1, 4}},
		why:     map[string]string{"half-gpu": why}}
	sess.full["half-gpu"] = true
	// ext-gpu has device-plugin GPUs: 1 of 2 requested (0.5 >= 0.3).
	for _, n := range f.nodes {
		if n.Name == "ext-gpu" {
			n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("2")
			if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range f.pods {
		if p.Spec.NodeName == "ext-gpu" {
			p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
		}
	}
	plan := f.planWith(t, t0, func(in *Input) { in.Session = sess })
	wantReasons := map[string]string{
		"idle-gpu": ReasonNotUnneededLongEnough, // cpu 0.75, but no device allocated
		"busy-gpu": ReasonNotUnderutilized,      // cpu 0.25, every device allocated
		"half-gpu": ReasonNoPlaceToMovePods,     // 1 of 4 devices; its pod's claim fits nowhere else
		"plain":    ReasonNotUnneededLongEnough,
		"ext-gpu":  ReasonNotUnderutilized,
	}
	gotReasons := map[string]string{}
	for n := range wantReasons {
		gotReasons[n] = plan.Unremovable[n]
	}
	if diff := cmp.Diff(wantReasons, gotReasons); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	gotUtil := map[string]float64{}
	for _, c := range plan.Unneeded {
		gotUtil[c.Node.Name] = c.Utilization
	}
	if diff := cmp.Diff(map[string]float64{"idle-gpu": 0, "plain": 0.25}, gotUtil); diff != "" {
		t.Errorf("utilisation of the unneeded nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"half-gpu": why}, plan.Details); diff != "" {
		t.Errorf("details (-want +got):\n%s", diff)
	}
	// Not simulated again for --unremovable-node-recheck-timeout: the
	// detail stays with RecentlyUnremovable.
	plan = f.planWith(t, t0.Add(time.Minute), func(in *Input) { in.Session = sess })
	if plan.Unremovable["half-gpu"] != ReasonRecentlyUnremovable || plan.Details["half-gpu"] != why {
		t.Errorf("a minute later: %q, %q; want RecentlyUnremovable with the claim", plan.Unremovable["half-gpu"], plan.Details["half-gpu"])
	}
	// A loop in which it is not a candidate (every device allocated for a
	// moment) does not lose the detail of the verdict it still waits on.
	sess.devices["half-gpu"] = [2]int{4, 4}
	plan = f.planWith(t, t0.Add(2*time.Minute), func(in *Input) { in.Session = sess })
	if plan.Unremovable["half-gpu"] != ReasonNotUnderutilized {
		t.Errorf("every device allocated: %q, want NotUnderutilized", plan.Unremovable["half-gpu"])
	}
	sess.devices["half-gpu"] = [2]int{1, 4}
	plan = f.planWith(t, t0.Add(3*time.Minute), func(in *Input) { in.Session = sess })
	if plan.Unremovable["half-gpu"] != ReasonRecentlyUnremovable || plan.Details["half-gpu"] != why {
		t.Errorf("a candidate again: %q, %q; want RecentlyUnremovable with the claim", plan.Unremovable["half-gpu"], plan.Details["half-gpu"])
	}
	// Its pod gone elsewhere and the claim released, the node is idle.
	sess.devices["half-gpu"] = [2]int{0, 4}
	sess.full["half-gpu"] = false
	plan = f.planWith(t, t0.Add(10*time.Minute), func(in *Input) { in.Session = sess })
	if plan.Unremovable["half-gpu"] != ReasonNotUnneededLongEnough || plan.Details["half-gpu"] != "" {
		t.Errorf("once idle: %q, %q; want NotUnneededLongEnough without detail", plan.Unremovable["half-gpu"], plan.Details["half-gpu"])
	}
}
