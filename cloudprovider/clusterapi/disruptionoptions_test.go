package clusterapi

import (
	"context"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// TestDisruptionOptionAnnotations: the disruption engine's per-group
// options are read from the group's annotations: a malformed lifetime is
// ignored (the default holds), a budget is passed on trimmed as written
// (the engine checks it).
func TestDisruptionOptionAnnotations(t *testing.T) {
	defaults := config.NodeGroupAutoscalingOptions{MaxNodeLifetime: 24 * time.Hour}
	for _, tc := range []struct {
		name         string
		ann          map[string]string
		wantNil      bool
		wantLifetime time.Duration
		wantBudget   string
	}{
		{name: "none", wantNil: true},
		{name: "both", ann: map[string]string{
			optionPrefix + "maxnodelifetime":  "2h",
			optionPrefix + "disruptionbudget": " nodes=1 ",
		}, wantLifetime: 2 * time.Hour, wantBudget: "nodes=1"},
		{name: "lifetime 0: never", ann: map[string]string{optionPrefix + "maxnodelifetime": "0s"}},
		{name: "malformed lifetime ignored", ann: map[string]string{optionPrefix + "maxnodelifetime": "a month"}, wantNil: true},
		{name: "negative lifetime ignored, budget kept", ann: map[string]string{
			optionPrefix + "maxnodelifetime":  "-1h",
			optionPrefix + "disruptionbudget": "nodes=10%;reasons=drifted",
		}, wantLifetime: 24 * time.Hour, wantBudget: "nodes=10%;reasons=drifted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := makeObj(kindMachineDeployment, "ns", "md").sizes("0", "3")
			for k, v := range tc.ann {
				o.ann(k, v)
			}
			p, _ := newProvider(t, nil, o)
			got, err := onlyGroup(t, p).GetOptions(context.Background(), defaults)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantNil {
				if got != nil {
					t.Errorf("options %+v, want none (the defaults)", got)
				}
				return
			}
			if got == nil || got.MaxNodeLifetime != tc.wantLifetime || got.DisruptionBudget != tc.wantBudget {
				t.Errorf("options %+v, want lifetime %v budget %q", got, tc.wantLifetime, tc.wantBudget)
			}
		})
	}
}
