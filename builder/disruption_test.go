package builder

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	cpfake "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/processors/provreqs"
)

type noSource struct{}

func (noSource) Reason() disruption.Reason { return disruption.Drifted }

func (noSource) Propose(context.Context, *processors.Loop) []disruption.Candidate { return nil }

// TestDisruptionEngineRunsWithHealingOrASource: the engine is a repair of
// the loop when healing is on or a source is given, and absent otherwise.
func TestDisruptionEngineRunsWithHealingOrASource(t *testing.T) {
	for _, tc := range []struct {
		name     string
		healing  bool
		sources  []disruption.Source
		readOnly bool
		want     bool
	}{{"off", false, nil, false, false}, {"healing", true, nil, false, true}, {"a source", false, []disruption.Source{noSource{}}, false, true},
		{"read-only", true, []disruption.Source{noSource{}}, true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := config.Defaults()
			opts.NodeHealingEnabled = tc.healing
			in := Inputs{Opts: opts, Client: fake.NewSimpleClientset(), Provider: cpfake.NewProvider(),
				Recorder: record.NewFakeRecorder(1), Metrics: metrics.New(prometheus.NewRegistry()),
				Disruption: DisruptionInputs{Sources: tc.sources}, ReadOnly: tc.readOnly}
			var procs processors.Set
			engine, err := addDisruption(context.Background(), opts, in, &procs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := engine != nil && len(procs.Repairs) == 1; got != tc.want {
				t.Errorf("engine %v, repairs %d; want the engine: %v", engine != nil, len(procs.Repairs), tc.want)
			}
		})
	}
}

type fakeHolder map[string]string

func (h fakeHolder) Holding(node string) (bool, string) { why, ok := h[node]; return ok, why }

func (fakeHolder) ProcessPods(_ context.Context, _ *processors.Loop, pods []*apiv1.Pod) []*apiv1.Pod {
	return pods
}

// The ProvisioningRequests' processor holds nodes for the engine.
var _ holder = (*provreqs.Requests)(nil)

// TestProtectionsIncludeTheRequestsHolds: the engine's Protected hook
// answers for the nodes a pod-list processor holds (the
// ProvisioningRequests'), and for those of the given hook, first.
func TestProtectionsIncludeTheRequestsHolds(t *testing.T) {
	procs := processors.Set{PodLists: []processors.PodListProcessor{processors.ScaleUpDelay{},
		fakeHolder{"n1": "ProvisioningRequest ns/a: a node of the all-or-nothing request"}}}
	holders := bookingHolders(procs)
	if len(holders) != 1 {
		t.Fatalf("%d holders found, want the one", len(holders))
	}
	given := func(n string) (bool, string) { return n == "n2" || n == "n1", "given" }
	for _, tc := range []struct {
		name string
		hook func(string) (bool, string)
		node string
		want bool
		why  string
	}{
		{"held by a request", protections(nil, holders...), "n1", true, "ProvisioningRequest ns/a: a node of the all-or-nothing request"},
		{"not held", protections(nil, holders...), "n3", false, ""},
		{"the given hook first", protections(given, holders...), "n1", true, "given"},
		{"the given hook alone", protections(given, holders...), "n2", true, "given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := tc.hook(tc.node)
			if ok != tc.want || why != tc.why {
				t.Errorf("%s: got (%v, %q), want (%v, %q)", tc.node, ok, why, tc.want, tc.why)
			}
		})
	}
	if protections(nil) != nil {
		t.Error("no hook and no holder: want no Protected hook")
	}
}
