package aws

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// TestDisruptionOptionTags: the disruption engine's per-group options, a
// lifetime and a budget, are read from the option tags under either
// prefix; a malformed lifetime is an error naming the tag (the caller logs
// it and keeps the flags' values); the budget is passed on as written,
// for the engine to check.
func TestDisruptionOptionTags(t *testing.T) {
	withDefaults := func(f func(*config.NodeGroupAutoscalingOptions)) *config.NodeGroupAutoscalingOptions {
		o := optionDefaults
		f(&o)
		return &o
	}
	for _, tc := range []struct {
		name    string
		tags    map[string]string
		want    *config.NodeGroupAutoscalingOptions
		wantErr string
	}{
		{name: "both options", tags: map[string]string{
			OptionTagPrefix + "maxNodeLifetime":  "720h",
			OptionTagPrefix + "disruptionbudget": " nodes=1;reasons=expired | nodes=0;reasons=consolidatable;schedule=0 9 * * 1-5;duration=8h ",
		}, want: withDefaults(func(o *config.NodeGroupAutoscalingOptions) {
			o.MaxNodeLifetime = 720 * time.Hour
			o.DisruptionBudget = "nodes=1;reasons=expired | nodes=0;reasons=consolidatable;schedule=0 9 * * 1-5;duration=8h"
		})},
		{name: "alias prefix, lifetime 0 (never)", tags: map[string]string{OptionTagAliasPrefix + "maxnodelifetime": "0s"},
			want: withDefaults(func(o *config.NodeGroupAutoscalingOptions) {})},
		{name: "a budget that does not parse is still passed on", tags: map[string]string{OptionTagPrefix + "disruptionbudget": "nodes=lots"},
			want: withDefaults(func(o *config.NodeGroupAutoscalingOptions) { o.DisruptionBudget = "nodes=lots" })},
		{name: "malformed lifetime", tags: map[string]string{OptionTagPrefix + "maxnodelifetime": "a month"},
			wantErr: OptionTagPrefix + "maxnodelifetime"},
		{name: "negative lifetime", tags: map[string]string{OptionTagPrefix + "maxnodelifetime": "-1h"}, wantErr: "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseOptions(tc.tags, optionDefaults)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("options (-want +got):\n%s", d)
			}
		})
	}
}

// TestDisruptionOptionTagsThroughTheSDK: a group's tags reach GetOptions
// through the SDK against the fake.
func TestDisruptionOptionTagsThroughTheSDK(t *testing.T) {
	s := startFake(t)
	g := groupOf("short", 1)
	g.Tags = map[string]string{
		OptionTagPrefix + "maxnodelifetime":  "24h",
		OptionTagPrefix + "disruptionbudget": "nodes=1",
	}
	s.AddGroup(g)
	p := newTestProvider(t, []string{"0:10:short"}, nil)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := group(t, p, "short").GetOptions(ctx, optionDefaults)
	if err != nil || got == nil {
		t.Fatalf("options %v, %v; want the tags'", got, err)
	}
	if got.MaxNodeLifetime != 24*time.Hour || got.DisruptionBudget != "nodes=1" {
		t.Errorf("lifetime %v, budget %q; want 24h and nodes=1", got.MaxNodeLifetime, got.DisruptionBudget)
	}
}
