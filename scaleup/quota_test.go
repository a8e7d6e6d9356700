package scaleup

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/capacityquota"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

type staticQuotas []capacityquota.Quota

func (s staticQuotas) Quotas(context.Context) []capacityquota.Quota { return s }

func quota(t *testing.T, name string, matchLabels map[string]string, limits map[string]string) capacityquota.Quota {
	t.Helper()
	cq := &capacityquota.CapacityQuota{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if matchLabels != nil {
		cq.Spec.Selector = &metav1.LabelSelector{MatchLabels: matchLabels}
	}
	cq.Spec.Limits.Resources = apiv1.ResourceList{}
	for k, v := range limits {
		cq.Spec.Limits.Resources[apiv1.ResourceName(k)] = resource.MustParse(v)
	}
	q, err := capacityquota.Parse(cq)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// CapacityQuotas cap a scale-up by the summed resources of the nodes they
// select, existing nodes counted; the tightest quota wins; a quota that
// selects other nodes does not limit.
func TestCapacityQuotasCapScaleUp(t *testing.T) {
	ctx := context.Background()
	small := map[string]string{"group": "small"}
	for _, tc := range []struct {
		name     string
		quotas   func(t *testing.T) []capacityquota.Quota
		existing int
		want     int
		reason   string
	}{
		{name: "no quota", quotas: func(*testing.T) []capacityquota.Quota { return nil }, want: 3},
		{name: "8 CPUs: 2 nodes of 4", want: 2, reason: "CapacityQuota",
			quotas: func(t *testing.T) []capacityquota.Quota {
				return []capacityquota.Quota{quota(t, "cpu8", small, map[string]string{"cpu": "8"})}
			}},
		{name: "2 nodes, 1 exists: 1 more", existing: 1, want: 1, reason: "CapacityQuota",
			quotas: func(t *testing.T) []capacityquota.Quota {
				return []capacityquota.Quota{quota(t, "n2", small, map[string]string{"nodes": "2"})}
			}},
		{name: "reached", existing: 1, want: 0, reason: "CapacityQuota n1 reached",
			quotas: func(t *testing.T) []capacityquota.Quota {
				return []capacityquota.Quota{quota(t, "n1", nil, map[string]string{"nodes": "1"})}
			}},
		{name: "the tightest of two", want: 1, reason: "CapacityQuota",
			quotas: func(t *testing.T) []capacityquota.Quota {
				return []capacityquota.Quota{quota(t, "cpu100", nil, map[string]string{"cpu": "100"}),
					quota(t, "mem20", small, map[string]string{"memory": "20Gi"})}
			}},
		{name: "another selection", want: 3,
			quotas: func(t *testing.T) []capacityquota.Quota {
				return []capacityquota.Quota{quota(t, "other", map[string]string{"group": "gpu"}, map[string]string{"nodes": "0"})}
			}},
		{name: "a resource the nodes lack", want: 3,
			quotas: func(t *testing.T) []capacityquota.Quota {
				return []capacityquota.Quota{quota(t, "gpus", nil, map[string]string{"nvidia.com/gpu": "0"})}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
			o := newOrchestrator(t, provider, nil)
			WithCapacityQuotas(staticQuotas(tc.quotas(t)))(o)
			in := Input{Now: time.Now(), Pending: pendingPods(12, "1")}
			for i := 0; i < tc.existing; i++ {
				// A full node of the group: it counts against the quota.
				n := templateNode("busy", "4")
				n.Labels = small
				n.Status.Capacity[apiv1.ResourceCPU] = resource.MustParse("4")
				in.Nodes = append(in.Nodes, n)
				in.ScheduledPods = append(in.ScheduledPods, onNode(pendingPods(1, "4")[0], "busy"))
			}
			res, err := runLoop(ctx, o, in)
			if err != nil {
				t.Fatal(err)
			}
			if got := increases(res)["small"]; got != tc.want {
				t.Fatalf("small +%d, want +%d", got, tc.want)
			}
			if tc.reason != "" {
				found := false
				for _, reason := range res.Remaining {
					found = found || strings.Contains(reason, tc.reason)
				}
				if !found {
					t.Errorf("no remaining pod names %q: %v", tc.reason, res.Remaining)
				}
			}
		})
	}
}

func onNode(p *apiv1.Pod, node string) *apiv1.Pod {
	p = p.DeepCopy()
	p.Name, p.UID = "running", "running"
	p.Spec.NodeName = node
	return p
}

// A copy of the totals counts nodes on its own.
func TestTotalsCloneIsIndependent(t *testing.T) {
	tmpl := templateNode("small", "4")
	orig := &totals{gpus: map[string]int64{"t4": 1},
		quotas: []quotaUse{{q: quota(t, "n3", nil, map[string]string{"nodes": "3"}), used: map[apiv1.ResourceName]int64{}}}}
	c := orig.clone()
	c.addNode(tmpl, nil)
	c.gpus["t4"] = 5
	if room, _, _ := orig.quotaRoom(tmpl); room != 3 || orig.gpus["t4"] != 1 || orig.nodes != 0 {
		t.Fatalf("the original changed: room %d, gpus %v, nodes %d", room, orig.gpus, orig.nodes)
	}
	if room, _, _ := c.quotaRoom(tmpl); room != 2 {
		t.Fatalf("the copy: room %d, want 2", room)
	}
}
