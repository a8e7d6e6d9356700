package kwok

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// TestDisruptionOptions: a group's options.maxNodeLifetime and
// options.disruptionBudget reach GetOptions over the defaults; a group
// without them keeps the defaults' lifetime; a negative lifetime is a
// config error; a budget is passed on as written (the engine checks it).
func TestDisruptionOptions(t *testing.T) {
	const yaml = `
nodeGroups:
- name: short
  maxSize: 3
  template: {capacity: {cpu: 1, memory: 1Gi, pods: 10}}
  options:
    maxNodeLifetime: 2h
    disruptionBudget: "nodes=1;reasons=expired | nodes=0;reasons=consolidatable"
- name: never
  maxSize: 3
  template: {capacity: {cpu: 1, memory: 1Gi, pods: 10}}
  options: {maxNodeLifetime: 0s, disruptionBudget: "not a budget"}
- name: other
  maxSize: 3
  template: {capacity: {cpu: 1, memory: 1Gi, pods: 10}}
  options: {scaleDownUnneededTime: 1m}
`
	c, err := ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	defaults := config.NodeGroupAutoscalingOptions{MaxNodeLifetime: 24 * time.Hour, ScaleDownUnneededTime: 10 * time.Minute}
	want := map[string]struct {
		lifetime time.Duration
		budget   string
	}{
		"short": {2 * time.Hour, "nodes=1;reasons=expired | nodes=0;reasons=consolidatable"},
		"never": {0, "not a budget"},
		"other": {24 * time.Hour, ""},
	}
	for _, g := range c.NodeGroups {
		o, err := (&NodeGroup{cfg: g}).GetOptions(context.Background(), defaults)
		if err != nil {
			t.Fatalf("%s: %v", g.Name, err)
		}
		w := want[g.Name]
		if o.MaxNodeLifetime != w.lifetime || o.DisruptionBudget != w.budget {
			t.Errorf("%s: lifetime %v budget %q, want %v and %q", g.Name, o.MaxNodeLifetime, o.DisruptionBudget, w.lifetime, w.budget)
		}
	}
	_, err = ParseConfig([]byte(`nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}, options: {maxNodeLifetime: -1h}}]`))
	if err == nil || !strings.Contains(err.Error(), "maxNodeLifetime") {
		t.Errorf("negative lifetime: error %v, want one naming maxNodeLifetime", err)
	}
}
