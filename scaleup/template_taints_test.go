package scaleup

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// A provider's template that carries start-up, status or ignored taints (as
// the node has at boot) is simulated without them, as upstream does: pods
// that do not tolerate them still get a node. Taints a node keeps (a
// dedicated pool's) still apply.
func TestProviderTemplateTaintsAreSanitised(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		taint string
		grows bool
	}{
		{"startup-taint prefix", "startup-taint.cluster-autoscaler.kubernetes.io/cni", true},
		{"status-taint prefix", "status-taint.cluster-autoscaler.kubernetes.io/gpu", true},
		{"--startup-taint", "example.com/booting", true},
		{"--status-taint", "example.com/health", true},
		{"--ignore-taint", "example.com/ignored", true},
		{"node condition", apiv1.TaintNodeNotReady, true},
		{"a taint the node keeps", "dedicated", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			tmpl := templateNode("tainted", "4")
			tmpl.Spec.Taints = []apiv1.Taint{{Key: tc.taint, Value: "x", Effect: apiv1.TaintEffectNoSchedule}}
			provider.AddNodeGroup("tainted", 0, 10, 0, tmpl)
			o := newOrchestrator(t, provider, func(o *Options) {
				o.Taints.StartupTaints = []string{"example.com/booting"}
				o.Taints.StatusTaints = []string{"example.com/health"}
				o.Taints.IgnoreTaints = []string{"example.com/ignored"}
			})
			res, err := runLoop(ctx, o, Input{Now: now, Pending: pendingPods(2, "1")})
			if err != nil {
				t.Fatal(err)
			}
			if got := increases(res)["tainted"]; (got > 0) != tc.grows {
				t.Errorf("tainted +%d (%d pods left); want growth: %v", got, len(res.Remaining), tc.grows)
			}
			if len(tmpl.Spec.Taints) != 1 {
				t.Error("the provider's template was modified")
			}
		})
	}
}
