package chart_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
)

// TestExplainerIsPrivateByDefault: the default render passes neither
// explainer flag (the binary's defaults: its own loopback listener, not
// the metrics port), declares no container port for it, and the Service
// carries the metrics port alone; values.yaml documents both flags.
// --explain-on-metrics-port is rendered only when the operator sets it.
func TestExplainerIsPrivateByDefault(t *testing.T) {
	m := render(t, release, namespace, "")
	_, c := m.deployment(t)
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--explain") {
			t.Errorf("default args carry %q", a)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" {
		t.Errorf("container ports %+v, want http alone", c.Ports)
	}
	svc := &apiv1.Service{}
	m.one(t, "Service", svc)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("service ports %+v, want the metrics port alone", svc.Spec.Ports)
	}
	values, err := os.ReadFile(filepath.Join(repoRoot, "charts", "cluster-autoscaler", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# explain-address: 127.0.0.1:8087", "# explain-on-metrics-port: false", "pods/portforward"} {
		if !strings.Contains(string(values), want) {
			t.Errorf("values.yaml lacks %q", want)
		}
	}

	m = render(t, release, namespace, "extraArgs:\n  explain-on-metrics-port: true\n  explain-address: \"\"\n")
	_, c = m.deployment(t)
	for _, want := range []string{"--explain-on-metrics-port=true", "--explain-address="} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %q", c.Args, want)
		}
	}
	checkArgsParse(t, c.Args)
}
