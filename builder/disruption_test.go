package builder

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	cpfake "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
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
